// The optimizer's side of ZeRO stages 1 and 2 (DeepSpeed's zero_optimization.stage, PyTorch's
// ZeroRedundancyOptimizer): each rank steps, and keeps optimizer state for, only the parameters it owns
// (train/zero_partition.hpp), then every rank takes every updated parameter from its owner. What must
// agree over the ranks is made to: the gradient norm that clipping scales by (stage 2, where a rank holds
// only its own gradients) and the fp16 scaler's overflow flag. Every figure comes out bit-identical to data
// parallelism's (zero_stage 0): the same kernels run on the same tensors, and the shared norms are combined
// in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/named_tensors.hpp"
#include "distributed/state.hpp"
#include "train/optimizer.hpp"
#include "train/zero_partition.hpp"

namespace accel::train {

class ZeroShard {
 public:
  // parameters: the model's trainable parameters, in the order the partition's indices refer to.
  ZeroShard(std::shared_ptr<distributed::State> state, ZeroPartition partition, NamedTensors parameters);

  int32_t stage() const { return partition_.stage; }
  // Whether this rank owns the parameter (false for a tensor that is not one of the model's parameters).
  bool owns(const at::Tensor& parameter) const;
  // Whether the tensor is one of the split parameters.
  bool holds(const at::Tensor& parameter) const;
  // The rank that owns the parameter of this name (a name of the model's trainable parameters; another:
  // Error(InvalidArgument)).
  int32_t owner_of(const std::string& name) const;

  // Runs `step` (an optimizer step, which leaves parameters without a gradient alone) with the gradients of
  // the parameters of other ranks hidden, then gives every rank the updated parameters of every owner (an
  // all-gather per gradient bucket). Collective.
  void step(const std::function<void()>& step);
  // Whether any rank found an inf or NaN in its gradients (stage 2, where each rank sees its own; under
  // stage 1 every rank holds every averaged gradient and found_inf is returned as it is). Collective then.
  bool any_rank(bool found_inf);
  // torch.nn.utils.clip_grad_norm_ over `parameters` (every one of them split here; otherwise
  // Error(Unsupported)), each rank measuring the gradients it owns: the per-parameter norms are shared and
  // stacked in the order of `parameters`, as clip_grad_norm stacks them, so the total norm and the scale
  // are the same bits. Scales this rank's own gradients and returns the total norm. Collective; the errors
  // of clip_grad_norm.
  double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type);
  // Every rank's bytes, in rank order. Collective.
  std::vector<std::string> gather_bytes(const std::string& bytes);
  int32_t rank() const { return partition_.rank; }

 private:
  void gather_parameters();

  std::shared_ptr<distributed::State> state_;
  ZeroPartition partition_;
  NamedTensors parameters_;
  std::unordered_map<const c10::TensorImpl*, int32_t> owner_;
};

class Model;

// prepare_optimizer's hook: attaches a ZeroShard to an optimizer made over the model's trainable
// parameters when the model is prepared for ZeRO (Model::zero_partition); nothing for another model.
void shard_for_zero(const Model& model, Optimizer& optimizer);

}  // namespace accel::train
