// Losses against hand formulas (cross entropy with label smoothing and ignore_index checked against torch
// 1.13's value), the three reductions, and one test per bad input with the expected error code.
#include "train/loss/losses.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::train {
namespace {

LossConfig with_reduction(const std::string& reduction) {
  LossConfig config;
  config.reduction = reduction;
  return config;
}

const std::vector<std::vector<double>> kLogits = {{1.0, 2.0, 0.5}, {0.1, -1.0, 2.0}, {0.3, 0.3, 0.3}, {2.0, 1.0, -1.0}};

at::Tensor logits() {
  std::vector<float> flat;
  for (const auto& row : kLogits) flat.insert(flat.end(), row.begin(), row.end());
  return at::tensor(flat).reshape({4, 3});
}

at::Tensor classes(std::vector<int64_t> values) { return at::tensor(values); }

std::vector<double> log_softmax(const std::vector<double>& row) {
  double total = 0;
  for (double x : row) total += std::exp(x);
  std::vector<double> out;
  for (double x : row) out.push_back(x - std::log(total));
  return out;
}

// (1 - eps) * -log p[target] + eps / C * sum_c -log p[c], per row.
double smoothed_row_loss(const std::vector<double>& row, int64_t target, double eps) {
  const auto lp = log_softmax(row);
  double all = 0;
  for (double x : lp) all -= x;
  return (1 - eps) * -lp[target] + eps / static_cast<double>(row.size()) * all;
}

TEST(Losses, CrossEntropyWithLabelSmoothingAndIgnoredRow) {
  LossConfig config;
  config.label_smoothing = 0.1;
  const auto loss = compute_loss("cross_entropy", logits(), classes({1, 2, -100, 0}), config);
  const double expected =
      (smoothed_row_loss(kLogits[0], 1, 0.1) + smoothed_row_loss(kLogits[1], 2, 0.1) +
       smoothed_row_loss(kLogits[3], 0, 0.1)) / 3.0;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
  EXPECT_NEAR(loss.item<double>(), 0.45838847756385803, 1e-6);  // torch 1.13 F.cross_entropy
  EXPECT_EQ(loss.dim(), 0);

  config.reduction = "none";
  const auto rows = compute_loss("cross_entropy", logits(), classes({1, 2, -100, 0}), config);
  ASSERT_EQ(rows.sizes(), at::IntArrayRef({4}));
  EXPECT_NEAR(rows[1].item<double>(), smoothed_row_loss(kLogits[1], 2, 0.1), 1e-6);
  EXPECT_EQ(rows[2].item<double>(), 0.0);
}

TEST(Losses, CrossEntropyReductionsAndCustomIgnoreIndex) {
  LossConfig config;
  config.ignore_index = 7;
  const auto targets = classes({0, 7, 1, 2});
  const double row0 = -log_softmax(kLogits[0])[0];
  const double row2 = -log_softmax(kLogits[2])[1];
  const double row3 = -log_softmax(kLogits[3])[2];
  EXPECT_NEAR(compute_loss("cross_entropy", logits(), targets, config).item<double>(), (row0 + row2 + row3) / 3, 1e-6);
  config.reduction = "sum";
  EXPECT_NEAR(compute_loss("cross_entropy", logits(), targets, config).item<double>(), row0 + row2 + row3, 1e-6);
}

TEST(Losses, NllOnLogProbabilities) {
  const auto log_probs = logits().log_softmax(1);
  const double expected = (-log_softmax(kLogits[0])[2] - log_softmax(kLogits[1])[0]) / 2;
  EXPECT_NEAR(compute_loss("nll", log_probs, classes({2, 0, -100, -100}), LossConfig{}).item<double>(), expected, 1e-6);
}

TEST(Losses, MseAndL1) {
  const auto input = at::tensor({1.0, 2.0, -1.0, 0.5});
  const auto target = at::tensor({0.0, 4.0, -1.0, 1.0});
  EXPECT_DOUBLE_EQ(compute_loss("mse", input, target, LossConfig{}).item<double>(), (1 + 4 + 0 + 0.25) / 4);
  EXPECT_DOUBLE_EQ(compute_loss("mse", input, target, with_reduction("sum")).item<double>(), 5.25);
  EXPECT_DOUBLE_EQ(compute_loss("l1", input, target, LossConfig{}).item<double>(), (1 + 2 + 0 + 0.5) / 4);
  const auto none = compute_loss("l1", input, target, with_reduction("none"));
  ASSERT_EQ(none.sizes(), at::IntArrayRef({4}));
  EXPECT_DOUBLE_EQ(none[1].item<double>(), 2.0);
}

TEST(Losses, BceWithLogits) {
  const std::vector<double> x = {0.5, -2.0, 3.0};
  const std::vector<double> y = {1.0, 0.0, 0.25};
  double expected = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = 1 / (1 + std::exp(-x[i]));
    expected -= y[i] * std::log(p) + (1 - y[i]) * std::log(1 - p);
  }
  EXPECT_NEAR(compute_loss("bce_with_logits", at::tensor(x), at::tensor(y), LossConfig{}).item<double>(), expected / 3,
              1e-12);
}

