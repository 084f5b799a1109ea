// The optimizer's side of ZeRO stages 1, 2 and 3 (DeepSpeed's zero_optimization.stage, PyTorch's
// ZeroRedundancyOptimizer): each rank steps, and keeps optimizer state for, only the elements it owns
// (train/ddp/zero_partition.hpp), as pieces: 1-d views of its parameters' elements, stepped by an optimizer of
// their own; then every rank takes every updated element from its owner. What must agree over the ranks is
// made to: the gradient norm that clipping scales by (stage 2, where a rank holds only its own gradients)
// and the fp16 scaler's overflow flag. Every figure comes out bit-identical to data parallelism's
// (zero_stage 0): the optimizers' kernels are elementwise and the pieces are cut where those kernels cut
// (zero_partition.hpp), and the shared norms are combined in the same order.
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
#include "train/ddp/zero_partition.hpp"

namespace accel::train {

class ZeroShard {
 public:
  // parameters: the model's trainable parameters, in the order the partition's indices refer to; each must
  // be contiguous (its pieces are views of its memory): otherwise Error(Unsupported).
  ZeroShard(std::shared_ptr<distributed::State> state, ZeroPartition partition, NamedTensors parameters);

  int32_t stage() const { return partition_.stage; }
  int32_t rank() const { return partition_.rank; }
  const ZeroPartition& partition() const { return partition_; }
  const NamedTensors& parameters() const { return parameters_; }
  // This rank's pieces (partition().pieces_of(rank())) and, parallel to them, their views: of the parameters'
  // memory, of stage 3's chunks, or with host_pieces (stages 1 and 2 offloaded) host copies, filled from the
  // parameters by step() before the optimizer's step and written back to them after it.
  const std::vector<ZeroPiece>& pieces() const { return pieces_; }
  const std::vector<at::Tensor>& views() const { return views_; }
  // Whether the tensor is one of the split parameters.
  bool holds(const at::Tensor& parameter) const;
  // The partition's index of a split parameter (another tensor: Error(InvalidArgument)).
  size_t index_of(const at::Tensor& parameter) const;
  // This rank's pieces of a parameter (empty for one it owns nothing of, or that is not split here): the
  // same tensors for the shard's life, which an optimizer keys its state by.
  std::vector<at::Tensor> pieces_of(const at::Tensor& parameter) const;
  // This rank's pieces of `parameters`, each with its gradient brought up to date: a view of the
  // parameter's gradient where it has one, else the piece the reducer holds (stage 2), else none. (With
  // host_pieces too: unscaling and clipping work on the model's device; step() copies the result.)
  std::vector<at::Tensor> gradient_pieces(const std::vector<at::Tensor>& parameters);

  // Runs `step` (an optimizer step over the pieces, which leaves a piece without a gradient alone) with the
  // pieces' gradients up to date, then, under stages 1 and 2, gives every rank the updated elements of every
  // owner (an all-gather per gradient bucket; collective). Under stage 3 the pieces are views of this rank's
  // chunks of the units (ZeroPartition::parameter_chunks), which the caller's next use gathers.
  void step(const std::function<void()>& step);
  // zero_grad for what the pieces hold: their gradients and the reducer's held pieces dropped
  // (set_to_none) or zeroed.
  void forget_gradients(bool set_to_none);
  // Whether any rank found an inf or NaN in its gradients (stage 2, where each rank sees its own; under
  // stage 1 every rank holds every averaged gradient and found_inf is returned as it is). Collective then.
  bool any_rank(bool found_inf);
  // torch.nn.utils.clip_grad_norm_ over `parameters` (every one of them split here; otherwise
  // Error(Unsupported)), under stage 2: a parameter one rank owns whole is measured there and its norm
  // shared; one owned in pieces has its pieces gathered and is measured whole on every rank. The norms are
  // stacked in the order of `parameters`, as clip_grad_norm stacks them, so the total norm and the scale are
  // the same bits. Scales this rank's pieces and returns the total norm. Collective; the errors of
  // clip_grad_norm.
  double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type);
  // Every rank's bytes, in rank order. Collective.
  std::vector<std::string> gather_bytes(const std::string& bytes);
  // Per rank, what it owns: a parameter's name, or "name[begin:end]" for a piece of its flattened elements.
  std::vector<std::vector<std::string>> split_by_rank() const;

 private:
  void gather_parameters();
  std::vector<at::Tensor> gathered_split_gradients(const std::vector<size_t>& split);
  // With host_pieces: the parameters' elements copied into the pieces, their gradients into host_gradients_.
  void copy_to_host_pieces();

  std::shared_ptr<distributed::State> state_;
  ZeroPartition partition_;
  NamedTensors parameters_;
  std::vector<ZeroPiece> pieces_;  // this rank's, as partition_.pieces_of(rank)
  std::vector<at::Tensor> views_;  // parallel to pieces_
  bool host_pieces_ = false;
  std::vector<at::Tensor> host_gradients_;  // with host_pieces_, parallel to pieces_: made at the first step
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
  std::vector<std::vector<size_t>> pieces_by_parameter_;  // per parameter index: positions in pieces_
  // Per parameter index: its bucket and its place among the bucket's members, looked up once here for
  // clipping's per-step questions (who owns it whole, which ranks hold which part).
  std::vector<std::pair<size_t, size_t>> places_;
};

class Model;
class Optimizer;

// prepare_optimizer's hook: attaches a ZeroShard to an optimizer made over the model's trainable
// parameters when the model is prepared for ZeRO (Model::zero_partition); nothing for another model.
void shard_for_zero(const Model& model, Optimizer& optimizer);

}  // namespace accel::train
