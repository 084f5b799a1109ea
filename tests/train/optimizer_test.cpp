// The optimizer against hand computations of torch's update rules (SGD with momentum / nesterov, Adam,
// AdamW), the no-decay group split, lr accessors, argument errors, and state save / load.
#include "train/optim/optimizer.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::train {
namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

at::Tensor param(std::vector<double> values) { return at::tensor(values).requires_grad_(); }

void set_grad(const at::Tensor& parameter, std::vector<double> values) {
  parameter.mutable_grad() = at::tensor(values);
}

std::vector<double> values_of(const at::Tensor& tensor) {
  std::vector<double> out;
  for (int64_t i = 0; i < tensor.numel(); ++i) out.push_back(tensor[i].item<double>());
  return out;
}

void expect_values(const at::Tensor& tensor, const std::vector<double>& expected, double tolerance = 1e-12) {
  const auto actual = values_of(tensor);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
}

// The grad of step t (1-based) for the two-element parameters below.
std::vector<double> grad_at(int t) { return {0.5 * t, -1.0 + 0.25 * t}; }

// torch SGD: d = g + wd*p; buf = d (first step) or m*buf + (1-dampening)*d; d = d + m*buf (nesterov) or buf;
// p -= lr*d.
std::vector<double> sgd_reference(std::vector<double> p, int steps, double lr, double m, double dampening, double wd,
                                  bool nesterov) {
  std::vector<double> buf(p.size());
  for (int t = 1; t <= steps; ++t) {
    const auto g = grad_at(t);
    for (size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + wd * p[i];
      buf[i] = t == 1 ? d : m * buf[i] + (1 - dampening) * d;
      p[i] -= lr * (nesterov ? d + m * buf[i] : buf[i]);
    }
  }
  return p;
}

