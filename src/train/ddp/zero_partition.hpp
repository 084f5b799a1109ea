// How ZeRO (zero_stage 1 and 2) splits a data-parallel model's parameters between the ranks: by elements,
// as DeepSpeed does, so that every rank holds an equal share of the optimizer state however unequal the
// parameters are. Each of the reducer's gradient buckets is laid out with its members at offsets that are
// multiples of 64 elements, then cut into one equal chunk per rank (a multiple of 64 elements too): rank r
// owns the elements of chunk r, so a member may be owned in pieces by consecutive ranks. A reduce-scatter of
// such a bucket hands each rank exactly the gradients of its own elements, and an all-gather of the chunks
// gives every rank every updated element.
//
// Why 64: a piece then starts at a multiple of 64 elements of its parameter and ends at a multiple of 64 or at
// the parameter's end, so that the vectorised elementwise kernels of the optimizer step cover each element
// in the same lane and loop part as over the whole parameter; pieces cut elsewhere were seen to step a few
// elements to different bits (AdamW on LibTorch 1.13).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace accel::distributed {
class ProcessGroup;
class State;
}

namespace accel::train {

// One bucket, split.
struct ZeroBucketSplit {
  std::vector<int64_t> numels;   // per member: its elements
  std::vector<int64_t> offsets;  // per member: its first element in the bucket's layout (a multiple of 64)
  int64_t chunk = 0;             // elements per rank's chunk (a multiple of 64); the layout holds world * chunk
  // The member's elements that fall in `rank`'s chunk, as [begin, end) of the member's own elements (empty:
  // begin == end).
  std::pair<int64_t, int64_t> part(size_t member, int64_t rank) const;
  // The rank whose chunk holds the whole member, or -1 where it crosses into another's.
  int32_t whole_owner(size_t member) const;
};

// Whether a reduce-scatter through `group` sums each element in the rank order its all-reduce sums it, so that
// a rank's chunk holds the bits of data parallelism's average: the shared-memory transport on one node, for
// CPU tensors (`like`'s device). Gloo's ring starts an element's sum at a rank that depends on its place.
bool scatters_like_allreduce(distributed::ProcessGroup& group, const at::Tensor& like);

// Lays the buckets' members (their element counts, bucket by bucket) out and cuts each bucket into `world`
// chunks. world < 1: Error(InvalidArgument).
std::vector<ZeroBucketSplit> split_buckets(const std::vector<std::vector<int64_t>>& numels, int32_t world);

// The elements of one parameter that one rank owns.
struct ZeroPiece {
  size_t parameter = 0;  // the reducer's parameter index
  size_t bucket = 0;
  int64_t begin = 0;     // the first of the parameter's (flattened) elements
  int64_t numel = 0;
  int64_t in_chunk = 0;  // where the piece starts in its rank's chunk of the bucket
  bool whole = false;    // the piece is the whole parameter
};

// The split of a whole model, shared by the reducer and the optimizer's side of ZeRO.
struct ZeroPartition {
  int32_t stage = 0;  // 1, 2 or 3 once prepared for ZeRO; 0 otherwise
  int32_t world = 1;  // the ranks the split is over: the job's, or with `hybrid` this node's
  int32_t rank = 0;   // this rank's place among them
  // Hybrid sharding (FSDP's HYBRID_SHARD): the split is over each node's ranks and the `replicas` nodes hold
  // the same, `replica` being this rank's node; a chunk's gradients are reduce-scattered within the node,
  // then summed over the nodes.
  bool hybrid = false;
  int32_t replica = 0;
  int32_t replicas = 1;
  std::vector<std::vector<size_t>> members;  // per bucket: parameter indices, as the reducer's bucket
  std::vector<ZeroBucketSplit> buckets;
  // Stage 2 with reduce-scatter: per piece of pieces_of(rank) (one entry each from prepare on), its averaged
  // gradient where the parameter has no gradient of its own (a parameter this rank owns in part), written
  // by the reducer after a synchronising backward and dropped by the optimizer's zero_grad. Shared, so that the optimizer's copy of
  // the partition sees the reducer's.
  std::shared_ptr<std::vector<at::Tensor>> held_pieces = std::make_shared<std::vector<at::Tensor>>();
  // Stage 3 (sharded_units.hpp): per bucket (a unit), this rank's chunk of its parameters, the only memory
  // of their values between the caller's uses; the optimizer's pieces are views of it. Empty otherwise.
  std::vector<at::Tensor> parameter_chunks;
  // Stages 1 and 2 with the optimizer offloaded (DeepSpeed's offload_optimizer, the prepare option
  // zero_cpu_offload): the pieces the optimizer steps, and their gradients, are host copies (ZeroShard).
  bool host_pieces = false;

  // A rank's pieces, bucket by bucket in member order.
  std::vector<ZeroPiece> pieces_of(int32_t rank) const;
  // The rank that owns the whole parameter of this index, or -1 where several ranks own pieces of it (a
  // search of the buckets: code that asks per step keeps split.whole_owner(member) of each parameter).
  int32_t whole_owner(size_t parameter) const;
};

// ZeRO-Offload on one process (zero_cpu_offload, which there splits nothing, but still moves the optimizer's state
// and step to host memory): stage 1 over one bucket of parameters of these element counts, every one owned whole
// by the one process, with host_pieces. Needs no process group (ZeroShard collects nothing on one process).
ZeroPartition one_process_offload(const std::vector<int64_t>& numels);

// Sets the partition's world, rank and replicas: the job's ranks, or with `hybrid` this node's, every node
// alike (collective on the first call: ProcessGroup::split_by_node). Throws what that throws.
void place_partition(ZeroPartition& partition, distributed::State& state, bool hybrid);
// Where the partition's chunks are gathered and reduce-scattered: the job's group, or this node's ranks.
distributed::ProcessGroup& shard_group(distributed::State& state, const ZeroPartition& partition, const char* what);
// Where a chunk reduce-scattered within the node is summed over the nodes; nullptr without hybrid sharding (or
// with one node).
distributed::ProcessGroup* replica_group(distributed::State& state, const ZeroPartition& partition, const char* what);

}  // namespace accel::train
