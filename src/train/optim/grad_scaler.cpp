#include "train/optim/grad_scaler.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/serialize/archive.h>

#include <cmath>

#include "core/error.hpp"
#include "core/options.hpp"
#include "train/optim/archive.hpp"

namespace accel::train {
namespace {

// torch asserts the two factors; the other checks keep the rule meaningful (a scale of 0 or an interval
// that is never reached).
void validate(const GradScalerConfig& config) {
  require_argument(config.init_scale > 0 && std::isfinite(config.init_scale),
          "GradScaler init_scale must be a finite number > 0, got " + format_number(config.init_scale));
  require_argument(config.growth_factor > 1.0,
          "GradScaler growth_factor must be > 1.0 (The growth factor must be > 1.0.), got " +
              format_number(config.growth_factor));
  require_argument(config.backoff_factor > 0 && config.backoff_factor < 1.0,
          "GradScaler backoff_factor must be in (0, 1) (The backoff factor must be < 1.0.), got " +
              format_number(config.backoff_factor));
  require_argument(config.growth_interval >= 1,
          "GradScaler growth_interval must be >= 1, got " + std::to_string(config.growth_interval));
}

// The defined grads of `parameters`, checked before any is touched so an error leaves them all as they were.
std::vector<at::Tensor> grads_to_unscale(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    require_argument(parameters[i].defined(), "GradScaler.unscale: parameter " + std::to_string(i) + " is undefined");
    const auto grad = parameters[i].grad();
    if (!grad.defined()) continue;
    if (grad.scalar_type() == at::kHalf) fail(Code::Dtype, "Attempting to unscale FP16 gradients.");
    grads.push_back(grad);
  }
  return grads;
}

}  // namespace

GradScaler::GradScaler(GradScalerConfig config) : config_(config) { validate(config_); }

void GradScaler::require_scale(const char* action) const {
  if (!scale_.defined()) {
    fail(Code::InvalidState, std::string("Attempted ") + action +
                                 " but _scale is None.  This may indicate your script did not use "
                                 "scaler.scale(loss or outputs) earlier in the iteration.");
  }
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  require_argument(loss.defined(), "GradScaler.scale: the loss is an undefined tensor");
  if (!at::isFloatingType(loss.scalar_type())) {
    fail(Code::Dtype, std::string("GradScaler.scale: the loss must be a floating tensor, got ") +
                          c10::toString(loss.scalar_type()));
  }
  return loss.mul(scale_tensor(loss.device()).to(loss.device()));
}

void GradScaler::unscale(Optimizer& optimizer) {
  require_scale("unscale_");
  const auto existing = optimizers_.find(&optimizer);
  if (existing != optimizers_.end() && existing->second.stage == Stage::Unscaled) {
    fail(Code::InvalidState, "unscale_() has already been called on this optimizer since the last update().");
  }
  if (existing != optimizers_.end() && existing->second.stage == Stage::Stepped) {
    fail(Code::InvalidState, "unscale_() is being called after step().");
  }
  const auto grads = grads_to_unscale(optimizer.gradient_holders());
  // One host sync for all grads; torch syncs as well, when step() reads found_inf.
  // Under ZeRO stage 2 a rank sees its own gradients only: every rank skips the step if any overflowed.
  optimizers_[&optimizer] = {Stage::Unscaled, optimizer.overflow_on_any_rank(unscale_grads(grads).item<bool>())};
}

at::Tensor GradScaler::scale_tensor(const c10::Device& device) {
  if (!scale_.defined()) scale_ = at::full({}, config_.init_scale, at::TensorOptions().dtype(at::kFloat).device(device));
  return scale_;
}

bool GradScaler::unscale_parameters(const std::vector<at::Tensor>& parameters) {
  return unscale_on_device(parameters).item<bool>();
}

void GradScaler::update_after(bool found_inf) {
  require_scale("update");
  apply_update_rule(found_inf);
}

at::Tensor GradScaler::unscale_on_device(const std::vector<at::Tensor>& parameters) {
  require_scale("unscale_");
  return unscale_grads(grads_to_unscale(parameters));
}

at::Tensor GradScaler::unscale_grads(const std::vector<at::Tensor>& grads) const {
  at::NoGradGuard no_grad;
  const auto inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);  // as torch: float32(1/float64)
  std::vector<at::Tensor> non_finite;  // one flag per grad, gathered on the scale's device
  for (const auto& grad : grads) {
    auto values = grad.is_sparse() ? grad._values() : grad;
    non_finite.push_back(at::isfinite(values).all().logical_not().to(scale_.device()));
    values.mul_(inv_scale.to(values.device()));
  }
  if (non_finite.empty()) return at::zeros({}, scale_.options().dtype(at::kBool));
  return at::stack(non_finite).any();
}

