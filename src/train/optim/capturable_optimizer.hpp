// The optimizer step in a form a CUDA graph can capture: nothing is read back from the device, the learning
// rates and Adam's step counts live in device tensors that every replay reads, and an fp16 overflow skips
// the step on the device. It works on the torch::optim state of the optimizer it belongs to, in place, so
// save_state() and an eager step see what it did.
//
// Its arithmetic is torch::optim's (SGD with momentum, dampening, nesterov and weight decay; Adam; AdamW),
// operation for operation, with two differences where a host scalar becomes a device tensor:
// - the parameter update: torch::optim adds -lr * d with one rounding (add's alpha), this adds the product
//   rounded first (addcmul with a 0-dim lr), so each element may differ by one unit in the last place
//   per step;
// - Adam's denominator divides by sqrt(bias_correction2) as a float tensor; on CUDA, where LibTorch turns a
//   division by a host scalar into a multiplication by its reciprocal, it does the same.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace accel::train {

// Thrown by a capturing step when a parameter with a gradient has no optimizer state yet (torch::optim
// makes it at a parameter's first step, which a replay would redo every time): the step can run eagerly,
// and a later capture can succeed.
struct OptimizerStateNotReady : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CapturableOptimizer {
 public:
  // kind: "sgd", "adam" or "adamw", the optimizer's. Reads the step counts the optimizer has.
  CapturableOptimizer(torch::optim::Optimizer& optimizer, std::string kind);
  ~CapturableOptimizer();
  CapturableOptimizer(const CapturableOptimizer&) = delete;
  CapturableOptimizer& operator=(const CapturableOptimizer&) = delete;

  // Brings the device values a step reads up to the host's: each group's lr as the optimizer has it now
  // (a scheduler may have changed it; one kernel for each lr that changed since the last call, none
  // otherwise), and Adam's step counts when an eager step or a load changed them (a copy that waits for
  // the device). Call it before each step or replay, outside a capture.
  void refresh();
  // What a capture bakes in as constants: every group setting but the lr, in a fixed order. A captured
  // step is valid while these are unchanged.
  std::vector<double> constants() const;

  // One step of the parameters that have a gradient. skip: a 0-dim bool tensor on the parameters' device
  // (nothing changes where it holds true: an fp16 overflow), or undefined. capturing: the step is being
  // captured; a parameter with a gradient and no state then throws OptimizerStateNotReady, while an eager
  // step makes the state as torch::optim does (reading `skip` first, since a skipped step makes none).
  void step(const at::Tensor& skip, bool capturing);

  // The step counts as torch::optim keeps them (host integers), written from the device where this
  // class's steps advanced them: before save_state() or an eager torch::optim step. Reads the device.
  void write_back();
  // The torch::optim state changed behind this class (an eager step, a load): its step counts are
  // read again by the next refresh() or step().
  void invalidate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::train
