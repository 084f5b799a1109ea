#include "train/ddp/zero_partition.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "distributed/group/process_group.hpp"
#include "distributed/state.hpp"

namespace accel::train {

namespace {
constexpr int64_t kAlignment = 64;

int64_t aligned(int64_t elements) { return (elements + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

std::pair<int64_t, int64_t> ZeroBucketSplit::part(size_t member, int64_t rank) const {
  const int64_t begin = std::clamp(rank * chunk - offsets[member], int64_t{0}, numels[member]);
  const int64_t end = std::clamp((rank + 1) * chunk - offsets[member], int64_t{0}, numels[member]);
  return {begin, end};
}

bool scatters_like_allreduce(distributed::ProcessGroup& group, const at::Tensor& like) {
  return group.uses_shared_memory() && !group.shared_memory_spans_nodes() && like.device().is_cpu();
}

void place_partition(ZeroPartition& partition, distributed::State& state, bool hybrid) {
  partition.world = static_cast<int32_t>(state.launch().world_size);
  partition.rank = static_cast<int32_t>(state.launch().rank);
  partition.hybrid = hybrid && partition.world > 1;
  if (!partition.hybrid) return;
  const distributed::NodeSplit& split = state.group("hybrid sharding")->split_by_node();
  partition.world = split.local_size;
  partition.rank = split.local_rank;
  partition.replica = split.node;
  partition.replicas = split.nodes;
}

distributed::ProcessGroup& shard_group(distributed::State& state, const ZeroPartition& partition, const char* what) {
  distributed::ProcessGroup* group = state.group(what);
  if (group == nullptr) fail(Code::Internal, std::string(what) + ": ZeRO's collectives need a process group");
  return partition.hybrid ? *group->split_by_node().within_node : *group;
}

distributed::ProcessGroup* replica_group(distributed::State& state, const ZeroPartition& partition, const char* what) {
  if (!partition.hybrid) return nullptr;
  return state.group(what)->split_by_node().across_nodes;
}

std::vector<ZeroBucketSplit> split_buckets(const std::vector<std::vector<int64_t>>& numels, int32_t world) {
  require_argument(world >= 1, "ZeRO: the number of processes must be >= 1, got " + std::to_string(world));
  std::vector<ZeroBucketSplit> splits;
  for (const auto& bucket : numels) {
    ZeroBucketSplit split;
    split.numels = bucket;
    int64_t end = 0;
    for (int64_t numel : bucket) {
      split.offsets.push_back(aligned(end));
      end = split.offsets.back() + numel;
    }
    split.chunk = std::max(kAlignment, aligned((end + world - 1) / world));
    splits.push_back(std::move(split));
  }
  return splits;
}

ZeroPartition one_process_offload(const std::vector<int64_t>& numels) {
  ZeroPartition partition;
  partition.stage = 1;
  partition.host_pieces = true;
  partition.members.emplace_back();
  for (size_t i = 0; i < numels.size(); ++i) partition.members.back().push_back(i);
  partition.buckets = split_buckets({numels}, 1);
  partition.held_pieces->assign(partition.pieces_of(0).size(), at::Tensor());  // none of an empty parameter
  return partition;
}

std::vector<ZeroPiece> ZeroPartition::pieces_of(int32_t owner) const {
  std::vector<ZeroPiece> pieces;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const ZeroBucketSplit& split = buckets[b];
    for (size_t m = 0; m < members[b].size(); ++m) {
      const auto [begin, end] = split.part(m, owner);
      if (begin == end) continue;
      pieces.push_back({members[b][m], b, begin, end - begin, split.offsets[m] + begin - owner * split.chunk,
                        end - begin == split.numels[m]});
    }
  }
  return pieces;
}

int32_t ZeroBucketSplit::whole_owner(size_t member) const {
  const int64_t first = offsets[member] / chunk;
  const int64_t last = (offsets[member] + std::max<int64_t>(numels[member], 1) - 1) / chunk;
  return first == last ? static_cast<int32_t>(first) : -1;
}

int32_t ZeroPartition::whole_owner(size_t parameter) const {
  for (size_t b = 0; b < members.size(); ++b) {
    for (size_t m = 0; m < members[b].size(); ++m) {
      if (members[b][m] == parameter) return buckets[b].whole_owner(m);
    }
  }
  fail(Code::InvalidArgument, "ZeRO: parameter index " + std::to_string(parameter) + " is in no bucket");
}

}  // namespace accel::train
