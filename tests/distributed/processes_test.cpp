// share_of against the examples of Accelerate's own tests (test_split_between_processes_*).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "distributed/processes.hpp"

namespace accel::distributed {
namespace {

TEST(Share, ThreeItemsOnTwoProcesses) {
  const auto first = share_of(3, 0, 2), second = share_of(3, 1, 2);
  EXPECT_EQ(first.first, 0);
  EXPECT_EQ(first.count, 2);
  EXPECT_EQ(second.first, 2);
  EXPECT_EQ(second.count, 1);
  EXPECT_EQ(second.padded_count, 2);  // ["C"] padded to ["C", "C"]
}

TEST(Share, SeventeenItemsOnOneToEightProcesses) {
  for (const int32_t world : {1, 2, 4, 8}) {
    const int64_t q = 17 / world, r = 17 % world;
    int64_t next = 0;
    for (int32_t rank = 0; rank < world; ++rank) {
      const auto share = share_of(17, rank, world);
      EXPECT_EQ(share.first, next) << world << " processes, rank " << rank;
      EXPECT_EQ(share.count, q + (rank < r ? 1 : 0)) << world << " processes, rank " << rank;
      EXPECT_EQ(share.padded_count, q + (r > 0 ? 1 : 0));
      next += share.count;
    }
    EXPECT_EQ(next, 17);
  }
}

TEST(Share, FewerItemsThanProcessesAndBadArguments) {
  EXPECT_EQ(share_of(1, 3, 4).count, 0);
  EXPECT_EQ(share_of(1, 3, 4).first, 1);
  EXPECT_EQ(share_of(0, 0, 2).padded_count, 0);
  EXPECT_THROW(share_of(-1, 0, 2), Error);
  EXPECT_THROW(share_of(4, 2, 2), Error);
}

}  // namespace
}  // namespace accel::distributed
