// torch's GradScaler (reference section 7) written with ordinary tensor ops: LibTorch 1.13 has no CPU
// kernels for _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_, so this works on any device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/optim/optimizer.hpp"

namespace accel::train {

struct GradScalerConfig {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// A stage per optimizer, as torch keeps: ready -> unscaled -> stepped -> update(optimizer) -> ready. Several
// optimizers (a GAN's generator and discriminator) are unscaled, checked for inf/NaN, stepped and updated
// apart. Torch's AssertionErrors and RuntimeErrors
// about the order of calls are Error(InvalidState) with torch's message.
class GradScaler {
 public:
  // growth_factor <= 1, backoff_factor outside (0, 1), init_scale <= 0 or growth_interval < 1:
  // Error(InvalidArgument) naming the key.
  explicit GradScaler(GradScalerConfig config = {});

  // loss * scale, with torch's type promotion. The scale is a float32 scalar tensor made lazily on the
  // device of the first loss. An undefined or non-floating loss: Error(InvalidArgument) / Error(Dtype).
  at::Tensor scale(const at::Tensor& loss);
  // torch's unscale_(optimizer): multiplies every defined grad of the optimizer's parameters by
  // float32(1/scale) and records whether any held inf or NaN. Called twice for one optimizer before
  // update(), after its step(), or before any scale(): Error(InvalidState). An fp16 grad: Error(Dtype)
  // ("Attempting to unscale FP16 gradients."), with no grad changed.
  void unscale(Optimizer& optimizer);
  // Whether the optimizer is at the ready stage (neither unscaled nor stepped since the last update()).
  bool ready(const Optimizer& optimizer) const;
  // Drops what is recorded of an optimizer about to be destroyed (its address may be reused).
  void forget(const Optimizer& optimizer);
  // Unscales the optimizer's parameters if not done yet, then calls optimizer.step() only if none of its
  // grads was inf/NaN. Returns true when the step was skipped. Twice before update(): Error(InvalidState).
  bool step(Optimizer& optimizer);
  // The growth / backoff rule of _amp_update_scale_ after one optimizer's step, as Accelerate updates
  // after each optimizer's step: the rule applied to its own inf check, and only it returns to ready (torch's
  // update() resets every optimizer, so one unscaled meanwhile, clipped before its step, would be unscaled
  // twice). Without an unscale() or step() of it since its last update: Error(InvalidState).
  void update(const Optimizer& optimizer);

  // For gradients whose optimizer is not accel's (a model of the caller's tensors trained by its own
  // runtime's optimizer), what scale(), unscale() and update() do, without per-optimizer stages: the
  // scale as a 0-dim float32 tensor on device (made there with init_scale when there is none yet) to
  // multiply the loss by in the caller's runtime; the defined grads of `parameters` unscaled, returning
  // whether any held inf or NaN (reading the device; errors as unscale()); and update()'s rule applied to
  // a found_inf the caller kept.
  at::Tensor scale_tensor(const c10::Device& device);
  bool unscale_parameters(const std::vector<at::Tensor>& parameters);
  void update_after(bool found_inf);

  // For a step that must not synchronise with the device (a captured CUDA graph): unscale() of the
  // defined grads of `parameters` without the per-optimizer stages, returning whether any held inf or NaN
  // as a 0-dim bool tensor on the scale's device instead of reading it. Errors as unscale().
  at::Tensor unscale_on_device(const std::vector<at::Tensor>& parameters);
  // update()'s rule computed on the device from such a flag: the scale and the growth tracker change in
  // device memory and nothing is read back. The first call moves the growth tracker to the device, where
  // it stays (growth_tracker(), save_state(), load_state() and update() then read and write it there);
  // make that first call outside a capture, since a captured one would set the tracker on every replay.
  void update_on_device(const at::Tensor& found_inf);

  double get_scale() const;  // init_scale until the first scale()
  int64_t growth_tracker() const;  // clean updates since the last growth or backoff

  // torch's state_dict: scale, growth_factor, backoff_factor, growth_interval and the growth tracker;
  // loading restores them all (as load_state_dict, the stage is kept). Bytes that are not a scaler
  // state: Error(InvalidArgument).
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };

  void require_scale(const char* action) const;
  // Multiplies the grads by float32(1/scale); returns the 0-dim "any was inf or NaN" flag.
  at::Tensor unscale_grads(const std::vector<at::Tensor>& grads) const;
  void apply_update_rule(bool found_inf);
  void set_growth_tracker(int64_t tracker);

  GradScalerConfig config_;
  at::Tensor scale_;  // undefined until the first scale()
  int64_t growth_tracker_ = 0;  // while device_growth_tracker_ is undefined
  at::Tensor device_growth_tracker_;  // int64, once update_on_device ran
  // Optimizers unscaled or stepped since the last update(); those not in it are ready.
  std::map<const Optimizer*, OptimizerState> optimizers_;
};

}  // namespace accel::train
