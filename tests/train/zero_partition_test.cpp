// ZeRO's split by elements (train/ddp/zero_partition.hpp): members at offsets that are multiples of 64, each
// bucket cut into equal chunks, a member owned in pieces by the ranks whose chunks it crosses, every element
// owned by exactly one rank.
#include <gtest/gtest.h>

#include <vector>

#include "expect_error.hpp"
#include "train/ddp/zero_partition.hpp"

namespace {

using accel::train::split_buckets;
using accel::train::ZeroPartition;
using accel::train::ZeroPiece;

ZeroPartition partition_of(const std::vector<std::vector<int64_t>>& numels, int32_t world) {
  ZeroPartition partition;
  partition.world = world;
  size_t index = 0;
  for (const auto& bucket : numels) {
    partition.members.emplace_back();
    for (size_t m = 0; m < bucket.size(); ++m) partition.members.back().push_back(index++);
  }
  partition.buckets = split_buckets(numels, world);
  return partition;
}

TEST(ZeroPartition, MembersAlignedAndBucketsCutEvenly) {
  // The MLP 784-1024-1024-10 in the reducer's order: (b3, w3, b2, w2) then (b1, w1).
  const auto splits = split_buckets({{10, 10240, 1024, 1048576}, {1024, 802816}}, 2);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].offsets, (std::vector<int64_t>{0, 64, 64 + 10240, 64 + 10240 + 1024}));
  EXPECT_EQ(splits[0].chunk, (64 + 10240 + 1024 + 1048576) / 2 / 64 * 64 + 64);
  EXPECT_EQ(splits[1].offsets, (std::vector<int64_t>{0, 1024}));
  EXPECT_EQ(splits[1].chunk, (1024 + 802816) / 2);
  // w2 crosses from rank 0's chunk into rank 1's; the cut is a multiple of 64 of w2's elements.
  const auto [begin0, end0] = splits[0].part(3, 0);
  const auto [begin1, end1] = splits[0].part(3, 1);
  EXPECT_EQ(begin0, 0);
  EXPECT_EQ(end0, begin1);
  EXPECT_EQ(end1, 1048576);
  EXPECT_EQ(end0 % 64, 0);
  accel::expect_error(accel::Code::InvalidArgument, "processes must be >= 1", [] { split_buckets({{4}}, 0); });
}

// Whatever the sizes, every element of every parameter is owned by exactly one rank, the ranks' shares differ
// by less than 64 elements per bucket plus the gaps, and pieces start at multiples of 64 of their parameter.
TEST(ZeroPartition, EveryElementOwnedOnceAndSharesEven) {
  const std::vector<std::vector<int64_t>> numels{{3, 1000, 7}, {2359296}, {1, 1, 1}, {9437184, 3072, 65}};
  for (int32_t world : {1, 2, 3, 4}) {
    ZeroPartition partition = partition_of(numels, world);
    std::vector<int64_t> covered{3, 1000, 7, 2359296, 1, 1, 1, 9437184, 3072, 65};
    int64_t total = 0;
    for (int64_t numel : covered) total += numel;
    std::vector<int64_t> owned_by(static_cast<size_t>(world), 0);
    std::vector<std::vector<std::pair<int64_t, int64_t>>> parts(covered.size());
    for (int32_t rank = 0; rank < world; ++rank) {
      for (const ZeroPiece& piece : partition.pieces_of(rank)) {
        EXPECT_EQ(piece.begin % 64, 0);
        EXPECT_EQ(piece.whole, piece.numel == covered[piece.parameter]);
        parts[piece.parameter].emplace_back(piece.begin, piece.begin + piece.numel);
        owned_by[static_cast<size_t>(rank)] += piece.numel;
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      // Ranks in order own consecutive pieces: together exactly [0, numel).
      int64_t next = 0;
      for (const auto& [begin, end] : parts[i]) {
        EXPECT_EQ(begin, next) << "parameter " << i << ", " << world << " ranks";
        next = end;
      }
      EXPECT_EQ(next, covered[i]) << "parameter " << i << ", " << world << " ranks";
    }
    // Per bucket a chunk exceeds its share by under 64 elements, and the gaps before members by under 64 each.
    const int64_t slack = 64 * (4 + 10);
    for (int64_t owned : owned_by) EXPECT_LE(owned, total / world + slack) << world << " ranks";
    // The largest parameter (more than half of the model) is shared out too.
    EXPECT_EQ(partition.whole_owner(7), world == 1 ? 0 : -1);
    EXPECT_EQ(partition.whole_owner(4), 0);
  }
}

}  // namespace
