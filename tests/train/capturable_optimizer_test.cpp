// The optimizer step a CUDA graph captures (train/optim/capturable_optimizer.hpp) against torch::optim's own step,
// on the CPU: the same state after many steps (to the rounding its header describes), the state written back
// for save_state and an eager step, learning rates pushed when a scheduler changes them, a skipped step that
// changes nothing, and a capture refused while a parameter has no state yet.
#include "train/optim/capturable_optimizer.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "train/optim/optimizer.hpp"

namespace accel::train {
namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

// Three float32 parameters of odd sizes; "bias" matches the no-decay pattern below, giving a second group.
Named parameters(int64_t seed) {
  at::manual_seed(seed);
  return {{"w", at::randn({7, 13}).requires_grad_()},
          {"v", at::randn({31}).requires_grad_()},
          {"bias", at::randn({5}).requires_grad_()}};
}

Named copies(const Named& named) {
  Named out;
  for (const auto& [name, tensor] : named) out.emplace_back(name, tensor.detach().clone().requires_grad_());
  return out;
}

// The same gradients for both optimizers: fixed by the step, independent of the weights.
void set_grads(const Named& a, const Named& b, int step) {
  at::manual_seed(1000 + step);
  for (size_t i = 0; i < a.size(); ++i) {
    const auto grad = at::randn(a[i].second.sizes());
    a[i].second.mutable_grad() = grad.clone();
    b[i].second.mutable_grad() = grad.clone();
  }
}

// The largest difference between a and b in units of the last place of a's largest magnitude: rounding
// differences add up over steps in these units, while near zero an element's own ulps are much finer.
double max_ulps(const at::Tensor& a, const at::Tensor& b) {
  const auto x = a.detach().to(at::kDouble), y = b.detach().to(at::kDouble);
  const double magnitude = x.abs().max().item<double>();
  const double unit = std::ldexp(1.0, std::ilogb(magnitude) - 23);
  return x.sub(y).abs().max().item<double>() / unit;
}

bool identical(const at::Tensor& a, const at::Tensor& b) { return a.equal(b); }

struct Case {
  const char* name;
  std::string kind;
  OptimizerConfig config;
};

OptimizerConfig config(double lr, double momentum, double dampening, bool nesterov, double weight_decay) {
  OptimizerConfig c;
  c.lr = lr;
  c.momentum = momentum;
  c.dampening = dampening;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  c.no_decay_patterns = {"bias"};
  return c;
}

std::vector<Case> cases() {
  return {{"sgd", "sgd", config(0.05, 0, 0, false, 0)},
          {"sgd_momentum_dampening_decay", "sgd", config(0.05, 0.9, 0.1, false, 0.01)},
          {"sgd_nesterov", "sgd", config(0.05, 0.9, 0, true, 0.01)},
          {"adam_decay", "adam", config(1e-2, 0, 0, false, 0.01)},
          {"adamw_decay", "adamw", config(1e-2, 0, 0, false, 0.1)}};
}

constexpr int kSteps = 30;

// kSteps steps of torch::optim (a) and of the capturable step (b) from the same weights and grads, the lr
// changed on both every 7 steps; the weights stay within one unit in the last place per step.
TEST(CapturableOptimizer, FollowsTorchOptimToRoundingOverManySteps) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto a_params = parameters(1);
    const auto b_params = copies(a_params);
    Optimizer a(c.kind, a_params, c.config);
    Optimizer b(c.kind, b_params, c.config);
    for (int step = 1; step <= kSteps; ++step) {
      if (step % 7 == 0) {
        for (size_t g = 0; g < a.num_groups(); ++g) {
          a.set_lr(g, a.lr(g) * 0.5);
          b.set_lr(g, b.lr(g) * 0.5);
        }
      }
      set_grads(a_params, b_params, step);
      a.step();
      b.capturable().refresh();
      b.capturable().step(at::Tensor(), /*capturing=*/false);
    }
    for (size_t i = 0; i < a_params.size(); ++i) {
      EXPECT_LE(max_ulps(a_params[i].second, b_params[i].second), kSteps) << a_params[i].first;
    }
  }
}

