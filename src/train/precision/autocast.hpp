// The state's mixed precision as LibTorch autocast: around each forward of a prepared model, and as an
// explicit scope for code outside it (Accelerate's accelerator.autocast()), e.g. a loss the caller computes.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "distributed/state.hpp"

namespace accel::train {

// Autocast to bf16 (CPU or CUDA) or fp16 (CUDA; LibTorch 1.13 has no fp16 CPU autocast, so fp16 on the CPU
// is the grad scaler alone) while it lives, on the calling thread; nothing for "no". Restores what was in
// effect before, so scopes nest (a forward inside an explicit scope leaves it on).
class AutocastScope {
 public:
  AutocastScope(const std::string& mixed_precision, const std::string& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  bool active() const { return active_; }

 private:
  bool active_ = false;
  c10::DeviceType device_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType previous_type_ = c10::ScalarType::Float;
};

// The explicit scope, as a begin/end pair per thread: begin opens a scope for the state's mixed precision
// and device, end closes the innermost one this thread opened (Error(InvalidState) when there is none).
void autocast_begin(const distributed::State& state);
void autocast_end();

}  // namespace accel::train
