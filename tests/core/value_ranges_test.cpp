// The value ranges accel records for integer tensors it copies to a device, which a loss on a GPU reads
// instead of the device (src/core/value_ranges). Here on CPU tensors, which a copy never records, so the
// tests record them directly; tests/gpu/value_ranges_test.cpp covers the copies to CUDA.
#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cstdint>
#include <vector>

#include "core/value_ranges.hpp"

namespace {

at::Tensor longs(std::vector<int64_t> values) { return at::tensor(values, at::kLong); }

TEST(ValueRange, RecordsTheExtremesAndTheExtremesWithoutThem) {
  const auto range = accel::value_range_of(longs({3, -100, 7, 0, 7}));
  ASSERT_TRUE(range);
  EXPECT_EQ(range->low, -100);
  EXPECT_EQ(range->high, 7);
  EXPECT_EQ(range->above_low, 0);
  EXPECT_EQ(range->below_high, 3);
  const auto single = accel::value_range_of(longs({5, 5}));
  ASSERT_TRUE(single);
  EXPECT_EQ(single->low, 5);
  EXPECT_EQ(single->high, 5);
  EXPECT_FALSE(single->above_low);
  EXPECT_FALSE(single->below_high);
  const auto narrow = accel::value_range_of(at::tensor(std::vector<int32_t>{-2, 9}, at::kInt));
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->low, -2);
  EXPECT_EQ(narrow->high, 9);
}

TEST(ValueRange, HasNoneForEmptyFloatingOrBoolTensors) {
  EXPECT_FALSE(accel::value_range_of(longs({})));
  EXPECT_FALSE(accel::value_range_of(at::tensor(std::vector<float>{1.0f}, at::kFloat)));
  EXPECT_FALSE(accel::value_range_of(at::tensor(std::vector<int64_t>{1}, at::kLong).to(at::kBool)));
}

TEST(ValueRange, WithinLeavesOutOneExcludedValueAtEitherEnd) {
  EXPECT_TRUE(accel::value_range_of(longs({0, 9, 4}))->within(0, 9, -100));
  EXPECT_FALSE(accel::value_range_of(longs({0, 10}))->within(0, 9, -100));
  EXPECT_FALSE(accel::value_range_of(longs({-1, 3}))->within(0, 9, -100));
  EXPECT_TRUE(accel::value_range_of(longs({-100, 0, 9}))->within(0, 9, -100));
  EXPECT_FALSE(accel::value_range_of(longs({-100, -5, 9}))->within(0, 9, -100));
  EXPECT_FALSE(accel::value_range_of(longs({-100, 0, 9}))->within(0, 9, -1));
  EXPECT_TRUE(accel::value_range_of(longs({255, 20, 0}))->within(0, 20, 255));
  EXPECT_FALSE(accel::value_range_of(longs({255, 21, 0}))->within(0, 20, 255));
  EXPECT_TRUE(accel::value_range_of(longs({-100, -100}))->within(0, 9, -100));
}

TEST(KnownValueRange, CoversTheTensorItsViewsAndSlicesUntilAWrite) {
  auto copy = longs({1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(accel::known_value_range(copy));
  accel::remember_value_range(copy, *accel::value_range_of(copy));
  ASSERT_TRUE(accel::known_value_range(copy));
  EXPECT_EQ(accel::known_value_range(copy)->high, 6);
  EXPECT_TRUE(accel::known_value_range(copy.view({2, 3})));
  EXPECT_TRUE(accel::known_value_range(copy.narrow(0, 2, 3)));
  EXPECT_TRUE(accel::known_value_range(copy.view({2, 3}).select(1, 2)));
  EXPECT_FALSE(accel::known_value_range(copy.view(at::kDouble))) << "another dtype reads other values";
  EXPECT_FALSE(accel::known_value_range(longs({1, 2, 3, 4, 5, 6}))) << "equal values elsewhere were not recorded";
  copy.narrow(0, 0, 1).fill_(99);
  EXPECT_FALSE(accel::known_value_range(copy)) << "a write through a view makes the range stale";
  EXPECT_FALSE(accel::known_value_range(copy.narrow(0, 3, 3)));
}

TEST(KnownValueRange, DoesNotReachBeyondTheRecordedElements) {
  auto whole = longs({1, 2, 3, 4, 50, 60});
  auto part = whole.narrow(0, 0, 4);
  accel::remember_value_range(part, *accel::value_range_of(part));
  EXPECT_TRUE(accel::known_value_range(whole.narrow(0, 1, 3)));
  EXPECT_FALSE(accel::known_value_range(whole)) << "50 and 60 were never scanned";
  EXPECT_FALSE(accel::known_value_range(whole.narrow(0, 3, 2)));
}

TEST(KnownValueRange, IsForgottenForMemoryHandedOut) {
  auto copy = longs({1, 2, 3});
  accel::remember_value_range(copy, *accel::value_range_of(copy));
  accel::forget_value_ranges(copy.narrow(0, 1, 1));
  EXPECT_FALSE(accel::known_value_range(copy));
}

TEST(KnownValueRange, KeepsTheLatestCopiesOnly) {
  std::vector<at::Tensor> copies;
  for (int64_t i = 0; i < 100; ++i) {
    copies.push_back(longs({i, i + 1}));
    accel::remember_value_range(copies.back(), *accel::value_range_of(copies.back()));
  }
  EXPECT_FALSE(accel::known_value_range(copies.front()));
  EXPECT_TRUE(accel::known_value_range(copies.back()));
  EXPECT_EQ(accel::known_value_range(copies.back())->low, 99);
}

// The meta device stands in for a GPU here: a copy there leaves the CPU as one to CUDA does.
TEST(CopyToDevice, RecordsTheRangeOfAnIntegerCopyLeavingTheCpu) {
  const auto copy = accel::copy_to_device(longs({4, -100, 2}), at::Device(at::kMeta), false);
  ASSERT_TRUE(copy.is_meta());
  const auto range = accel::known_value_range(copy);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->low, -100);
  EXPECT_EQ(range->above_low, 2);
  EXPECT_EQ(range->high, 4);
  EXPECT_FALSE(accel::known_value_range(
      accel::copy_to_device(at::tensor(std::vector<float>{1.0f}, at::kFloat), at::Device(at::kMeta), false)));
}

TEST(CopyToDevice, RecordsNothingForACopyThatStaysOnTheCpu) {
  const auto copy = accel::copy_to_device(longs({1, 2}), at::Device(at::kCPU), false);
  EXPECT_FALSE(accel::known_value_range(copy));
}

}  // namespace
