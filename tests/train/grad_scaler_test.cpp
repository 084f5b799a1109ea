// The GradScaler against reference section 7: lazy scale, unscale and the inf/NaN check, skipped optimizer
// steps, the growth / backoff conformance vectors, torch's errors for calls out of order, and state.
#include "train/optim/grad_scaler.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::train {
namespace {

std::vector<double> values_of(const at::Tensor& tensor) {
  std::vector<double> out;
  for (int64_t i = 0; i < tensor.numel(); ++i) out.push_back(tensor[i].item<double>());
  return out;
}

// One parameter [1, 2] under plain SGD with lr 0.5.
struct Model {
  at::Tensor w = at::tensor({1.0f, 2.0f}).requires_grad_();
  Optimizer optimizer{"sgd", {{"w", w}}, [] {
                        OptimizerConfig config;
                        config.lr = 0.5;
                        return config;
                      }()};

  void set_grad(std::vector<float> values) { w.mutable_grad() = at::tensor(values); }
};

// One training iteration as Accelerate runs it on a sync step: backward of the scaled loss (here: grads set
// to scale * unscaled), scaler.step, scaler.update. Returns whether the step was skipped.
bool iteration(GradScaler& scaler, Model& model, float unscaled_grad) {
  scaler.scale(at::tensor({1.0f}));
  const auto scale = static_cast<float>(scaler.get_scale());
  model.set_grad({unscaled_grad * scale, unscaled_grad * scale});
  const bool skipped = scaler.step(model.optimizer);
  scaler.update(model.optimizer);
  return skipped;
}

void clean_iterations(GradScaler& scaler, Model& model, int count) {
  for (int i = 0; i < count; ++i) ASSERT_FALSE(iteration(scaler, model, 1e-6f)) << "iteration " << i;
}

TEST(GradScaler, ScaleIsLazyAndMultipliesTheLoss) {
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  const auto scaled = scaler.scale(at::tensor({0.5f, -2.0f}));
  EXPECT_EQ(scaled.scalar_type(), at::kFloat);
  EXPECT_EQ(values_of(scaled), (std::vector<double>{32768.0, -131072.0}));
  const auto scaled_double = scaler.scale(at::tensor({0.25}));
  EXPECT_EQ(scaled_double.scalar_type(), at::kDouble);
  EXPECT_EQ(scaled_double.item<double>(), 16384.0);
  expect_error(Code::Dtype, "floating", [&] { scaler.scale(at::tensor({int64_t{1}})); });
  expect_error(Code::InvalidArgument, "undefined", [&] { scaler.scale(at::Tensor()); });
}

TEST(GradScaler, UnscaleDividesGradsByTheScale) {
  GradScaler scaler;
  Model model;
  auto no_grad = at::tensor({3.0f}).requires_grad_();
  Optimizer both("sgd", {{"w", model.w}, {"no_grad", no_grad}}, OptimizerConfig{});
  scaler.scale(at::tensor({1.0f}));
  model.set_grad({65536.0f, 131072.0f});
  scaler.unscale(both);
  EXPECT_EQ(values_of(model.w.grad()), (std::vector<double>{1.0, 2.0}));
  EXPECT_FALSE(no_grad.grad().defined());
  scaler.update(both);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  model.set_grad({65536.0f, 131072.0f});
  scaler.unscale(model.optimizer);
  // step() does not unscale a second time: the update uses the unscaled grads.
  EXPECT_FALSE(scaler.step(model.optimizer));
  EXPECT_EQ(values_of(model.w), (std::vector<double>{0.5, 1.0}));
  scaler.update(model.optimizer);
  EXPECT_EQ(scaler.growth_tracker(), 2);
}

// Two optimizers (a GAN's): each has its own stage and inf check; an overflow in one skips only its step,
// and each update applies the rule to that optimizer's check alone, leaving the other's stage as it was.
TEST(GradScaler, EachOptimizerIsTrackedApart) {
  GradScaler scaler;
  Model generator, discriminator;
  scaler.scale(at::tensor({1.0f}));
  generator.set_grad({65536.0f, 65536.0f});
  discriminator.set_grad({std::numeric_limits<float>::infinity(), 65536.0f});
  scaler.unscale(generator.optimizer);  // clipped before either steps
  EXPECT_FALSE(scaler.ready(generator.optimizer));
  EXPECT_TRUE(scaler.ready(discriminator.optimizer));
  EXPECT_TRUE(scaler.step(discriminator.optimizer));
  EXPECT_EQ(values_of(discriminator.w), (std::vector<double>{1.0, 2.0}));
  scaler.update(discriminator.optimizer);
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_FALSE(scaler.ready(generator.optimizer));  // still unscaled: its step does not unscale again
  EXPECT_FALSE(scaler.step(generator.optimizer));
  EXPECT_EQ(values_of(generator.w), (std::vector<double>{0.5, 1.5}));
  scaler.update(generator.optimizer);
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  expect_error(Code::InvalidState, "No inf checks were recorded prior to update.",
               [&] { scaler.update(generator.optimizer); });
}

TEST(GradScaler, TwoThousandCleanUpdatesDoubleTheScale) {
  GradScaler scaler;
  Model model;
  clean_iterations(scaler, model, 1999);
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 1999);
  clean_iterations(scaler, model, 1);
  EXPECT_EQ(scaler.get_scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, OverflowHalvesTheScaleAndSkipsTheStep) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    GradScaler scaler;
    Model model;
    clean_iterations(scaler, model, 3);
    const auto before = values_of(model.w);
    EXPECT_TRUE(iteration(scaler, model, bad));
    EXPECT_EQ(values_of(model.w), before);  // the optimizer did not step
    EXPECT_EQ(scaler.get_scale(), 32768.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
    EXPECT_FALSE(iteration(scaler, model, 1e-6f));  // the next clean step goes through
    EXPECT_NE(values_of(model.w), before);
  }
}