// A state that depends on the gradients alone (momentum without weight decay, AdamW's moments) comes out
// identical, bit for bit: the capturable step performs torch::optim's operations on it.
TEST(CapturableOptimizer, MomentsMatchTorchOptimBitForBit) {
  for (const auto& [kind, cfg] : std::vector<std::pair<std::string, OptimizerConfig>>{
           {"sgd", config(0.05, 0.9, 0.1, false, 0)}, {"adamw", config(1e-2, 0, 0, false, 0.1)}}) {
    SCOPED_TRACE(kind);
    const auto a_params = parameters(2);
    const auto b_params = copies(a_params);
    Optimizer a(kind, a_params, cfg);
    Optimizer b(kind, b_params, cfg);
    for (int step = 1; step <= 10; ++step) {
      set_grads(a_params, b_params, step);
      a.step();
      b.capturable().refresh();
      b.capturable().step(at::Tensor(), false);
    }
    // One eager step from each saved state, from the same weights with the same grads, moves both the same
    // way only if the moments and the step counts agree.
    const auto same_start = copies(a_params);
    Optimizer a_next(kind, same_start, cfg), b_next(kind, copies(same_start), cfg);
    a_next.load_state(a.save_state());
    b_next.load_state(b.save_state());
    const auto a_start = a_next.parameters();
    const auto b_start = b_next.parameters();
    at::manual_seed(77);
    for (size_t i = 0; i < a_start.size(); ++i) {
      const auto grad = at::randn(a_start[i].sizes());
      a_start[i].mutable_grad() = grad.clone();
      b_start[i].mutable_grad() = grad.clone();
    }
    a_next.step();
    b_next.step();
    for (size_t i = 0; i < a_start.size(); ++i) EXPECT_TRUE(identical(a_start[i], b_start[i])) << "parameter " << i;
  }
}

// After capturable steps, an eager torch::optim step continues from the step counts they reached (written
// back first), and capturable steps after it continue from the eager one's.
TEST(CapturableOptimizer, EagerAndCapturableStepsShareTheStepCounts) {
  const auto cfg = config(1e-2, 0, 0, false, 0.1);
  const auto a_params = parameters(3);
  const auto b_params = copies(a_params);
  Optimizer a("adamw", a_params, cfg);
  Optimizer b("adamw", b_params, cfg);
  for (int step = 1; step <= 12; ++step) {
    set_grads(a_params, b_params, step);
    a.step();
    if (step == 6) {
      b.step();  // an eager step in the middle: bias corrections of step 6, not of step 1
    } else {
      b.capturable().refresh();
      b.capturable().step(at::Tensor(), false);
    }
  }
  for (size_t i = 0; i < a_params.size(); ++i) EXPECT_LE(max_ulps(a_params[i].second, b_params[i].second), 12);
  // A replayed step runs no host code: refresh() alone must bring the counts of an eager step to the
  // device, so that a capture (and every replay of it) starts from them.
  set_grads(a_params, b_params, 13);
  b.step();
  EXPECT_THROW(b.capturable().step(at::Tensor(), /*capturing=*/true), OptimizerStateNotReady);
  b.capturable().refresh();
  EXPECT_NO_THROW(b.capturable().step(at::Tensor(), /*capturing=*/true));
}

