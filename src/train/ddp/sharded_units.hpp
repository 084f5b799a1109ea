// ZeRO stage 3 (FSDP's FULL_SHARD, DeepSpeed's zero_optimization.stage 3) for a model of the caller's
// tensors: each trainable parameter is held, between the uses the caller announces, as this rank's elements
// only. The model is cut into units (lists of parameters the caller's runtime uses together: a module and
// its children); each unit is laid out as ZeRO lays out a gradient bucket (zero_partition.hpp: members at
// multiples of 64 elements, cut into one equal chunk per rank), and this rank keeps its chunk of the unit's
// parameters (the master weights, which the optimizer steps in place) and of their averaged gradients.
//
// The caller holds, while a unit is in use, a full buffer in that layout (its parameters are views of it)
// and asks for it to be filled (gather: an all-gather of the chunks), and hands its unit's gradients over in
// the same layout once its backward has accumulated them (reduce: each rank's gradients divided by the
// number of ranks and summed in rank order, as data parallelism's all-reduce sums them, this rank keeping its
// chunk). Through the shared-memory transport that is a reduce-scatter; through Gloo, whose ring starts each
// element's sum at another rank, an all-reduce of which the chunk is kept (the same bits, no saving in
// traffic). So the optimizer's pieces get, bit for bit, the values data parallelism's parameters hold.
//
// Mixed precision (FSDP's MixedPrecision): a unit may be gathered in a compute dtype (bf16, fp16), each
// rank's chunk cast before the all-gather (half the traffic), its gradients then handed over in that dtype
// and averaged in a reduce dtype, the average cast into the chunk's gradients in the parameters' dtype; the
// chunks stay the master weights the optimizer steps.
//
// Prefetch (FSDP's forward_prefetch and backward_prefetch): a unit's all-gather may be started ahead of its
// use, so that it travels while the caller computes with another unit; its gather then only waits for it.
//
// CPU offload (FSDP's CPUOffload(offload_params=True), DeepSpeed's offload_param): the chunks of parameters
// and gradients live in host memory (pinned when the parameters are on CUDA), so the optimizer steps them
// there; a gather copies this rank's chunk to the parameters' device before the all-gather, a reduction
// copies the averaged chunk back. The caller's buffers stay on the parameters' device. That is also what
// stage 3 is for on one process (a model larger than its device, as DeepSpeed's ZeRO-3 offload on one GPU):
// the chunk is then the whole unit, a gather a copy to the device and a reduction one back, no collective.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/named_tensors.hpp"
#include "distributed/state.hpp"
#include "train/ddp/zero_partition.hpp"

namespace accel::distributed {
class PendingCollective;
}

namespace accel::train {

class ShardedUnits {
 public:
  // trainable: the model's trainable parameters; process 0's values of them are what every rank's chunks
  // start from, and the other ranks' are never read (any tensor of the shape and dtype will do there: one
  // element expanded to the shape). unit_of: per trainable parameter, its unit, numbered from 0 with none left
  // empty. Every member of a unit must have one dtype (Error(InvalidArgument) naming two that differ, as
  // FSDP's uniform dtype); they may lie anywhere (process 0's are copied to `device`).
  // Collective: the units are filled one at a time, each laid out on process 0 and broadcast, every rank
  // keeping its chunk, so that no rank holds more than one unit's layout beside its chunks; `taken(unit)` is
  // then called (may be empty), for the caller to let go of its memory of that unit's parameters.
  // device: where the units are used (the caller's buffers, and the chunks unless offloaded). precision: the
  // compute and reduce dtypes (none: the parameters' own, and the compute dtype), floating. hybrid: split
  // over each node's ranks, every node holding the same (ZeroPartition::hybrid). cpu_offload: the chunks in
  // host memory (above).
  struct Options {
    at::Device device;
    std::optional<at::ScalarType> compute;
    std::optional<at::ScalarType> reduce;
    bool hybrid = false;
    bool cpu_offload = false;
  };
  ShardedUnits(std::shared_ptr<distributed::State> state, const NamedTensors& trainable,
               const std::vector<int32_t>& unit_of, Options options, const std::function<void(size_t)>& taken);
  ~ShardedUnits();
  ShardedUnits(const ShardedUnits&) = delete;
  ShardedUnits& operator=(const ShardedUnits&) = delete;