TEST(GradScaler, OverflowAfter1999CleanThen2000CleanComesBack) {
  GradScaler scaler;
  Model model;
  clean_iterations(scaler, model, 1999);
  EXPECT_TRUE(iteration(scaler, model, std::numeric_limits<float>::infinity()));
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  clean_iterations(scaler, model, 2000);
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, NeverGrowsToInfinity) {
  GradScalerConfig config;
  config.init_scale = 3e38;
  config.growth_interval = 1;
  GradScaler scaler(config);
  Model model;
  clean_iterations(scaler, model, 1);
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(3e38f));
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, CustomFactorsAndInterval) {
  GradScalerConfig config;
  config.init_scale = 8;
  config.growth_factor = 4;
  config.backoff_factor = 0.25;
  config.growth_interval = 3;
  GradScaler scaler(config);
  Model model;
  clean_iterations(scaler, model, 3);
  EXPECT_EQ(scaler.get_scale(), 32.0);
  EXPECT_TRUE(iteration(scaler, model, std::numeric_limits<float>::infinity()));
  EXPECT_EQ(scaler.get_scale(), 8.0);
}

TEST(GradScaler, CallsOutOfOrderFailWithTorchsMessages) {
  GradScaler scaler;
  Model model;
  expect_error(Code::InvalidState, "Attempted unscale_ but _scale is None.", [&] { scaler.unscale(model.optimizer); });
  expect_error(Code::InvalidState, "Attempted step but _scale is None.", [&] { scaler.step(model.optimizer); });
  expect_error(Code::InvalidState, "Attempted update but _scale is None.", [&] { scaler.update(model.optimizer); });
  scaler.scale(at::tensor({1.0f}));
  expect_error(Code::InvalidState, "No inf checks were recorded prior to update.", [&] { scaler.update(model.optimizer); });
  model.set_grad({1.0f, 1.0f});
  scaler.unscale(model.optimizer);
  expect_error(Code::InvalidState, "unscale_() has already been called on this optimizer since the last update().",
               [&] { scaler.unscale(model.optimizer); });
  scaler.step(model.optimizer);
  expect_error(Code::InvalidState, "unscale_() is being called after step().", [&] { scaler.unscale(model.optimizer); });
  expect_error(Code::InvalidState, "step() has already been called since the last update().",
               [&] { scaler.step(model.optimizer); });
  scaler.update(model.optimizer);
  scaler.unscale(model.optimizer);  // ready again
}

TEST(GradScaler, Fp16GradsAreRefusedBeforeAnyGradChanges) {
  GradScaler scaler;
  scaler.scale(at::tensor({1.0f}));
  auto fp32 = at::tensor({65536.0f}).requires_grad_();
  fp32.mutable_grad() = at::tensor({65536.0f});
  auto fp16 = at::tensor({1.0f}).to(at::kHalf).requires_grad_();
  fp16.mutable_grad() = at::tensor({1.0f}).to(at::kHalf);
  Optimizer mixed("sgd", {{"fp32", fp32}, {"fp16", fp16}}, OptimizerConfig{});
  expect_error(Code::Dtype, "Attempting to unscale FP16 gradients.", [&] { scaler.unscale(mixed); });
  EXPECT_EQ(fp32.grad().item<float>(), 65536.0f);
  EXPECT_TRUE(scaler.ready(mixed));  // the failed call did not count as an unscale
  Optimizer single("sgd", {{"fp32", fp32}}, OptimizerConfig{});
  scaler.unscale(single);
  EXPECT_EQ(fp32.grad().item<float>(), 1.0f);
}