bool GradScaler::ready(const Optimizer& optimizer) const { return optimizers_.count(&optimizer) == 0; }

void GradScaler::forget(const Optimizer& optimizer) { optimizers_.erase(&optimizer); }

bool GradScaler::step(Optimizer& optimizer) {
  require_scale("step");
  if (!ready(optimizer) && optimizers_.at(&optimizer).stage == Stage::Stepped) {
    fail(Code::InvalidState, "step() has already been called since the last update().");
  }
  if (ready(optimizer)) unscale(optimizer);
  auto& state = optimizers_.at(&optimizer);
  if (!state.found_inf) optimizer.step();
  state.stage = Stage::Stepped;
  return state.found_inf;
}

void GradScaler::update(const Optimizer& optimizer) {
  require_scale("update");
  const auto recorded = optimizers_.find(&optimizer);
  if (recorded == optimizers_.end()) fail(Code::InvalidState, "No inf checks were recorded prior to update.");
  apply_update_rule(recorded->second.found_inf);
  optimizers_.erase(recorded);
}

// _amp_update_scale_ (AmpKernels.cu): products in double, stored as float32; never grows to inf.
void GradScaler::apply_update_rule(bool found_inf) {
  const double current = scale_.item<float>();
  const int64_t tracker = growth_tracker();
  if (found_inf) {
    scale_.fill_(static_cast<float>(current * config_.backoff_factor));
    set_growth_tracker(0);
  } else if (tracker + 1 == config_.growth_interval) {
    const auto grown = static_cast<float>(current * config_.growth_factor);
    if (std::isfinite(grown)) scale_.fill_(grown);
    set_growth_tracker(0);
  } else {
    set_growth_tracker(tracker + 1);
  }
}

void GradScaler::update_on_device(const at::Tensor& found_inf) {
  require_scale("update");
  at::NoGradGuard no_grad;
  if (!device_growth_tracker_.defined()) {
    device_growth_tracker_ = at::full({}, growth_tracker_, scale_.options().dtype(at::kLong));
  }
  const auto scale = scale_.to(at::kDouble);
  const auto backed_off = scale.mul(config_.backoff_factor).to(at::kFloat);
  const auto grown = scale.mul(config_.growth_factor).to(at::kFloat);
  const auto next = device_growth_tracker_.add(1);
  const auto grow = found_inf.logical_not().logical_and(next.eq(config_.growth_interval));
  scale_.copy_(at::where(found_inf, backed_off, at::where(grow.logical_and(at::isfinite(grown)), grown, scale_)));
  device_growth_tracker_.copy_(next.masked_fill(found_inf.logical_or(grow), 0));
}

void GradScaler::set_growth_tracker(int64_t tracker) {
  if (device_growth_tracker_.defined()) {
    device_growth_tracker_.fill_(tracker);
  } else {
    growth_tracker_ = tracker;
  }
}

double GradScaler::get_scale() const { return scale_.defined() ? scale_.item<float>() : config_.init_scale; }

int64_t GradScaler::growth_tracker() const {
  return device_growth_tracker_.defined() ? device_growth_tracker_.item<int64_t>() : growth_tracker_;
}

std::string GradScaler::save_state() const {
  torch::serialize::OutputArchive archive;
  archive.write("scale", c10::IValue(get_scale()));
  archive.write("growth_factor", c10::IValue(config_.growth_factor));
  archive.write("backoff_factor", c10::IValue(config_.backoff_factor));
  archive.write("growth_interval", c10::IValue(config_.growth_interval));
  archive.write("_growth_tracker", c10::IValue(growth_tracker()));
  return archive_bytes(archive);
}

void GradScaler::load_state(const std::string& bytes) {
  auto archive = read_archive(bytes, "GradScaler");
  GradScalerConfig loaded;
  loaded.init_scale = read_double(archive, "scale", "GradScaler");
  loaded.growth_factor = read_double(archive, "growth_factor", "GradScaler");
  loaded.backoff_factor = read_double(archive, "backoff_factor", "GradScaler");
  loaded.growth_interval = read_int(archive, "growth_interval", "GradScaler");
  const int64_t tracker = read_int(archive, "_growth_tracker", "GradScaler");
  validate(loaded);
  require_argument(tracker >= 0, "GradScaler state's _growth_tracker must be >= 0, got " + std::to_string(tracker));

  // As load_state_dict: the saved scale is also the new init_scale, for a scale tensor not made yet.
  config_ = loaded;
  if (scale_.defined()) scale_.fill_(loaded.init_scale);
  set_growth_tracker(tracker);
}

}  // namespace accel::train