  // partition().stage is 3; partition().parameter_chunks holds this rank's chunk of each unit's parameters,
  // and held_pieces, after a unit's synchronising reduce, the averaged gradient of each of this rank's pieces.
  const ZeroPartition& partition() const { return partition_; }
  size_t unit_count() const { return partition_.buckets.size(); }
  // The elements of a unit's full layout (chunk * ranks).
  int64_t unit_numel(size_t unit) const;
  // Trainable parameter `trainable`'s unit and its first element in that unit's layout.
  std::pair<size_t, int64_t> place(size_t trainable) const;

  // The dtype a unit is computed in (gathered for use, its gradients handed over in) and the one its
  // gradients are averaged in.
  at::ScalarType compute_dtype(size_t unit) const;
  at::ScalarType reduce_dtype(size_t unit) const;
  // Where a unit is used (Options::device), where the caller's buffers must be (the chunks' too, unless
  // offloaded).
  at::Device device(size_t unit) const;
  // Fills `full` (1-d, contiguous, unit_numel elements, on the unit's device; of the unit's compute dtype, or
  // of its parameters' for their exact values) with every rank's chunk: the unit's parameters at their
  // places, zeros between them. Collective. After prefetch(unit, ...), no collective: it waits for the
  // prefetch, which filled `full` if it is the prefetch's buffer (else the values are copied from that one;
  // Error(InvalidArgument), the prefetch done, when `full` is of another dtype).
  void gather(size_t unit, const at::Tensor& full);
  // gather started, returning before it is done (collective, counted as the unit's gather): `full` must
  // stay alive and untouched until the unit's next gather or discard_prefetches. It carries the chunks'
  // values of now. Error(InvalidState) when the unit is prefetched already.
  void prefetch(size_t unit, const at::Tensor& full);
  bool prefetched(size_t unit) const;
  // Waits for every prefetch in flight and forgets them, so that a unit's next gather gathers afresh: before
  // the chunks change (an optimizer step, a load), which a prefetch would not see. The first prefetch's
  // error is thrown once all are done.
  void discard_prefetches();
  // `full_gradients` (as gather's `full`, of the compute dtype) holds this rank's accumulated gradients of
  // the unit, zeros where it has none: they are averaged over the ranks (in the reduce dtype) into this
  // rank's chunk (added to what it holds since the optimizer's zero_grad, as FSDP adds to its sharded
  // gradients). Collective. full_gradients is overwritten.
  void reduce(size_t unit, const at::Tensor& full_gradients);
  // Fills `full` (as gather's, of the parameters' dtype) with every rank's chunk of the unit's averaged
  // gradients (what the optimizer steps), zeros where a rank holds none; returns whether any rank holds
  // gradients of the unit (none before its first synchronising reduce, nor after a zero_grad that set them to
  // none). Collective: a flag's all-reduce, then the all-gather. FSDP's summon_full_params(with_grads=True).
  bool gather_gradients(size_t unit, const at::Tensor& full);
  // Whether a tensor is one of the trainable parameters (the very tensor given, by identity).
  bool holds(const at::Tensor& parameter) const;
  // What loading a checkpoint does: fill(begin, share) writes this rank's elements of `parameter` (one it holds)
  // into `share`, a 1-d view of them in the chunk, `begin` being the first of them among the parameter's
  // flattened elements (a rank holding none is not called), so that a loader reads only those. Prefetches in
  // flight are discarded first. Error(InvalidArgument) for a tensor it does not hold.
  void assign(const at::Tensor& parameter, const std::function<void(int64_t, const at::Tensor&)>& fill);
  // This rank's elements of `parameter` (one it holds): the first of them among its flattened elements, and a
  // 1-d view of them in the chunk, which the optimizer steps in place (none: begin 0, an empty tensor).
  // Error(InvalidArgument) for a tensor it does not hold.
  std::pair<int64_t, at::Tensor> share_of(const at::Tensor& parameter) const;
  // The trainable parameters in unit order (partition().members, unit by unit): for_each_whole's order.
  std::vector<at::Tensor> parameters_in_unit_order() const;
  // Every unit gathered in turn (collective): with keep, each(parameter, its whole value) in
  // parameters_in_unit_order's order, the next unit's gather in flight meanwhile (prefetch: two units'
  // memory at a time) and a unit's memory freed once the next one's is handed out; without, this rank only
  // takes part. What each throws is thrown once every unit has been gathered, so that no other rank is left
  // waiting in a gather.
  void for_each_whole(bool keep, const std::function<void(const at::Tensor&, const at::Tensor&)>& each);
  // The bytes of this rank's chunks of the units' averaged gradients (GradSyncReport::gradient_bytes): each
  // made by its unit's first reduction, so that a model only prepared holds its parameters' shares alone.
  int64_t gradient_bytes() const;
  // Since the units were made: the gathers (prefetched or not), those prefetched, and the time gather spent
  // waiting for the all-gathers (what prefetching hides). Thread-safe.
  struct GatherFigures {
    int64_t gathers = 0;
    int64_t prefetches = 0;
    double wait_ms = 0;
  };
  GatherFigures gather_figures() const;
  // Fails on every rank alike (Error(InvalidState)) when the ranks gathered or reduced other units, or in
  // another order, since the last call: a unit some ranks skipped, whose collectives then paired with
  // another unit's of the same size. One small all-reduce. Collective.
  void require_ranks_in_step(const char* what);