TEST(Losses, UnknownNameAndReduction) {
  expect_error(Code::InvalidArgument, "unknown loss 'hinge' (known: cross_entropy, nll, mse, l1, bce_with_logits)",
               [] { compute_loss("hinge", logits(), classes({0, 0, 0, 0}), LossConfig{}); });
  expect_error(Code::InvalidArgument, "unknown loss reduction 'avg'",
               [] { compute_loss("mse", logits(), logits(), with_reduction("avg")); });
}

TEST(Losses, ClassTargetsMustBeInt64Indices) {
  expect_error(Code::Dtype, "target must be int64 class indices of shape [N], got Float",
               [] { compute_loss("cross_entropy", logits(), at::tensor({0.0f, 1.0f, 0.0f, 1.0f}), LossConfig{}); });
  expect_error(Code::Dtype, "got Int",
               [] { compute_loss("nll", logits(), classes({0, 1, 2, 0}).to(at::kInt), LossConfig{}); });
  expect_error(Code::Dtype, "input must be a floating tensor, got Long",
               [] { compute_loss("cross_entropy", classes({0, 1}).reshape({1, 2}), classes({0}), LossConfig{}); });
}

TEST(Losses, ShapeMismatchesNameBothShapes) {
  expect_error(Code::ShapeMismatch, "target shape [3] does not match input shape [4, 3]",
               [] { compute_loss("cross_entropy", logits(), classes({0, 1, 2}), LossConfig{}); });
  expect_error(Code::ShapeMismatch, "input must be [N, C], got [3]",
               [] { compute_loss("cross_entropy", at::tensor({1.0f, 2.0f, 3.0f}), classes({0}), LossConfig{}); });
  expect_error(Code::ShapeMismatch, "target shape [4] does not match input shape [4, 3]",
               [] { compute_loss("mse", logits(), at::tensor({1.0f, 2.0f, 3.0f, 4.0f}), LossConfig{}); });
  expect_error(Code::ShapeMismatch, "target shape [3, 4] does not match input shape [4, 3]",
               [] { compute_loss("bce_with_logits", logits(), logits().t(), LossConfig{}); });
}

TEST(Losses, ClassIndexOutOfRange) {
  expect_error(Code::InvalidArgument, "cross_entropy target 3 at row 1 is outside [0, 3) and is not ignore_index -100",
               [] { compute_loss("cross_entropy", logits(), classes({0, 3, 1, 1}), LossConfig{}); });
  expect_error(Code::InvalidArgument, "nll target -1 at row 0",
               [] { compute_loss("nll", logits(), classes({-1, 0, 1, 1}), LossConfig{}); });
}

TEST(Losses, ElementwiseTargetsMustMatchTheInputDtype) {
  expect_error(Code::Dtype, "mse target must be a floating tensor, got Long",
               [] { compute_loss("mse", at::tensor({1.0f}), classes({1}), LossConfig{}); });
  expect_error(Code::Dtype, "l1 target dtype Double must match input dtype Float",
               [] { compute_loss("l1", at::tensor({1.0f}), at::tensor({1.0}), LossConfig{}); });
  expect_error(Code::Dtype, "bce_with_logits target must be a floating tensor, got Long",
               [] { compute_loss("bce_with_logits", at::tensor({1.0f}), classes({1}), LossConfig{}); });
}

TEST(Losses, BadArgumentsAreRefused) {
  expect_error(Code::InvalidArgument, "input is an undefined tensor",
               [] { compute_loss("mse", at::Tensor(), logits(), LossConfig{}); });
  expect_error(Code::InvalidArgument, "target is an undefined tensor",
               [] { compute_loss("cross_entropy", logits(), at::Tensor(), LossConfig{}); });
  LossConfig config;
  config.label_smoothing = 1.5;
  expect_error(Code::InvalidArgument, "label_smoothing must be in [0, 1], got 1.5",
               [&] { compute_loss("cross_entropy", logits(), classes({0, 0, 0, 0}), config); });
  config.label_smoothing = 0.1;
  expect_error(Code::InvalidArgument, "label_smoothing applies to cross_entropy only, not to mse",
               [&] { compute_loss("mse", logits(), logits(), config); });
}

// What ATen itself refuses (1.13 has no CPU Half kernel for log_softmax) comes back as Error(Torch).
TEST(Losses, AtenRefusalsBecomeTorchErrors) {
  try {
    compute_loss("cross_entropy", logits().to(at::kHalf), classes({0, 1, 2, 0}), LossConfig{});
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::Torch);
    EXPECT_NE(std::string(error.what()).find("cross_entropy loss failed: "), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace accel::train
