// The loader on a CUDA state with pin_memory and non_blocking: batches arrive on the GPU holding the
// source rows, read on the thread's current stream after the asynchronous copies that made them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accel.h"
#include "cuda_present.hpp"

namespace {

std::string last_error() { return accel_error_last(); }

template <class T>
std::vector<T> host_values(const accel_tensor_t* tensor) {
  std::vector<T> values(static_cast<size_t>(accel_tensor_numel(tensor)));
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(T)), ACCEL_OK) << last_error();
  return values;
}

constexpr int64_t kRows = 10;
constexpr int64_t kColumns = 3;

class GpuLoader : public ::testing::TestWithParam<int64_t> {};

// Every batch is kept unread until the epoch is over: a pinned staging buffer reused before its
// asynchronous copy had finished would show up as a batch holding another batch's rows.
TEST_P(GpuLoader, PinnedNonBlockingBatchesArriveOnTheGpuHoldingTheSourceRows) {
  SKIP_WITHOUT_CUDA();
  accel_state_t* state = nullptr;
  ASSERT_EQ(accel_state_new(&state, nullptr), ACCEL_OK) << last_error();
  ASSERT_STREQ(accel_state_device(state), "cuda:0");
  std::vector<float> x_values;
  std::vector<int64_t> y_values;
  for (int64_t row = 0; row < kRows; ++row) {
    for (int64_t column = 0; column < kColumns; ++column) x_values.push_back(static_cast<float>(row * 10 + column));
    y_values.push_back(100 + row);
  }
  const int64_t x_shape[] = {kRows, kColumns};
  const int64_t y_shape[] = {kRows};
  accel_tensor_t* x = nullptr;
  accel_tensor_t* y = nullptr;
  ASSERT_EQ(accel_tensor_from_buffer(&x, x_values.data(), ACCEL_DTYPE_FLOAT32, x_shape, 2), ACCEL_OK);
  ASSERT_EQ(accel_tensor_from_buffer(&y, y_values.data(), ACCEL_DTYPE_INT64, y_shape, 1), ACCEL_OK);
  const char* names[] = {"x", "y"};
  accel_tensor_t* tensors[] = {x, y};
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_tensors(&dataset, names, tensors, 2), ACCEL_OK) << last_error();
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "batch_size", 4), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(options, "pin_memory", 1), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(options, "non_blocking", 1), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "prefetch_threads", GetParam()), ACCEL_OK);
  accel_loader_t* loader = nullptr;
  ASSERT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_OK) << last_error();

  std::vector<accel_batch_t*> batches;
  for (;;) {
    accel_batch_t* batch = nullptr;
    ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK) << last_error();
    if (batch == nullptr) break;
    batches.push_back(batch);
  }
  ASSERT_EQ(batches.size(), 3u);
  int64_t first_row = 0;
  for (accel_batch_t* batch : batches) {
    accel_tensor_t* batch_x = nullptr;
    accel_tensor_t* batch_y = nullptr;
    ASSERT_EQ(accel_batch_get(batch, "x", &batch_x), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_batch_get(batch, "y", &batch_y), ACCEL_OK) << last_error();
    EXPECT_STREQ(accel_tensor_device(batch_x), "cuda:0");
    EXPECT_STREQ(accel_tensor_device(batch_y), "cuda:0");
    EXPECT_EQ(accel_tensor_dtype(batch_y), ACCEL_DTYPE_INT64);
    const int64_t rows = accel_tensor_shape(batch_x)[0];
    EXPECT_EQ(rows, std::min<int64_t>(4, kRows - first_row));
    const auto begin = x_values.begin() + first_row * kColumns;
    EXPECT_EQ(host_values<float>(batch_x), std::vector<float>(begin, begin + rows * kColumns)) << "rows from " << first_row;
    EXPECT_EQ(host_values<int64_t>(batch_y),
              std::vector<int64_t>(y_values.begin() + first_row, y_values.begin() + first_row + rows));
    first_row += rows;
    accel_tensor_free(batch_x);
    accel_tensor_free(batch_y);
    accel_batch_free(batch);
  }
  EXPECT_EQ(first_row, kRows);
  accel_loader_free(loader);
  accel_options_free(options);
  accel_dataset_free(dataset);
  accel_tensor_free(y);
  accel_tensor_free(x);
  accel_state_free(state);
}

// Batches read in accel_loader_next, and read ahead by two threads (pinned and copied in
// accel_loader_next all the same).
INSTANTIATE_TEST_SUITE_P(PrefetchThreads, GpuLoader, ::testing::Values(0, 2));

}  // namespace
