// The usual training losses on ATen, with their inputs checked first so that a wrong dtype, shape or class
// index is an accel::Error that says what was expected, never a crash or an opaque LibTorch message.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace accel::train {

struct LossConfig {
  std::string reduction = "mean";  // "mean", "sum" or "none"
  double label_smoothing = 0;  // cross_entropy only, in [0, 1]
  int64_t ignore_index = -100;  // cross_entropy and nll: rows with this target count for nothing
};

// name:
//   "cross_entropy"    input [N, C] floating logits, target int64 [N] class indices (label_smoothing, ignore_index)
//   "nll"              input [N, C] floating log-probabilities, target as cross_entropy (ignore_index)
//   "mse", "l1"        target of the input's shape and floating dtype
//   "bce_with_logits"  target of the input's shape and floating dtype
// Errors: unknown name or reduction, undefined tensors, tensors on different devices, label_smoothing outside
// [0, 1] or given to a loss other than cross_entropy, a class index outside [0, C) that is not ignore_index:
// Error(InvalidArgument); a wrong dtype: Error(Dtype); a wrong shape: Error(ShapeMismatch) with both shapes;
// anything ATen still refuses (e.g. a dtype without a kernel on the device): Error(Torch) naming the loss.
at::Tensor compute_loss(const std::string& name, const at::Tensor& input, const at::Tensor& target,
                        const LossConfig& config);
// The checks of compute_loss that need no tensors: the name, the reduction, label_smoothing's range and
// which loss takes it. Errors as compute_loss.
void check_loss_settings(const std::string& name, const LossConfig& config);
// compute_loss's checks alone, with its errors: for a target about to be used by a loss computed elsewhere
// (a captured CUDA graph's), against an input of the shape and dtype that loss sees.
void check_loss(const std::string& name, const at::Tensor& input, const at::Tensor& target, const LossConfig& config);

}  // namespace accel::train