 private:
  void require_unit(size_t unit, const char* what) const;
  at::TensorOptions unit_options(size_t unit) const;  // its parameters' dtype, on Options::device
  at::TensorOptions chunk_options(size_t unit) const;  // where its chunks lie (in host memory when offloaded)
  // Fills the unit's chunk from process 0's parameters, laid out in `full` (unit_numel elements) and broadcast.
  void take_values_of_process_zero(size_t unit, at::Tensor full);
  void require_layout(size_t unit, const at::Tensor& full, const char* what) const;
  void require_dtype(size_t unit, const at::Tensor& full, at::ScalarType expected, const char* what) const;
  // A gather in flight: the buffer it fills, and what it sends (kept alive until it is done).
  struct Prefetch {
    std::unique_ptr<distributed::PendingCollective> pending;
    at::Tensor output;
    at::Tensor input;
  };
  Prefetch start_gather(size_t unit, const at::Tensor& full);

  std::shared_ptr<distributed::State> state_;
  const bool alone_;  // the job is this process: nothing to exchange, every chunk the whole unit
  NamedTensors trainable_;
  ZeroPartition partition_;
  std::vector<ZeroPiece> pieces_;                        // this rank's
  std::vector<std::pair<size_t, int64_t>> places_;       // per trainable parameter
  std::unordered_map<const c10::TensorImpl*, size_t> index_;  // a trainable parameter's index
  std::vector<at::Tensor> gradient_chunks_;              // per unit
  Options options_;
  std::vector<std::string> gather_names_, reduce_names_;  // per unit: what the health layer calls them
  std::unordered_map<size_t, Prefetch> prefetches_;       // by unit: those in flight
  std::atomic<int64_t> gathers_{0}, prefetches_started_{0}, gather_wait_us_{0};  // gather_figures'
  void wait_for(Prefetch& started, size_t unit);
  // The gathers and reductions since the last require_ranks_in_step, as a number below 2^52 (exact in a
  // double, which every transport reduces).
  int64_t calls_signature_ = 0;
  void note_call(size_t unit, bool gather);
};

}  // namespace accel::train
