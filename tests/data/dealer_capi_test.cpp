// Dealers through the C ABI: Accelerate's vectors come back as the batches a rank yields, and bad input is
// refused with a code and a message naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accel.h"

namespace {

using Batches = std::vector<std::vector<int64_t>>;

// Pushes every base batch, then finishes; the batches the dealer yields, in order.
Batches deal(accel_dealer_t* dealer, const Batches& base) {
  Batches out;
  const auto drain = [&] {
    const int64_t* indices = nullptr;
    size_t count = 0;
    int has_batch = 1;
    while (accel_dealer_next(dealer, &indices, &count, &has_batch) == ACCEL_OK && has_batch == 1) {
      out.emplace_back(indices, indices + count);
    }
  };
  for (const auto& batch : base) {
    EXPECT_EQ(accel_dealer_push(dealer, batch.data(), batch.size()), ACCEL_OK) << accel_error_last();
    drain();
  }
  EXPECT_EQ(accel_dealer_finish(dealer), ACCEL_OK) << accel_error_last();
  drain();
  return out;
}

// BatchSampler(range(n), batch_size)
Batches batches_of(int64_t n, int64_t batch_size) {
  Batches out;
  for (int64_t i = 0; i < n; ++i) {
    if (i % batch_size == 0) out.emplace_back();
    out.back().push_back(i);
  }
  return out;
}

TEST(DealerCapi, AShardGivesAccelerateBatchSamplerShardBatches) {
  // accelerate-semantics.md 1.4: range(21), batch 3, 2 processes, even_batches: rank 1 is padded from the start.
  const Batches expected[2] = {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                               {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {0, 1, 2}}};
  for (int64_t rank = 0; rank < 2; ++rank) {
    accel_dealer_t* dealer = nullptr;
    ASSERT_EQ(accel_dealer_new_shard(&dealer, 3, 0, 2, rank, 0, 1), ACCEL_OK) << accel_error_last();
    EXPECT_EQ(deal(dealer, batches_of(21, 3)), expected[rank]);
    int64_t length = -2;
    EXPECT_EQ(accel_dealer_length(dealer, 7, 3, &length), ACCEL_OK);
    EXPECT_EQ(length, 4);
    accel_dealer_free(dealer);
  }
}

TEST(DealerCapi, ADispatchSlicesEachStepAndReportsTheRemainder) {
  accel_dealer_t* dealer = nullptr;
  ASSERT_EQ(accel_dealer_new_dispatch(&dealer, 2, 1, 0, 0), ACCEL_OK) << accel_error_last();
  // Steps of two base batches of 4: [0..7], then [8, 9] completed with the first step's first 2 rows.
  EXPECT_EQ(deal(dealer, batches_of(10, 4)), (Batches{{4, 5, 6, 7}, {9}}));
  int64_t remainder = 0;
  EXPECT_EQ(accel_dealer_remainder(dealer, &remainder), ACCEL_OK);
  EXPECT_EQ(remainder, 2);
  accel_dealer_free(dealer);
}

TEST(DealerCapi, BadSettingsAndMisuseAreRefusedNamingTheProblem) {
  accel_dealer_t* dealer = nullptr;
  EXPECT_EQ(accel_dealer_new_shard(&dealer, 3, 0, 2, 2, 0, 1), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("process_index"), std::string::npos) << accel_error_last();
  EXPECT_EQ(dealer, nullptr);
  EXPECT_EQ(accel_dealer_new_shard(&dealer, 3, 0, 2, 0, 1, 1), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("round multiple"), std::string::npos) << accel_error_last();
  EXPECT_EQ(accel_dealer_new_iterable(&dealer, 2, 7, 2, 0, 0), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("drop_last"), std::string::npos) << accel_error_last();
  EXPECT_EQ(accel_dealer_new_shard(&dealer, -1, 0, 2, 0, 0, 1), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_dealer_push(nullptr, nullptr, 0), ACCEL_ERR_NULL_ARGUMENT);

  ASSERT_EQ(accel_dealer_new_shard(&dealer, 2, 0, 2, 0, 0, 1), ACCEL_OK);
  EXPECT_EQ(accel_dealer_push(dealer, nullptr, 2), ACCEL_ERR_NULL_ARGUMENT);
  const int64_t too_long[3] = {0, 1, 2};
  EXPECT_EQ(accel_dealer_push(dealer, too_long, 3), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("longer than the batch size"), std::string::npos);
  EXPECT_EQ(accel_dealer_finish(dealer), ACCEL_OK);
  EXPECT_EQ(accel_dealer_push(dealer, too_long, 1), ACCEL_ERR_INVALID_STATE);
  int64_t length = 0;
  EXPECT_EQ(accel_dealer_length(dealer, 3, 5, &length), ACCEL_ERR_INVALID_ARGUMENT);
  accel_dealer_free(dealer);
  accel_dealer_free(nullptr);
}

}  // namespace
