// Gradient clipping as torch.nn.utils (1.13) does it, which is what Accelerate's clip_grad_norm_ and
// clip_grad_value_ call once the grads are unscaled. Parameters without grad are ignored; an undefined
// parameter is Error(InvalidArgument).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace accel::train {

// Scales every grad by min(1, max_norm / (total_norm + 1e-6)) and returns total_norm, the norm_type-norm of
// all grads together (norm_type may be infinity: the largest absolute value); 0 when no parameter has a
// grad. A non-finite total norm is returned as is and turns the grads non-finite, as in torch.
// max_norm <= 0 or NaN, norm_type <= 0 or NaN: Error(InvalidArgument).
double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type = 2.0);
// The same without reading the norm back (no host synchronisation, so it can be captured in a CUDA graph):
// the total norm as a 0-dim tensor on the first grad's device, undefined when no parameter has a grad.
at::Tensor clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type = 2.0);

// clip_grad_norm's parts, for a total norm whose per-parameter norms are measured where the gradients are
// (ZeRO stage 2, train/optim/zero_optimizer.hpp): the same checks, the same per-grad norm, the same total and
// scale, so that the result is the same bits.
// Error(InvalidArgument) for what clip_grad_norm refuses: max_norm, norm_type, an undefined parameter.
void check_clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type);
// One non-empty grad's norm_type-norm (infinity: its largest absolute value), a 0-dim tensor on its device.
at::Tensor grad_norm(const at::Tensor& grad, double norm_type);
// The norm_type-norm of `norms` (not empty; 0-dim, on one device), then every grad scaled by
// min(1, max_norm / (total + 1e-6)); returns the total.
at::Tensor scale_by_total_norm(const std::vector<at::Tensor>& norms, const std::vector<at::Tensor>& grads,
                               double max_norm, double norm_type);

// Clamps every grad to [-clip_value, clip_value]. clip_value < 0 or NaN: Error(InvalidArgument).
void clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value);

}  // namespace accel::train
