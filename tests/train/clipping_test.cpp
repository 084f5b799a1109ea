// Gradient clipping against hand computations of torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#include "train/optim/clipping.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::train {
namespace {

at::Tensor with_grad(std::vector<double> grad) {
  auto parameter = at::zeros_like(at::tensor(grad)).requires_grad_();
  parameter.mutable_grad() = at::tensor(grad);
  return parameter;
}

std::vector<double> grad_of(const at::Tensor& parameter) {
  std::vector<double> out;
  for (int64_t i = 0; i < parameter.numel(); ++i) out.push_back(parameter.grad()[i].item<double>());
  return out;
}

TEST(Clipping, TotalNormIsTheNormOfAllGradsAndScalesWhenAbove) {
  auto a = with_grad({3.0, 4.0});
  auto b = with_grad({-12.0});
  EXPECT_EQ(clip_grad_norm({a, b}, 1.0), 13.0);  // sqrt(9 + 16 + 144)
  const double coefficient = 1.0 / (13.0 + 1e-6);
  EXPECT_NEAR(grad_of(a)[0], 3.0 * coefficient, 1e-15);
  EXPECT_NEAR(grad_of(a)[1], 4.0 * coefficient, 1e-15);
  EXPECT_NEAR(grad_of(b)[0], -12.0 * coefficient, 1e-15);
}

TEST(Clipping, GradsBelowMaxNormAreUnchanged) {
  auto a = with_grad({3.0, 4.0});
  EXPECT_EQ(clip_grad_norm({a}, 100.0), 5.0);
  EXPECT_EQ(grad_of(a), (std::vector<double>{3.0, 4.0}));
}

TEST(Clipping, OtherNormTypes) {
  auto a = with_grad({3.0, -4.0});
  auto b = with_grad({12.0});
  EXPECT_EQ(clip_grad_norm({a, b}, 100.0, 1.0), 19.0);
  EXPECT_EQ(clip_grad_norm({a, b}, 6.0, std::numeric_limits<double>::infinity()), 12.0);
  EXPECT_NEAR(grad_of(b)[0], 12.0 * 6.0 / (12.0 + 1e-6), 1e-12);
  EXPECT_NEAR(grad_of(a)[1], -4.0 * 6.0 / (12.0 + 1e-6), 1e-12);
}

TEST(Clipping, FloatGradsAndParametersWithoutGrad) {
  auto a = at::zeros({2}).requires_grad_();
  a.mutable_grad() = at::tensor({6.0f, 8.0f});
  auto no_grad = at::zeros({3}).requires_grad_();
  auto empty = with_grad({});
  EXPECT_FLOAT_EQ(static_cast<float>(clip_grad_norm({no_grad, a, empty}, 5.0)), 10.0f);
  EXPECT_NEAR(a.grad()[1].item<float>(), 4.0f, 1e-5);
  EXPECT_FALSE(no_grad.grad().defined());
  EXPECT_EQ(clip_grad_norm({no_grad}, 1.0), 0.0);
  EXPECT_EQ(clip_grad_norm({}, 1.0), 0.0);
}

TEST(Clipping, NonFiniteNormIsReturned) {
  auto a = with_grad({std::numeric_limits<double>::infinity(), 1.0});
  EXPECT_TRUE(std::isinf(clip_grad_norm({a}, 1.0)));
}

TEST(Clipping, ClipGradValueClamps) {
  auto a = with_grad({-3.0, 0.5, 2.0});
  auto no_grad = at::zeros({1}).requires_grad_();
  clip_grad_value({a, no_grad}, 1.0);
  EXPECT_EQ(grad_of(a), (std::vector<double>{-1.0, 0.5, 1.0}));
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(Clipping, BadArgumentsAreRefused) {
  auto a = with_grad({1.0});
  expect_error(Code::InvalidArgument, "max_norm must be > 0, got 0", [&] { clip_grad_norm({a}, 0.0); });
  expect_error(Code::InvalidArgument, "max_norm", [&] { clip_grad_norm({a}, std::nan("")); });
  expect_error(Code::InvalidArgument, "norm_type must be > 0 or inf, got -1", [&] { clip_grad_norm({a}, 1.0, -1.0); });
  expect_error(Code::InvalidArgument, "clip_grad_norm: parameter 1 is undefined",
               [&] { clip_grad_norm({a, at::Tensor()}, 1.0); });
  expect_error(Code::InvalidArgument, "clip_value must be >= 0, got -1", [&] { clip_grad_value({a}, -1.0); });
  expect_error(Code::InvalidArgument, "clip_grad_value: parameter 0 is undefined",
               [&] { clip_grad_value({at::Tensor()}, 1.0); });
  EXPECT_EQ(grad_of(a), (std::vector<double>{1.0}));
}

}  // namespace
}  // namespace accel::train