// torch Adam (L2 weight decay into the grad) and AdamW (decoupled: p *= 1 - lr*wd first).
std::vector<double> adam_reference(std::vector<double> p, int steps, const OptimizerConfig& c, bool decoupled) {
  std::vector<double> m(p.size()), v(p.size());
  for (int t = 1; t <= steps; ++t) {
    const auto g = grad_at(t);
    for (size_t i = 0; i < p.size(); ++i) {
      double grad = g[i];
      if (decoupled) {
        p[i] *= 1 - c.lr * c.weight_decay;
      } else {
        grad += c.weight_decay * p[i];
      }
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * grad;
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * grad * grad;
      const double m_hat = m[i] / (1 - std::pow(c.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(c.beta2, t));
      p[i] -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
    }
  }
  return p;
}

void run_steps(Optimizer& optimizer, const at::Tensor& parameter, int first, int last) {
  for (int t = first; t <= last; ++t) {
    set_grad(parameter, grad_at(t));
    optimizer.step();
  }
}

TEST(Optimizer, SgdMomentumMatchesTorchRuleOverThreeSteps) {
  OptimizerConfig config;
  config.lr = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0.01;
  config.dampening = 0.1;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("sgd", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 3);
  expect_values(w, sgd_reference({1.0, -2.0}, 3, 0.1, 0.9, 0.1, 0.01, false));
}

TEST(Optimizer, SgdNesterovMatchesTorchRule) {
  OptimizerConfig config;
  config.lr = 0.05;
  config.momentum = 0.9;
  config.nesterov = true;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("sgd", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 3);
  expect_values(w, sgd_reference({1.0, -2.0}, 3, 0.05, 0.9, 0, 0, true));
}

TEST(Optimizer, PlainSgdIsGradientDescent) {
  OptimizerConfig config;
  config.lr = 0.5;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("sgd", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 1);
  expect_values(w, {1.0 - 0.5 * 0.5, -2.0 - 0.5 * -0.75});
}

TEST(Optimizer, AdamMatchesFormulaOverTwoSteps) {
  OptimizerConfig config;
  config.lr = 0.01;
  config.weight_decay = 0.1;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("adam", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 2);
  expect_values(w, adam_reference({1.0, -2.0}, 2, config, false));
}

TEST(Optimizer, AdamWMatchesDecoupledFormulaOverTwoSteps) {
  OptimizerConfig config;
  config.lr = 0.01;
  config.weight_decay = 0.1;
  config.beta1 = 0.8;
  config.beta2 = 0.99;
  config.eps = 1e-6;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("adamw", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 2);
  expect_values(w, adam_reference({1.0, -2.0}, 2, config, true));
  // Decoupled and L2 decay really differ, so the two references test different things.
  EXPECT_GT(std::abs(adam_reference({1.0, -2.0}, 2, config, true)[0] - adam_reference({1.0, -2.0}, 2, config, false)[0]),
            1e-6);
}

TEST(Optimizer, ParametersWithoutGradAreLeftAlone) {
  auto w = param({1.0, 2.0});
  auto b = param({3.0});
  OptimizerConfig config;
  config.lr = 0.1;
  Optimizer optimizer("sgd", {{"w", w}, {"b", b}}, config);
  set_grad(w, {1.0, 1.0});
  optimizer.step();
  expect_values(w, {0.9, 1.9});
  expect_values(b, {3.0});
}

TEST(Optimizer, ZeroGradSetsGradsToNone) {
  auto w = param({1.0, 2.0});
  Optimizer optimizer("adam", {{"w", w}}, {});
  set_grad(w, {1.0, 1.0});
  optimizer.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  optimizer.zero_grad();  // already none
  EXPECT_FALSE(w.grad().defined());
}

TEST(Optimizer, GlobMatchesWholeNames) {
  EXPECT_TRUE(glob_match("*bias", "layer.0.bias"));
  EXPECT_TRUE(glob_match("*bias", "bias"));
  EXPECT_FALSE(glob_match("*bias", "layer.bias.weight"));
  EXPECT_TRUE(glob_match("*norm*", "encoder.layernorm.weight"));
  EXPECT_TRUE(glob_match("layer.?.weight", "layer.3.weight"));
  EXPECT_FALSE(glob_match("layer.?.weight", "layer.12.weight"));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyybzzc"));
  EXPECT_FALSE(glob_match("a*b*c", "axxbyyb"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("", "x"));
}

TEST(Optimizer, NoDecayPatternsMakeASecondGroupWithoutWeightDecay) {
  auto weight = param({1.0});
  auto bias = param({1.0});
  auto norm = param({1.0});
  OptimizerConfig config;
  config.lr = 0.1;
  config.weight_decay = 0.5;
  config.no_decay_patterns = {"*bias", "*norm*"};
  Optimizer optimizer("sgd", {{"fc.weight", weight}, {"fc.bias", bias}, {"ln_norm.weight", norm}}, config);
  ASSERT_EQ(optimizer.num_groups(), 2u);
  EXPECT_EQ(optimizer.group_parameter_names(0), std::vector<std::string>({"fc.weight"}));
  EXPECT_EQ(optimizer.group_parameter_names(1), std::vector<std::string>({"fc.bias", "ln_norm.weight"}));
  EXPECT_DOUBLE_EQ(optimizer.weight_decay(0), 0.5);
  EXPECT_DOUBLE_EQ(optimizer.weight_decay(1), 0.0);
  EXPECT_EQ(optimizer.parameters().size(), 3u);

  // The decay only reaches the first group's parameter.
  for (const auto& p : {weight, bias, norm}) set_grad(p, {0.0});
  optimizer.step();
  expect_values(weight, {1.0 - 0.1 * 0.5});
  expect_values(bias, {1.0});
  expect_values(norm, {1.0});
}

TEST(Optimizer, EmptySideOfTheSplitIsLeftOut) {
  OptimizerConfig config;
  config.weight_decay = 0.1;
  Optimizer none_match("adamw", {{"w", param({1.0})}}, config);
  EXPECT_EQ(none_match.num_groups(), 1u);
  EXPECT_DOUBLE_EQ(none_match.weight_decay(0), 0.1);

  config.no_decay_patterns = {"*"};
  Optimizer all_match("adamw", {{"w", param({1.0})}, {"b", param({1.0})}}, config);
  ASSERT_EQ(all_match.num_groups(), 1u);
  EXPECT_DOUBLE_EQ(all_match.weight_decay(0), 0.0);
  EXPECT_EQ(all_match.group_parameter_names(0), std::vector<std::string>({"w", "b"}));
}

TEST(Optimizer, LrGetSetAndInitialLr) {
  OptimizerConfig config;
  config.lr = 0.25;
  config.no_decay_patterns = {"b"};
  Optimizer optimizer("sgd", {{"w", param({1.0})}, {"b", param({1.0})}}, config);
  EXPECT_EQ(optimizer.kind(), "sgd");
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.25);
  optimizer.set_lr(1, 0.125);
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.25);
  EXPECT_DOUBLE_EQ(optimizer.lr(1), 0.125);
  EXPECT_DOUBLE_EQ(optimizer.initial_lr(1), 0.25);
  expect_error(Code::InvalidArgument, "lr", [&] { optimizer.set_lr(0, -1.0); });
  expect_error(Code::InvalidArgument, "lr", [&] { optimizer.set_lr(0, std::nan("")); });
  expect_error(Code::InvalidArgument, "finite", [&] { optimizer.set_lr(0, HUGE_VAL); });
  expect_error(Code::InvalidArgument, "finite", [&] { optimizer.set_lr(0, -HUGE_VAL); });
  expect_error(Code::OutOfRange, "group 2", [&] { optimizer.lr(2); });
  expect_error(Code::OutOfRange, "group 5", [&] { optimizer.initial_lr(5); });
  expect_error(Code::OutOfRange, "group 2", [&] { optimizer.group_parameter_names(2); });
}

