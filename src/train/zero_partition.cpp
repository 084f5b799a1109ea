#include "train/zero_partition.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace accel::train {

namespace {
constexpr int64_t kChunkAlignment = 16;
}  // namespace

ZeroBucketSplit split_bucket(const std::vector<int64_t>& numels, int32_t world) {
  require_argument(world >= 1, "ZeRO: the number of processes must be >= 1, got " + std::to_string(world));
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first; equal sizes keep the bucket's order, so every rank sorts alike.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  ZeroBucketSplit split;
  split.owners.assign(numels.size(), 0);
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  for (size_t member : order) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    split.owners[member] = static_cast<int32_t>(lightest);
    load[static_cast<size_t>(lightest)] += numels[member];
  }
  const int64_t heaviest = *std::max_element(load.begin(), load.end());
  split.chunk = std::max<int64_t>(kChunkAlignment, (heaviest + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment);
  // Within a rank's chunk, its members in bucket order.
  std::vector<int64_t> next(static_cast<size_t>(world), 0);
  split.offsets.assign(numels.size(), 0);
  for (size_t m = 0; m < numels.size(); ++m) {
    const auto owner = static_cast<size_t>(split.owners[m]);
    split.offsets[m] = static_cast<int64_t>(owner) * split.chunk + next[owner];
    next[owner] += numels[m];
  }
  return split;
}

std::vector<int32_t> ZeroPartition::owner_of(size_t parameters) const {
  std::vector<int32_t> owners(parameters, 0);
  for (size_t b = 0; b < members.size(); ++b) {
    for (size_t m = 0; m < members[b].size(); ++m) owners[members[b][m]] = buckets[b].owners[m];
  }
  return owners;
}

}  // namespace accel::train