// A skip flag that holds leaves weights and state exactly as they were, whatever the grads hold; one that
// does not hold changes nothing against no flag at all.
TEST(CapturableOptimizer, ASkippedStepChangesNothing) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto a_params = parameters(4);
    const auto b_params = copies(a_params);
    Optimizer a(c.kind, a_params, c.config);
    Optimizer b(c.kind, b_params, c.config);
    for (int step = 1; step <= 3; ++step) {  // every parameter gets its state
      set_grads(a_params, b_params, step);
      a.capturable().refresh();
      a.capturable().step(at::Tensor(), false);
      b.capturable().refresh();
      b.capturable().step(at::scalar_tensor(false, at::kBool), false);
    }
    for (size_t i = 0; i < a_params.size(); ++i) EXPECT_TRUE(identical(a_params[i].second, b_params[i].second));
    const auto weights = copies(b_params);
    const auto saved = b.save_state();
    set_grads(a_params, b_params, 4);
    b_params[0].second.mutable_grad().fill_(INFINITY);
    b_params[1].second.mutable_grad()[0] = NAN;
    b.capturable().step(at::scalar_tensor(true, at::kBool), false);
    for (size_t i = 0; i < b_params.size(); ++i) EXPECT_TRUE(identical(b_params[i].second, weights[i].second));
    EXPECT_EQ(b.save_state(), saved) << "the state (moments, step counts) changed on a skipped step";
  }
}

// A capture cannot make state (a replay would make it again each time): it refuses, and an eager step makes it.
TEST(CapturableOptimizer, RefusesToCaptureAParameterWithoutState) {
  const auto params = parameters(5);
  Optimizer optimizer("adam", params, config(1e-2, 0, 0, false, 0));
  for (const auto& [name, tensor] : params) tensor.mutable_grad() = at::full(tensor.sizes(), 0.5);
  optimizer.capturable().refresh();
  const auto before = copies(params);
  EXPECT_THROW(optimizer.capturable().step(at::Tensor(), /*capturing=*/true), OptimizerStateNotReady);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(identical(params[i].second, before[i].second));
  // A skipped first step makes no state either, as torch's GradScaler skips optimizer.step() altogether.
  optimizer.capturable().step(at::scalar_tensor(true, at::kBool), false);
  EXPECT_THROW(optimizer.capturable().step(at::Tensor(), true), OptimizerStateNotReady);
  optimizer.capturable().step(at::Tensor(), false);
  EXPECT_FALSE(identical(params[0].second, before[0].second));
  EXPECT_NO_THROW(optimizer.capturable().step(at::Tensor(), true));
}

// A learning rate changed on the host reaches the device step; an unchanged one is not written again.
TEST(CapturableOptimizer, PushesChangedLearningRates) {
  const auto a_params = parameters(6);
  const auto b_params = copies(a_params);
  Optimizer a("sgd", a_params, config(0.1, 0, 0, false, 0));
  Optimizer b("sgd", b_params, config(0.1, 0, 0, false, 0));
  for (int step = 1; step <= 4; ++step) {
    a.set_lr(0, 0.1 / step);
    b.set_lr(0, 0.1 / step);
    set_grads(a_params, b_params, step);
    a.step();
    b.capturable().refresh();
    b.capturable().step(at::Tensor(), false);
  }
  for (size_t i = 0; i < a_params.size(); ++i) EXPECT_LE(max_ulps(a_params[i].second, b_params[i].second), 4);
  // Without the push, the step would still use 0.025: the weights would move 4x less than torch's.
  a.set_lr(0, 0.1);
  b.set_lr(0, 0.1);
  set_grads(a_params, b_params, 5);
  a.step();
  b.capturable().refresh();
  b.capturable().step(at::Tensor(), false);
  for (size_t i = 0; i < a_params.size(); ++i) EXPECT_LE(max_ulps(a_params[i].second, b_params[i].second), 5);
}

TEST(CapturableOptimizer, ConstantsAreTheSettingsButTheLearningRate) {
  const auto params = parameters(7);
  Optimizer optimizer("sgd", params, config(0.1, 0.9, 0, false, 0));
  const auto before = optimizer.capturable().constants();
  optimizer.set_lr(0, 0.5);
  EXPECT_EQ(optimizer.capturable().constants(), before);
  optimizer.assign_momentum(0, 0.8);
  EXPECT_NE(optimizer.capturable().constants(), before);
}

}  // namespace
}  // namespace accel::train