TEST(Optimizer, UnknownKindNamesItAndTheKnownOnes) {
  expect_error(Code::InvalidArgument, "unknown optimizer 'rmsprop' (known: sgd, adam, adamw)",
               [] { Optimizer("rmsprop", {{"w", param({1.0})}}, {}); });
}

TEST(Optimizer, BadValuesNameTheKey) {
  const auto make = [](const std::string& kind, OptimizerConfig config) {
    Optimizer(kind, {{"w", param({1.0})}}, config);
  };
  OptimizerConfig config;
  config.lr = -0.1;
  expect_error(Code::InvalidArgument, "lr", [&] { make("sgd", config); });
  config = {};
  config.nesterov = true;
  expect_error(Code::InvalidArgument, "nesterov", [&] { make("sgd", config); });
  config.momentum = 0.9;
  config.dampening = 0.1;
  expect_error(Code::InvalidArgument, "nesterov", [&] { make("sgd", config); });
  config = {};
  config.momentum = -1;
  expect_error(Code::InvalidArgument, "momentum", [&] { make("sgd", config); });
  config = {};
  config.weight_decay = -1;
  expect_error(Code::InvalidArgument, "weight_decay", [&] { make("adamw", config); });
  config = {};
  config.beta1 = 1.0;
  expect_error(Code::InvalidArgument, "beta1", [&] { make("adam", config); });
  config = {};
  config.beta2 = -0.1;
  expect_error(Code::InvalidArgument, "beta2", [&] { make("adamw", config); });
  config = {};
  config.eps = -1e-8;
  expect_error(Code::InvalidArgument, "eps", [&] { make("adam", config); });
}

TEST(Optimizer, BadParametersAreRefused) {
  expect_error(Code::InvalidArgument, "empty parameter list", [] { Optimizer("sgd", {}, {}); });
  expect_error(Code::InvalidArgument, "'w' is an undefined tensor",
               [] { Optimizer("sgd", {{"w", at::Tensor()}}, {}); });
  auto leaf = param({1.0});
  expect_error(Code::InvalidArgument, "'twice' is not a leaf", [&] { Optimizer("sgd", {{"twice", leaf.mul(2)}}, {}); });
  expect_error(Code::InvalidArgument, "'w' appears more than once",
               [] { Optimizer("sgd", {{"w", param({1.0})}, {"w", param({2.0})}}, {}); });
  expect_error(Code::InvalidArgument, "'a' and 'b' are the same tensor",
               [&] { Optimizer("sgd", {{"a", leaf}, {"b", leaf}}, {}); });
}

