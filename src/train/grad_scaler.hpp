// torch's GradScaler (reference section 7) written with ordinary tensor ops: LibTorch 1.13 has no CPU
// kernels for _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_, so this works on any device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/optimizer.hpp"

namespace accel::train {

struct GradScalerConfig {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// One scaler stage for all parameters (torch keeps one per optimizer): Accelerate unscales, steps and
// updates each optimizer in turn, so one stage is enough. Stages: ready -> unscaled -> stepped -> update()
// -> ready. Torch's AssertionErrors and RuntimeErrors about the order of calls are Error(InvalidState)
// with torch's message.
class GradScaler {
 public:
  // growth_factor <= 1, backoff_factor outside (0, 1), init_scale <= 0 or growth_interval < 1:
  // Error(InvalidArgument) naming the key.
  explicit GradScaler(GradScalerConfig config = {});

  // loss * scale, with torch's type promotion. The scale is a float32 scalar tensor made lazily on the
  // device of the first loss. An undefined or non-floating loss: Error(InvalidArgument) / Error(Dtype).
  at::Tensor scale(const at::Tensor& loss);
  // Multiplies every defined grad by float32(1/scale) and records whether any grad held inf or NaN.
  // Called twice before update(), after step(), or before any scale(): Error(InvalidState). An fp16 grad:
  // Error(Dtype) ("Attempting to unscale FP16 gradients.").
  void unscale(const std::vector<at::Tensor>& parameters);
  // Unscales the optimizer's parameters if not done yet, then calls optimizer.step() only if no grad was
  // inf/NaN. Returns true when the step was skipped. Twice before update(): Error(InvalidState).
  bool step(Optimizer& optimizer);
  // The growth / backoff rule of _amp_update_scale_; then back to the ready stage. Without an unscale()
  // or step() since the last update: Error(InvalidState).
  void update();

  double get_scale() const;  // init_scale until the first scale()
  int64_t growth_tracker() const;  // clean updates since the last growth or backoff

  // torch's state_dict: scale, growth_factor, backoff_factor, growth_interval and the growth tracker;
  // loading restores them all (as load_state_dict, the stage is kept). Bytes that are not a scaler
  // state: Error(InvalidArgument).
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  enum class Stage { Ready, Unscaled, Stepped };

  void require_scale(const char* action) const;

  GradScalerConfig config_;
  at::Tensor scale_;  // undefined until the first scale()
  int64_t growth_tracker_ = 0;
  Stage stage_ = Stage::Ready;
  bool found_inf_ = false;
};

}  // namespace accel::train
