#include "train/optim/clipping.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/norm.h>
#include <ATen/ops/stack.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/options.hpp"

namespace accel::train {
namespace {

std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& parameters, const char* caller) {
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].defined()) {
      fail(Code::InvalidArgument, std::string(caller) + ": parameter " + std::to_string(i) + " is undefined");
    }
    const auto grad = parameters[i].grad();
    if (grad.defined()) grads.push_back(grad);
  }
  return grads;
}

void check_arguments(double max_norm, double norm_type) {
  if (!(max_norm > 0)) fail(Code::InvalidArgument, "clip_grad_norm: max_norm must be > 0, got " + format_number(max_norm));
  if (!(norm_type > 0)) {
    fail(Code::InvalidArgument, "clip_grad_norm: norm_type must be > 0 or inf, got " + format_number(norm_type));
  }
}

}  // namespace

void check_clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  check_arguments(max_norm, norm_type);
  defined_grads(parameters, "clip_grad_norm");
}

at::Tensor grad_norm(const at::Tensor& grad, double norm_type) {
  return std::isinf(norm_type) ? grad.abs().max() : at::norm(grad, norm_type);
}

at::Tensor scale_by_total_norm(const std::vector<at::Tensor>& norms, const std::vector<at::Tensor>& grads,
                               double max_norm, double norm_type) {
  const auto stacked = at::stack(norms);
  const auto total = std::isinf(norm_type) ? stacked.max() : at::norm(stacked, norm_type);
  // As torch: max_norm / (total + 1e-6) is Tensor.__rdiv__, i.e. reciprocal() * max_norm, clamped to 1.
  const auto coefficient = total.add(1e-6).reciprocal().mul(max_norm).clamp_max(1.0);
  for (const auto& grad : grads) grad.mul_(coefficient.to(grad.device()));
  return total;
}

at::Tensor clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  check_arguments(max_norm, norm_type);
  const auto grads = defined_grads(parameters, "clip_grad_norm");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& grad : grads) {
    // An empty grad adds nothing to any norm (and torch's abs().max() would fail on it).
    if (grad.numel() > 0) norms.push_back(grad_norm(grad, norm_type).to(grads.front().device()));
  }
  if (norms.empty()) return {};
  return scale_by_total_norm(norms, grads, max_norm, norm_type);
}

double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  const auto total = clip_grad_norm_on_device(parameters, max_norm, norm_type);
  return total.defined() ? total.item<double>() : 0.0;
}

void clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value) {
  if (!(clip_value >= 0)) {
    fail(Code::InvalidArgument, "clip_grad_value: clip_value must be >= 0, got " + format_number(clip_value));
  }
  const auto grads = defined_grads(parameters, "clip_grad_value");
  at::NoGradGuard no_grad;
  for (const auto& grad : grads) grad.clamp_(-clip_value, clip_value);
}

}  // namespace accel::train
