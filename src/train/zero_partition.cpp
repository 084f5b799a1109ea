#include "train/zero_partition.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace accel::train {

namespace {
constexpr int64_t kChunkAlignment = 16;
}  // namespace

std::vector<ZeroBucketSplit> split_buckets(const std::vector<std::vector<int64_t>>& numels, int32_t world) {
  require_argument(world >= 1, "ZeRO: the number of processes must be >= 1, got " + std::to_string(world));
  std::vector<std::pair<size_t, size_t>> order;  // (bucket, member)
  for (size_t b = 0; b < numels.size(); ++b) {
    for (size_t m = 0; m < numels[b].size(); ++m) order.emplace_back(b, m);
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    return numels[x.first][x.second] > numels[y.first][y.second];
  });
  std::vector<ZeroBucketSplit> splits(numels.size());
  for (size_t b = 0; b < numels.size(); ++b) splits[b].owners.assign(numels[b].size(), 0);
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  for (const auto& [b, m] : order) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    splits[b].owners[m] = static_cast<int32_t>(lightest);
    load[static_cast<size_t>(lightest)] += numels[b][m];
  }
  for (size_t b = 0; b < numels.size(); ++b) {
    ZeroBucketSplit& split = splits[b];
    // Within a rank's chunk, its members in bucket order.
    split.filled.assign(static_cast<size_t>(world), 0);
    split.offsets.assign(numels[b].size(), 0);
    for (size_t m = 0; m < numels[b].size(); ++m) {
      const auto owner = static_cast<size_t>(split.owners[m]);
      split.offsets[m] = split.filled[owner];
      split.filled[owner] += numels[b][m];
    }
    const int64_t heaviest = *std::max_element(split.filled.begin(), split.filled.end());
    split.chunk = std::max<int64_t>(kChunkAlignment, (heaviest + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment);
    for (size_t m = 0; m < numels[b].size(); ++m) split.offsets[m] += split.owners[m] * split.chunk;
  }
  return splits;
}

std::vector<int32_t> ZeroPartition::owner_of(size_t parameters) const {
  std::vector<int32_t> owners(parameters, 0);
  for (size_t b = 0; b < members.size(); ++b) {
    for (size_t m = 0; m < members[b].size(); ++m) owners[members[b][m]] = buckets[b].owners[m];
  }
  return owners;
}

}  // namespace accel::train
