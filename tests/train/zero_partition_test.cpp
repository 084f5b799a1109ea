// ZeRO's split of whole parameters (train/zero_partition.hpp): balanced by elements over the whole model,
// the same on every rank, and laid out so that rank r's members fill chunk r of each bucket.
#include <gtest/gtest.h>

#include "expect_error.hpp"
#include "train/zero_partition.hpp"

namespace {

using accel::train::split_buckets;

TEST(ZeroPartition, LargestFirstToTheLightestRankOverTheWholeModel) {
  // The MLP 784-1024-1024-10 in the reducer's order: (b3, w3, b2, w2) then (b1, w1).
  const auto splits = split_buckets({{10, 10240, 1024, 1048576}, {1024, 802816}}, 2);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].owners, (std::vector<int32_t>{1, 1, 1, 0}));  // w2 to rank 0, then w1 and the rest to rank 1
  EXPECT_EQ(splits[1].owners, (std::vector<int32_t>{1, 1}));
  // Chunks as large as the heaviest rank's share, rounded up to 16; rank r's members from r * chunk on.
  EXPECT_EQ(splits[0].chunk, 1048576);
  EXPECT_EQ(splits[0].offsets, (std::vector<int64_t>{1048576, 1048576 + 10, 1048576 + 10250, 0}));
  EXPECT_EQ(splits[1].chunk, 803840);
  EXPECT_EQ(splits[1].offsets, (std::vector<int64_t>{803840, 803840 + 1024}));
}

TEST(ZeroPartition, EqualSizesKeepTheBucketOrderAndEveryRankGetsAChunk) {
  const auto splits = split_buckets({{4, 4, 4}}, 3);
  EXPECT_EQ(splits[0].owners, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(splits[0].chunk, 16);
  EXPECT_EQ(splits[0].offsets, (std::vector<int64_t>{0, 16, 32}));
  const auto lonely = split_buckets({{4}}, 3);  // ranks 1 and 2 own nothing here: their chunks are padding
  EXPECT_EQ(lonely[0].owners, (std::vector<int32_t>{0}));
  EXPECT_EQ(lonely[0].chunk, 16);
  accel::expect_error(accel::Code::InvalidArgument, "processes must be >= 1", [] { split_buckets({{4}}, 0); });
}

}  // namespace
