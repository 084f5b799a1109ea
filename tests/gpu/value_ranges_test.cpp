// Class targets on a GPU: the ranges recorded when accel copies integer tensors from the host
// (src/core/value_ranges), which let the loss check targets without reading the GPU back, and the
// read-back that still guards every target accel did not copy or that changed since its copy.
#include <gtest/gtest.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <ATen/dlpack.h>
#include <ATen/ops/tensor.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "core/value_ranges.hpp"
#include "cuda_present.hpp"
#include "train/loss/losses.hpp"

namespace {

const at::Device kCuda(at::kCUDA, 0);

at::Tensor to_gpu(std::vector<int64_t> classes) {
  return accel::copy_to_device(at::tensor(classes, at::kLong), kCuda, false);
}

// The loss's error message, or "" when it computed.
std::string loss_error(const at::Tensor& logits, const at::Tensor& target) {
  try {
    accel::train::compute_loss("cross_entropy", logits, target, {});
    return "";
  } catch (const accel::Error& error) {
    return error.what();
  }
}

TEST(GpuValueRanges, ACopyToTheGpuCarriesItsRange) {
  SKIP_WITHOUT_CUDA();
  const auto target = to_gpu({3, -100, 0, 2});
  ASSERT_TRUE(target.is_cuda());
  const auto range = accel::known_value_range(target);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->low, -100);
  EXPECT_EQ(range->above_low, 0);
  EXPECT_EQ(range->high, 3);
  EXPECT_TRUE(accel::known_value_range(target.view({2, 2}).select(0, 1)));
  EXPECT_FALSE(accel::known_value_range(at::arange(4, at::TensorOptions(kCuda).dtype(at::kLong))))
      << "made on the GPU: nothing recorded";
}

TEST(GpuValueRanges, TheLossChecksRecordedAndUnrecordedTargets) {
  SKIP_WITHOUT_CUDA();
  const auto logits = at::randn({4, 4}, at::TensorOptions(kCuda));
  EXPECT_EQ(loss_error(logits, to_gpu({0, 1, -100, 3})), "");
  EXPECT_NE(loss_error(logits, to_gpu({0, 1, 4, 3})).find("target 4 at row 2"), std::string::npos);
  // Made on the GPU, so read back: the same verdicts.
  const auto made_here = at::arange(4, at::TensorOptions(kCuda).dtype(at::kLong));
  EXPECT_EQ(loss_error(logits, made_here), "");
  EXPECT_NE(loss_error(logits, made_here.add(1)).find("target 4 at row 3"), std::string::npos);
}

// A recorded range must not outlive a write: a target changed on the GPU after its copy is checked anew.
TEST(GpuValueRanges, ATargetWrittenAfterItsCopyIsCheckedAgain) {
  SKIP_WITHOUT_CUDA();
  const auto logits = at::randn({4, 4}, at::TensorOptions(kCuda));
  auto target = to_gpu({0, 1, 2, 3});
  ASSERT_EQ(loss_error(logits, target), "");
  target.narrow(0, 1, 1).fill_(7);
  EXPECT_FALSE(accel::known_value_range(target));
  EXPECT_NE(loss_error(logits, target).find("target 7 at row 1"), std::string::npos);
  EXPECT_EQ(loss_error(logits, to_gpu({3, 2, 1, 0})), "") << "the CUDA context still works";
}

TEST(GpuValueRanges, ADlpackExportForgetsTheRange) {
  SKIP_WITHOUT_CUDA();
  const auto target = to_gpu({0, 1});
  auto* managed = accel::tensor_to_dlpack(target);
  EXPECT_FALSE(accel::known_value_range(target)) << "the consumer may write behind LibTorch's back";
  managed->deleter(managed);
}

}  // namespace
