#include "train/precision/autocast.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <memory>
#include <vector>

#include "core/error.hpp"

namespace accel::train {

namespace {

// LibTorch 2.4 replaced the per-device autocast setters with device-typed ones and warns on every call of
// the old ones (several per step); 1.13 has only the old ones.
#if TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR >= 204
void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType type) {
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, type);
}
bool autocast_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
at::ScalarType autocast_type(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
#else
void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType type) {
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(type);
  } else {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(type);
  }
}
bool autocast_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
at::ScalarType autocast_type(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
}
#endif

// The explicit scopes this thread opened, innermost last (LibTorch's autocast state is per thread too).
thread_local std::vector<std::unique_ptr<AutocastScope>> explicit_scopes;

}  // namespace

AutocastScope::AutocastScope(const std::string& mixed_precision, const std::string& device) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  active_ = mixed_precision == "bf16" || (mixed_precision == "fp16" && cuda);
  if (!active_) return;
  device_ = cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  was_enabled_ = autocast_enabled(device_);
  previous_type_ = autocast_type(device_);
  set_autocast(device_, true, mixed_precision == "bf16" ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(device_, was_enabled_, previous_type_);
}

void autocast_begin(const distributed::State& state) {
  explicit_scopes.push_back(
      std::make_unique<AutocastScope>(state.options().get_string("mixed_precision"), state.device()));
}

void autocast_end() {
  if (explicit_scopes.empty()) {
    fail(Code::InvalidState, "autocast end without a matching begin on this thread");
  }
  explicit_scopes.pop_back();
}

}  // namespace accel::train
