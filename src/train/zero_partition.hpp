// How ZeRO (zero_stage 1 and 2) splits a data-parallel model's parameters between the ranks: whole
// parameters, never slices of one, so that each rank steps its parameters with the very kernels, on the
// very tensors, that data parallelism steps them with (the same bits). The parameters are shared out over
// the whole model by elements, largest first; each of the reducer's gradient buckets is then laid out as one
// equal-sized chunk per rank, rank r's chunk holding the bucket's members r owns (then padding). A
// reduce-scatter of such a bucket hands each rank exactly the gradients of its own parameters, and an
// all-gather of the chunks gives every rank every updated parameter. The price of whole parameters: a model
// of a few large ones splits unevenly, and a bucket whose members mostly fall to one rank is padded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel::train {

// One bucket, split.
struct ZeroBucketSplit {
  std::vector<int32_t> owners;   // per member: the rank that owns it
  std::vector<int64_t> offsets;  // per member: its first element in the chunked layout
  std::vector<int64_t> filled;   // per rank: the elements of its chunk its members take (padding follows)
  int64_t chunk = 0;             // elements per rank's chunk; the layout holds world * chunk
  // A member's first element within its owner's chunk.
  int64_t offset_in_chunk(size_t member) const { return offsets[member] - owners[member] * chunk; }
};

// Splits the buckets' members (their element counts, bucket by bucket) between `world` ranks: the largest
// member of the model first, each to the rank with the fewest elements so far (the lowest rank on a tie; equal
// sizes in bucket order), so the split is the same on every rank. Chunks are rounded up to 16 elements (64
// bytes of fp32). world < 1: Error(InvalidArgument).
std::vector<ZeroBucketSplit> split_buckets(const std::vector<std::vector<int64_t>>& numels, int32_t world);

// The split of a whole model, for the optimizer's side of ZeRO: per bucket, the reducer's parameter
// indices (in bucket order) and their split.
struct ZeroPartition {
  int32_t stage = 0;  // 1 or 2 once prepared for ZeRO; 0 otherwise
  int32_t world = 1;
  int32_t rank = 0;
  std::vector<std::vector<size_t>> members;  // per bucket: parameter indices, as the reducer's bucket
  std::vector<ZeroBucketSplit> buckets;
  // Per parameter index: its owner.
  std::vector<int32_t> owner_of(size_t parameters) const;
};

}  // namespace accel::train