// Two identical set-ups: one keeps going, the other is rebuilt from the saved state; they must agree.
TEST(Optimizer, AdamStateRoundTripContinuesIdentically) {
  OptimizerConfig config;
  config.lr = 0.01;
  auto w = param({1.0, -2.0});
  Optimizer original("adam", {{"w", w}}, config);
  run_steps(original, w, 1, 2);
  original.set_lr(0, 0.02);
  const auto saved = original.save_state();

  auto restored_w = param(values_of(w));
  Optimizer restored("adam", {{"w", restored_w}}, config);
  restored.load_state(saved);
  EXPECT_DOUBLE_EQ(restored.lr(0), 0.02);
  EXPECT_DOUBLE_EQ(restored.initial_lr(0), 0.01);

  run_steps(original, w, 3, 3);
  run_steps(restored, restored_w, 3, 3);
  expect_values(restored_w, values_of(w), 0.0);
}

// Weight and bias get different grads so that a mixed-up group would show.
void step_weight_and_bias(Optimizer& optimizer, const at::Tensor& w, const at::Tensor& b, int t) {
  set_grad(w, grad_at(t));
  set_grad(b, grad_at(t + 1));
  optimizer.step();
}

TEST(Optimizer, SgdMomentumStateRoundTripWithTwoGroups) {
  OptimizerConfig config;
  config.lr = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0.01;
  config.no_decay_patterns = {"*bias"};
  auto w = param({1.0, -2.0});
  auto b = param({0.5, 0.5});
  Optimizer original("sgd", {{"w", w}, {"bias", b}}, config);
  for (int t = 1; t <= 2; ++t) step_weight_and_bias(original, w, b, t);

  auto w2 = param(values_of(w));
  auto b2 = param(values_of(b));
  Optimizer restored("sgd", {{"w", w2}, {"bias", b2}}, config);
  restored.load_state(original.save_state());
  EXPECT_DOUBLE_EQ(restored.weight_decay(0), 0.01);
  EXPECT_DOUBLE_EQ(restored.weight_decay(1), 0.0);

  step_weight_and_bias(original, w, b, 3);
  step_weight_and_bias(restored, w2, b2, 3);
  expect_values(w2, values_of(w), 0.0);
  expect_values(b2, values_of(b), 0.0);
}

TEST(Optimizer, LoadReplacesTheWholeState) {
  OptimizerConfig config;
  config.lr = 0.01;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("adam", {{"w", w}}, config);
  const auto fresh = optimizer.save_state();  // no per-parameter state yet
  run_steps(optimizer, w, 1, 2);
  optimizer.load_state(fresh);

  // The next step is a first step again (step count and moments gone), as with Python's load_state_dict.
  const auto start = values_of(w);
  run_steps(optimizer, w, 1, 1);
  expect_values(w, adam_reference(start, 1, config, false));
}

TEST(Optimizer, LoadOfForeignBytesFailsAndChangesNothing) {
  OptimizerConfig config;
  config.lr = 0.01;
  auto w = param({1.0, -2.0});
  Optimizer optimizer("adam", {{"w", w}}, config);
  run_steps(optimizer, w, 1, 2);
  // The twin continues exactly as `optimizer` would if the failed loads below changed nothing.
  auto twin_w = param(values_of(w));
  Optimizer twin("adam", {{"w", twin_w}}, config);
  twin.load_state(optimizer.save_state());

  expect_error(Code::InvalidArgument, "not a saved optimizer archive", [&] { optimizer.load_state("garbage"); });
  expect_error(Code::InvalidArgument, "not a saved optimizer archive", [&] { optimizer.load_state(""); });
  Optimizer sgd("sgd", {{"w", param({1.0, 2.0})}}, config);
  expect_error(Code::InvalidArgument, "for 'sgd', this optimizer is 'adam'",
               [&] { optimizer.load_state(sgd.save_state()); });
  config.no_decay_patterns = {"b"};
  Optimizer two_groups("adam", {{"w", param({1.0, 2.0})}, {"b", param({1.0})}}, config);
  expect_error(Code::InvalidArgument, "2 parameter groups, this optimizer has 1",
               [&] { optimizer.load_state(two_groups.save_state()); });
  Optimizer bigger("adam", {{"w", param({1.0, 2.0})}, {"w2", param({1.0})}}, OptimizerConfig{});
  expect_error(Code::InvalidArgument, "has 2 parameters, this optimizer's has 1",
               [&] { optimizer.load_state(bigger.save_state()); });

  run_steps(optimizer, w, 3, 3);
  run_steps(twin, twin_w, 3, 3);
  expect_values(w, values_of(twin_w), 0.0);
}

}  // namespace
}  // namespace accel::train
