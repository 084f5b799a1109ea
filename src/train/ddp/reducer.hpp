// Data-parallel gradient synchronisation (PyTorch DDP's Reducer, rebuilt on autograd's grad-accumulator
// hooks): gradients are grouped in buckets, and each bucket's all-reduce starts as soon as its last
// gradient is accumulated, so communication overlaps the rest of backward. When backward returns, every
// gradient holds the average over the ranks; with find_unused_parameters (or static_graph), as in DDP, a
// parameter that no rank's backward reached keeps its gradient as it was (none after a set-to-none
// zero_grad, so that the optimizer leaves it alone; a rank's own sum of no_sync backwards), while one that
// some ranks' backward reached gets the average, the others contributing what they hold (zeros for none).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/state.hpp"
#include "train/ddp/grad_sync_stats.hpp"
#include "train/ddp/zero_partition.hpp"

namespace accel::train {

// DDP's fp16_compress_hook and bf16_compress_hook: each bucket, already divided by the world size, is cast
// to 16 bits, all-reduced as such (half the bytes), and cast back. The averaged gradient then differs from
// the fp32 average ḡ = (1/n) Σ_r g_r, element by element, by at most
//   |ĝ - ḡ| <= n · u · (1/n) Σ_r |g_r|   (to first order in u; n = world size)
// with u = 2^-8 for bf16 (8 significant bits) and 2^-11 for fp16 (11): one rounding of each rank's g_r/n,
// then at most n - 1 of the partial sums (Gloo rounds after each addition; shared memory adds in fp32 and
// rounds once, so 2u there). Where the gradients agree in sign this is a relative error of n·u: 2^-7 for
// bf16 on 2 ranks. fp16 also has a narrow range: |g_r| below 2^-14 loses bits (each rounding adds up to
// 2^-25 absolutely, and values under 2^-25 vanish), and a gradient over 65504 becomes inf (under the fp16
// grad scaler, a skipped step and a smaller scale). bf16 has fp32's range. Buckets already in 16 bits are
// sent as they are. LibTorch 1.13's Gloo has no bfloat16 sum: bf16 then needs the shared-memory transport,
// and the reducer refuses it otherwise (Error(Unsupported)) when it is made.
enum class GradCompression { None, Fp16, Bf16 };

struct ReducerConfig {
  int64_t first_bucket_bytes = 1 << 20;   // small, so that the first all-reduce starts early
  int64_t bucket_bytes = 25 << 20;
  bool find_unused_parameters = false;
  // DDP's gradient_as_bucket_view: each gradient becomes a view into its bucket's buffer, so the averaged
  // values are not copied back and no second copy of the gradients is kept.
  bool gradient_as_bucket_view = false;
  // DDP's static_graph: the parameters that get no gradient are the same in every backward, so they are
  // allowed without find_unused_parameters (those no rank uses keep their gradient, as above, by the first
  // backward's count over the ranks); a backward whose set differs from the first one's is an error naming
  // the parameters.
  bool static_graph = false;
  GradCompression compression = GradCompression::None;
  // The gradients are the caller's (a model whose backward runs in the caller's runtime): no autograd hook
  // is registered; each gradient is its bucket view from the start (with gradient_as_bucket_view), the
  // caller marks each one ready (mark_ready) and ends the backward (finish_backward).
  bool host_gradients = false;
  // ZeRO (train/ddp/zero_partition.hpp): 1 splits the parameters between the ranks (the gradients are averaged
  // as with 0); 2 also lays each bucket out in rank chunks and reduce-scatters it, so that a rank receives
  // the average of its own parameters' gradients only. Under 2, a gradient accel owns (not host_gradients)
  // is dropped (undefined) on the ranks that do not own its parameter, and the owners' gradients are views
  // of their chunk, the only gradient memory the reducer keeps between backwards.
  int32_t zero_stage = 0;
  // Hybrid sharding (FSDP's HYBRID_SHARD, ZeroPartition::hybrid): ZeRO's split is over each node's ranks, the
  // nodes holding the same.
  bool zero_hybrid = false;
  // Stage 3's mixed precision (FSDP's MixedPrecision, sharded_units.hpp): the dtype units are gathered and
  // their gradients given in, and the dtype those are averaged in; none: the parameters' own, and the
  // gathered dtype for the reduction.
  std::optional<at::ScalarType> unit_param_dtype;
  std::optional<at::ScalarType> unit_reduce_dtype;
  bool unit_prefetch = true;  // a TorchScript chain's next child gathered ahead
  // ZeRO-Offload: stage 3's shares of parameters, gradients and optimizer state in host memory
  // (sharded_units.hpp); under stages 1 and 2 the optimizer's pieces and their gradients (ZeroShard).
  bool cpu_offload = false;
};

class Reducer {
 public:
  // Buckets take the parameters in reverse order of registration (the order backward produces them).
  Reducer(std::shared_ptr<distributed::State> state, std::vector<std::pair<std::string, at::Tensor>> parameters,
          ReducerConfig config);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called before each forward: whether the coming backward synchronises (false while accumulating, when
  // gradients only add up locally).
  void prepare_for_backward(bool sync);
  // With host_gradients: parameter index's gradient is in its bucket view for this backward; and the
  // backward is over (what autograd's hooks and final callback do otherwise). Outside a synchronising
  // backward both do nothing.
  void mark_ready(size_t index);
  void finish_backward();
  // Whether no rank's backward reached parameter index in the last synchronising backward (what
  // find_unused_parameters and static_graph count; false for every parameter without them, and before the
  // first synchronising backward). Thread-safe.
  bool reached_by_no_rank(size_t index) const;

  // Buckets as lists of parameter names, in launch order.
  std::vector<std::vector<std::string>> bucket_names() const;

  // The split of the parameters between the ranks under zero_stage 1 or 2 (stage 0 without).
  const ZeroPartition& zero_partition() const;

  // What the all-reduces of the synchronising backwards cost: the last one's and the sums. Thread-safe.
  GradSyncReport sync_report() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel::train