TEST(GradScaler, BadConfigIsRefused) {
  const auto make = [](GradScalerConfig config) { GradScaler scaler(config); };
  GradScalerConfig config;
  config.growth_factor = 1.0;
  expect_error(Code::InvalidArgument, "growth_factor", [&] { make(config); });
  config = {};
  config.backoff_factor = 1.0;
  expect_error(Code::InvalidArgument, "backoff_factor", [&] { make(config); });
  config.backoff_factor = 0.0;
  expect_error(Code::InvalidArgument, "backoff_factor", [&] { make(config); });
  config = {};
  config.growth_interval = 0;
  expect_error(Code::InvalidArgument, "growth_interval", [&] { make(config); });
  config = {};
  config.init_scale = 0;
  expect_error(Code::InvalidArgument, "init_scale", [&] { make(config); });
}

TEST(GradScaler, StateRoundTrip) {
  GradScalerConfig config;
  config.growth_factor = 4;
  config.growth_interval = 3;
  GradScaler scaler(config);
  Model model;
  EXPECT_TRUE(iteration(scaler, model, std::numeric_limits<float>::infinity()));
  clean_iterations(scaler, model, 2);
  const auto bytes = scaler.save_state();

  GradScaler restored;  // defaults; everything comes from the state
  restored.load_state(bytes);
  EXPECT_EQ(restored.get_scale(), 32768.0);  // before any scale(): the loaded scale
  EXPECT_EQ(restored.growth_tracker(), 2);
  Model other;
  clean_iterations(restored, other, 1);  // the third clean update grows by the loaded factor 4
  EXPECT_EQ(restored.get_scale(), 131072.0);

  // Loading into a scaler that already has its scale tensor overwrites it.
  restored.load_state(bytes);
  EXPECT_EQ(restored.get_scale(), 32768.0);
  EXPECT_EQ(restored.growth_tracker(), 2);
}

TEST(GradScaler, LoadOfForeignBytesIsRefused) {
  GradScaler scaler;
  expect_error(Code::InvalidArgument, "not a saved GradScaler archive", [&] { scaler.load_state("nope"); });
  Model model;
  expect_error(Code::InvalidArgument, "GradScaler state has no scale",
               [&] { scaler.load_state(model.optimizer.save_state()); });
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

// One iteration as a captured step runs it: unscale_on_device and update_on_device, nothing read back.
bool device_iteration(GradScaler& scaler, Model& model, float unscaled_grad) {
  scaler.scale(at::tensor({1.0f}));
  const auto scale = static_cast<float>(scaler.get_scale());
  model.set_grad({unscaled_grad * scale, unscaled_grad * scale});
  const auto found_inf = scaler.unscale_on_device({model.w});
  scaler.update_on_device(found_inf);
  return found_inf.item<bool>();
}

// The device rule gives the host rule's scale and growth tracker after every update: growth, backoff on
// inf and on NaN, a scale that would grow to inf, and the grads unscaled alike.
TEST(GradScaler, TheDeviceRuleIsTheHostRule) {
  GradScalerConfig config;
  config.init_scale = 3.0e38;  // grows to inf at once: the rule keeps it
  config.growth_interval = 3;
  GradScaler host(config), device(config);
  Model host_model, device_model;
  const float infinity = std::numeric_limits<float>::infinity();
  const std::vector<float> grads{1e-3f, 1e-3f, 1e-3f, infinity, 0.25f, std::nanf(""), 1e-3f, 1e-3f, 1e-3f, 1e-3f,
                                 1e-3f, 1e-3f, infinity, 1e-3f};
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    EXPECT_EQ(iteration(host, host_model, grads[i]), device_iteration(device, device_model, grads[i]));
    EXPECT_EQ(device.get_scale(), host.get_scale());
    EXPECT_EQ(device.growth_tracker(), host.growth_tracker());
    if (std::isfinite(grads[i])) EXPECT_EQ(values_of(device_model.w.grad()), values_of(host_model.w.grad()));
  }
  EXPECT_GT(host.get_scale(), 0);
}

// Once on the device, the growth tracker is saved, loaded and stepped by the host rule from there.
TEST(GradScaler, TheDeviceTrackerIsSavedLoadedAndSharedWithTheHostRule) {
  GradScalerConfig config;
  config.init_scale = 8;
  config.growth_interval = 3;
  GradScaler scaler(config);
  Model model;
  ASSERT_FALSE(device_iteration(scaler, model, 1e-3f));
  ASSERT_FALSE(device_iteration(scaler, model, 1e-3f));
  EXPECT_EQ(scaler.growth_tracker(), 2);
  const auto bytes = scaler.save_state();
  clean_iterations(scaler, model, 1);  // host rule, third clean update: grows
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  ASSERT_FALSE(device_iteration(scaler, model, 1e-3f));
  EXPECT_EQ(scaler.growth_tracker(), 1);
  scaler.load_state(bytes);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  ASSERT_FALSE(device_iteration(scaler, model, 1e-3f));
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

}  // namespace
}  // namespace accel::train
