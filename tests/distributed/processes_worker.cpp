// split_between_processes, main_process_first and send_to_device on real processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "worker.hpp"

namespace {

using namespace worker;

TEST(Split, RowsOfATensorAsAccelerateDealsThem) {
  accel_tensor_t* input = floats({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  accel_tensor_t* mine = nullptr;
  ASSERT_EQ(accel_state_split_tensor(state, input, 0, &mine), ACCEL_OK) << accel_error_last();
  if (world == 2) {
    EXPECT_EQ(float_values(mine), rank == 0 ? arange(4, 0) : arange(4, 4));
  } else {  // 2 rows on 3 processes: the last one gets none
    EXPECT_EQ(float_values(mine), (rank < 2 ? arange(4, static_cast<float>(4 * rank)) : std::vector<float>{}));
  }
  accel_tensor_free(mine);
  accel_tensor_free(input);
}

TEST(Split, PaddingRepeatsTheLastItem) {
  accel_tensor_t* input = floats({10, 11, 12});  // ["A", "B", "C"]
  accel_tensor_t* mine = nullptr;
  ASSERT_EQ(accel_state_split_tensor(state, input, 1, &mine), ACCEL_OK) << accel_error_last();
  int64_t first = -1, count = -1, padded = -1;
  ASSERT_EQ(accel_state_split_range(state, 3, &first, &count, &padded), ACCEL_OK);
  if (world == 2) {
    EXPECT_EQ(float_values(mine), (rank == 0 ? std::vector<float>{10, 11} : std::vector<float>{12, 12}));
    EXPECT_EQ(padded, 2);
  } else {
    EXPECT_EQ(float_values(mine), std::vector<float>{static_cast<float>(10 + rank)});
    EXPECT_EQ(padded, 1);
  }
  EXPECT_EQ(first, world == 2 ? 2 * rank : rank);
  accel_tensor_free(mine);
  EXPECT_EQ(accel_state_split_range(state, -1, &first, nullptr, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  accel_tensor_free(input);
}

TEST(MainProcessFirst, TheOthersStartAfterTheMainOneFinished) {
  const std::string marker = "/tmp/accel_main_first_" + std::to_string(getppid());
  if (rank == 0) std::remove(marker.c_str());
  ASSERT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK);
  ASSERT_EQ(accel_state_main_process_first_begin(state), ACCEL_OK) << accel_error_last();
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow download
    std::ofstream(marker) << "done";
  } else {
    EXPECT_TRUE(std::ifstream(marker).good()) << "rank " << rank << " entered before the main process finished";
  }
  ASSERT_EQ(accel_state_main_process_first_end(state), ACCEL_OK) << accel_error_last();
  ASSERT_EQ(accel_state_local_main_process_first_begin(state), ACCEL_OK);
  ASSERT_EQ(accel_state_local_main_process_first_end(state), ACCEL_OK);
  ASSERT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK);
  if (rank == 0) std::remove(marker.c_str());
}

TEST(SendToDevice, ATensorAlreadyOnTheDeviceIsShared) {
  accel_tensor_t* input = floats({1, 2, 3});
  accel_tensor_t* placed = nullptr;
  ASSERT_EQ(accel_state_send_to_device(state, input, 0, &placed), ACCEL_OK) << accel_error_last();
  EXPECT_STREQ(accel_tensor_device(placed), accel_state_device(state));
  void *before = nullptr, *after = nullptr;
  ASSERT_EQ(accel_tensor_data(input, &before), ACCEL_OK);
  ASSERT_EQ(accel_tensor_data(placed, &after), ACCEL_OK);
  EXPECT_EQ(before, after);
  accel_tensor_free(placed);
  accel_tensor_free(input);
}

}  // namespace
