// How long a rank spins at the shared-memory barrier before it sleeps (shm_allreduce.hpp).
#include "distributed/shm/shm_allreduce.hpp"

#include <gtest/gtest.h>

namespace accel::distributed {
namespace {

TEST(BarrierSpin, LongWhenEveryRankOfTheNodeCanHaveACore) {
  EXPECT_EQ(barrier_spin(2, 2), kLongBarrierSpin);
  EXPECT_EQ(barrier_spin(1, 1), kLongBarrierSpin);
  EXPECT_EQ(barrier_spin(4, 64), kLongBarrierSpin);
  EXPECT_GT(kLongBarrierSpin, kShortBarrierSpin);
}

TEST(BarrierSpin, ShortWithMoreRanksThanCoresOrAnUnknownCount) {
  EXPECT_EQ(barrier_spin(3, 2), kShortBarrierSpin);
  EXPECT_EQ(barrier_spin(2, 0), kShortBarrierSpin);
  EXPECT_EQ(barrier_spin(2, -1), kShortBarrierSpin);
}

}  // namespace
}  // namespace accel::distributed
