// Every named schedule over its whole length against a reference written here from the schedule's
// definition (transformers' docstrings and formulas, torch's documentation), not from accel's code; then
// what one_cycle does to the momentum, reduce_on_plateau's counting, and the settings each refuses.
// tests/train/torch_schedules_test.py compares the same schedules with torch itself, double for double.
#include "train/schedule/named_schedules.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"
#include "train/schedule/scheduler.hpp"

namespace accel::train {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLr = 0.1;

// Two groups ("w", and "b" without weight decay), both starting at lr.
Optimizer make_optimizer(const std::string& kind = "sgd", double lr = kLr) {
  OptimizerConfig config;
  config.lr = lr;
  config.momentum = kind == "sgd" ? 0.9 : 0;
  config.no_decay_patterns = {"b"};
  return Optimizer(kind, {{"w", at::tensor({1.0}).requires_grad_()}, {"b", at::tensor({1.0}).requires_grad_()}},
                   config);
}

// Steps a schedule from n = 0 to `last` and compares every group's lr with reference(n).
void expect_schedule(const std::string& name, const SchedulerConfig& config, int64_t last,
                     const std::function<double(int64_t)>& reference) {
  SCOPED_TRACE(name);
  auto optimizer = make_optimizer();
  Scheduler scheduler(optimizer, name, config);
  for (int64_t n = 0; n <= last; ++n) {
    if (n > 0) scheduler.step();
    ASSERT_EQ(scheduler.step_count(), n);
    const double expected = reference(n);
    EXPECT_NEAR(optimizer.lr(0), expected, 1e-14) << "step " << n;
    EXPECT_EQ(optimizer.lr(1), optimizer.lr(0)) << "step " << n;
    EXPECT_EQ(scheduler.last_lr(0), optimizer.lr(0)) << "step " << n;
  }
}

double ramp(int64_t n, int64_t warmup) { return kLr * static_cast<double>(n) / static_cast<double>(warmup); }

TEST(NamedSchedules, ConstantWithWarmupRisesThenHolds) {
  SchedulerConfig config;
  config.warmup_steps = 4;
  expect_schedule("constant_with_warmup", config, 10, [](int64_t n) { return n < 4 ? ramp(n, 4) : kLr; });
  expect_schedule("constant", config, 5, [](int64_t) { return kLr; });  // constant ignores the warmup
}

TEST(NamedSchedules, LinearFallsToZeroAtTotalSteps) {
  SchedulerConfig config;
  config.warmup_steps = 3;
  config.total_steps = 10;
  expect_schedule("linear", config, 14, [](int64_t n) {
    if (n < 3) return ramp(n, 3);
    return n >= 10 ? 0.0 : kLr * static_cast<double>(10 - n) / 7.0;
  });
}

TEST(NamedSchedules, CosineFollowsItsWaves) {
  for (double cycles : {0.5, 2.0}) {
    SchedulerConfig config;
    config.warmup_steps = 2;
    config.total_steps = 22;
    config.num_cycles = cycles;
    expect_schedule("cosine", config, 26, [&](int64_t n) {
      if (n < 2) return ramp(n, 2);
      const double progress = static_cast<double>(n - 2) / 20.0;
      return std::max(0.0, kLr * (1 + std::cos(2 * kPi * cycles * progress)) / 2);
    });
  }
}

TEST(NamedSchedules, CosineWithRestartsStartsEachCycleAgain) {
  SchedulerConfig config;
  config.warmup_steps = 2;
  config.total_steps = 32;
  for (std::optional<double> cycles : {std::optional<double>(), std::optional<double>(3.0)}) {
    config.num_cycles = cycles;
    const double c = cycles.value_or(1.0);  // the default differs from cosine's
    expect_schedule("cosine_with_restarts", config, 36, [&](int64_t n) {
      if (n < 2) return ramp(n, 2);
      const double progress = static_cast<double>(n - 2) / 30.0;
      if (progress >= 1) return 0.0;
      const double within = c * progress - std::floor(c * progress);  // where in its cycle
      return kLr * (1 + std::cos(kPi * within)) / 2;
    });
  }
}

TEST(NamedSchedules, PolynomialDecaysFromTheOptimizerLrToLrEnd) {
  for (double power : {1.0, 2.0, 0.5}) {
    SchedulerConfig config;
    config.warmup_steps = 3;
    config.total_steps = 15;
    config.power = power;
    config.lr_end = 0.01;
    expect_schedule("polynomial", config, 19, [&](int64_t n) {
      if (n < 3) return ramp(n, 3);
      if (n > 15) return 0.01;
      const double remaining = 1.0 - static_cast<double>(n - 3) / 12.0;
      return 0.01 + (kLr - 0.01) * std::pow(remaining, power);
    });
  }
}

TEST(NamedSchedules, InverseSqrtDecaysWithTheTimescale) {
  struct Case {
    int64_t warmup;
    std::optional<int64_t> timescale;
    double expected_timescale;
  };
  for (const auto& c : {Case{4, {}, 4}, Case{0, {}, 10000}, Case{3, 50, 50}}) {
    SchedulerConfig config;
    config.warmup_steps = c.warmup;
    config.timescale = c.timescale;
    expect_schedule("inverse_sqrt", config, 30, [&](int64_t n) {
      if (n < c.warmup) return ramp(n, c.warmup);
      const double since = static_cast<double>(n - c.warmup);
      return kLr * std::sqrt(c.expected_timescale / (since + c.expected_timescale));
    });
  }
}

TEST(NamedSchedules, CosineWithMinLrEndsAtMinLr) {
  SchedulerConfig config;
  config.warmup_steps = 2;
  config.total_steps = 12;
  const auto reference = [](double floor) {
    return [floor](int64_t n) {
      if (n < 2) return ramp(n, 2);
      const double progress = static_cast<double>(n - 2) / 10.0;
      return floor + (kLr - floor) * (1 + std::cos(kPi * progress)) / 2;
    };
  };
  config.min_lr = 0.02;
  expect_schedule("cosine_with_min_lr", config, 12, reference(0.02));
  config.min_lr.reset();
  config.min_lr_rate = 0.3;
  expect_schedule("cosine_with_min_lr", config, 12, reference(0.3 * kLr));
}

TEST(NamedSchedules, WarmupStableDecayHasItsThreePhases) {
  struct Case {
    std::string warmup_type, decay_type;
    double min_lr_ratio;
  };
  const auto shape = [](const std::string& type, double progress) {  // 0 → 1 for a warmup of that type
    if (type == "linear") return progress;
    if (type == "cosine") return (1 - std::cos(kPi * progress)) / 2;
    return 1 - std::sqrt(1 - progress);
  };
  for (const auto& c : {Case{"linear", "cosine", 0.0}, Case{"cosine", "linear", 0.1}, Case{"1-sqrt", "1-sqrt", 0.25}}) {
    SCOPED_TRACE(c.warmup_type + "/" + c.decay_type);
    SchedulerConfig config;
    config.warmup_steps = 4;
    config.num_stable_steps = 3;
    config.num_decay_steps = 8;
    config.warmup_type = c.warmup_type;
    config.decay_type = c.decay_type;
    config.min_lr_ratio = c.min_lr_ratio;
    const auto reference = [&](int64_t n) {
      const double low = c.min_lr_ratio;
      if (n < 4) return kLr * (low + (1 - low) * shape(c.warmup_type, static_cast<double>(n) / 4));
      if (n < 7) return kLr;
      if (n >= 15) return kLr * low;
      // The decay is the warmup's curve run backwards.
      const double remaining = 1 - static_cast<double>(n - 7) / 8;
      const double down = c.decay_type == "1-sqrt" ? 1 - std::sqrt(1 - remaining) : shape(c.decay_type, remaining);
      return kLr * (low + (1 - low) * down);
    };
    expect_schedule("warmup_stable_decay", config, 18, reference);
    config.num_stable_steps.reset();  // derived from total_steps instead
    config.total_steps = 4 + 3 + 8;
    expect_schedule("warmup_stable_decay", config, 18, reference);
  }
}

TEST(NamedSchedules, StepMultistepAndExponentialDecayTheLr) {
  SchedulerConfig config;
  config.step_size = 3;
  config.gamma = 0.5;
  expect_schedule("step", config, 10, [](int64_t n) { return kLr * std::pow(0.5, static_cast<double>(n / 3)); });
  config = {};
  config.milestones = {6, 2, 6};  // any order; 6 twice: gamma squared there
  config.gamma = 0.3;
  expect_schedule("multistep", config, 9, [](int64_t n) {
    const int decays = (n >= 2 ? 1 : 0) + (n >= 6 ? 2 : 0);
    return kLr * std::pow(0.3, decays);
  });
  config = {};
  config.gamma = 0.9;
  expect_schedule("exponential", config, 30, [](int64_t n) { return kLr * std::pow(0.9, static_cast<double>(n)); });
}

TEST(NamedSchedules, OneCycleCyclesTheMomentumOppositeToTheLr) {
  auto optimizer = make_optimizer("sgd");  // momentum 0.9
  SchedulerConfig config;
  config.max_lr = 1.0;
  config.total_steps = 21;
  config.pct_start = 0.5;  // the lr peaks at step 0.5 * 21 - 1 = 9.5
  Scheduler scheduler(optimizer, "one_cycle", config);
  EXPECT_NEAR(optimizer.lr(0), 1.0 / 25, 1e-15);
  EXPECT_NEAR(optimizer.momentum(0), 0.95, 1e-15);  // max_momentum when the scheduler is made
  double previous_lr = optimizer.lr(0), previous_momentum = optimizer.momentum(0);
  for (int n = 1; n < 21; ++n) {
    scheduler.step();
    const double lr = optimizer.lr(0), momentum = optimizer.momentum(0);
    EXPECT_EQ(optimizer.momentum(1), momentum);
    // Up to the peak the lr rises and the momentum falls; then the other way round.
    EXPECT_EQ(lr > previous_lr, n <= 10) << "step " << n;
    EXPECT_EQ(momentum < previous_momentum, n <= 10) << "step " << n;
    // Each moves by the same fraction of its phase's range (the lr's: 0.04 to 1, then 1 to 0.04 / 1e4).
    const double lowest_lr = n <= 9 ? 0.04 : 0.04 / 1e4;
    EXPECT_NEAR((lr - lowest_lr) / (1.0 - lowest_lr), (0.95 - momentum) / (0.95 - 0.85), 1e-12) << "step " << n;
    previous_lr = lr;
    previous_momentum = momentum;
  }
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.04 / 1e4);
  EXPECT_DOUBLE_EQ(optimizer.momentum(0), 0.95);
}

TEST(NamedSchedules, OneCycleCyclesAdamsBeta1AndLeavesBeta2) {
  auto optimizer = make_optimizer("adamw");
  SchedulerConfig config;
  config.max_lr = 0.5;
  config.total_steps = 10;
  config.base_momentum = 0.6;
  config.max_momentum = 0.8;
  config.anneal_strategy = "linear";
  Scheduler scheduler(optimizer, "one_cycle", config);
  EXPECT_DOUBLE_EQ(optimizer.betas(0).first, 0.8);
  for (int n = 0; n < 2; ++n) scheduler.step();  // the peak: 0.3 * 10 - 1 = 2
  EXPECT_NEAR(optimizer.lr(0), 0.5, 1e-15);
  EXPECT_NEAR(optimizer.betas(1).first, 0.6, 1e-15);
  EXPECT_EQ(optimizer.momentum(1), optimizer.betas(1).first);
  EXPECT_EQ(optimizer.betas(1).second, 0.999);
  scheduler.step();  // one step of the 7-step linear descent
  EXPECT_NEAR(optimizer.lr(0), 0.5 + (0.5 / 25 / 1e4 - 0.5) / 7, 1e-15);
  EXPECT_NEAR(optimizer.momentum(0), 0.6 + 0.2 / 7, 1e-15);
}

TEST(NamedSchedules, OneCycleThreePhasesReturnToTheInitialLrBeforeAnnealing) {
  auto optimizer = make_optimizer("sgd");
  SchedulerConfig config;
  config.max_lr = 1.0;
  config.total_steps = 30;
  config.pct_start = 0.2;  // phases end at 5, 10 and 29
  config.three_phase = true;
  Scheduler scheduler(optimizer, "one_cycle", config);
  std::vector<double> lrs{optimizer.lr(0)}, momentums{optimizer.momentum(0)};
  for (int n = 1; n < 30; ++n) {
    scheduler.step();
    lrs.push_back(optimizer.lr(0));
    momentums.push_back(optimizer.momentum(0));
  }
  EXPECT_DOUBLE_EQ(lrs[5], 1.0);
  EXPECT_DOUBLE_EQ(momentums[5], 0.85);
  EXPECT_DOUBLE_EQ(lrs[10], 0.04);
  EXPECT_DOUBLE_EQ(momentums[10], 0.95);
  EXPECT_DOUBLE_EQ(lrs[29], 0.04 / 1e4);
  for (int n = 10; n < 30; ++n) EXPECT_DOUBLE_EQ(momentums[n], 0.95) << "step " << n;  // held in phase three
  EXPECT_LT(lrs[20], lrs[10]);
}

TEST(NamedSchedules, OneCycleWithoutCycleMomentumLeavesTheMomentum) {
  auto optimizer = make_optimizer("sgd");
  SchedulerConfig config;
  config.max_lr = 1.0;
  config.total_steps = 10;
  config.cycle_momentum = false;
  Scheduler scheduler(optimizer, "one_cycle", config);
  for (int n = 0; n < 5; ++n) scheduler.step();
  EXPECT_EQ(optimizer.momentum(0), 0.9);
}

TEST(NamedSchedules, ReduceOnPlateauLowersTheLrAfterPatienceBadSteps) {
  auto optimizer = make_optimizer("sgd", 1.0);
  SchedulerConfig config;
  config.patience = 2;
  config.cooldown = 1;
  config.factor = 0.5;
  config.min_lr = 0.2;
  Scheduler scheduler(optimizer, "reduce_on_plateau", config);
  EXPECT_TRUE(scheduler.takes_metric());
  EXPECT_EQ(optimizer.lr(0), 1.0);  // made: nothing set
  // metric: 10 improves; 10 (tie), 9.9995 (within the 1e-4 relative threshold) and 11 are bad; the third
  // bad one reduces; 11 falls in the cooldown (not counted), then three more bad ones (12) reduce again;
  // 5 improves (and ends that cooldown), three 6s reduce to min_lr, where it stays.
  const std::vector<double> metrics{10, 10, 9.9995, 11, 11, 12, 12, 12, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6};
  const std::vector<double> expected{1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2,
                                     0.2, 0.2};
  for (size_t i = 0; i < metrics.size(); ++i) {
    scheduler.step_with_metric(metrics[i]);
    EXPECT_EQ(optimizer.lr(0), expected[i]) << "metric " << i;
    EXPECT_EQ(scheduler.last_lr(1), expected[i]) << "metric " << i;
  }
  EXPECT_EQ(scheduler.step_count(), static_cast<int64_t>(metrics.size()));
}

TEST(NamedSchedules, ReduceOnPlateauInMaxModeWithAnAbsoluteThreshold) {
  auto optimizer = make_optimizer("sgd", 1.0);
  SchedulerConfig config;
  config.mode = "max";
  config.threshold_mode = "abs";
  config.threshold = 0.5;
  config.patience = 0;
  Scheduler scheduler(optimizer, "reduce_on_plateau", config);
  scheduler.step_with_metric(1.0);  // better than -inf
  EXPECT_EQ(optimizer.lr(0), 1.0);
  scheduler.step_with_metric(1.4);  // not better by 0.5: reduced at once (patience 0)
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.1);
  scheduler.step_with_metric(1.6);  // better than 1.0 + 0.5
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.1);
  scheduler.step_with_metric(std::nan(""));  // never better
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.01);
}

TEST(NamedSchedules, ReduceOnPlateauSkipsReductionsOfEpsOrLess) {
  auto optimizer = make_optimizer("sgd", 1.0);
  SchedulerConfig config;
  config.patience = 0;
  config.min_lr = 1.0 - 1e-9;
  Scheduler scheduler(optimizer, "reduce_on_plateau", config);
  scheduler.step_with_metric(1.0);
  scheduler.step_with_metric(1.0);
  EXPECT_EQ(optimizer.lr(0), 1.0);
}

TEST(NamedSchedules, TheListOfNames) {
  EXPECT_EQ(schedule_names(),
            (std::vector<std::string>{"constant", "constant_with_warmup", "linear", "cosine", "cosine_with_restarts",
                                      "polynomial", "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay", "step",
                                      "multistep", "exponential", "one_cycle", "reduce_on_plateau"}));
}

TEST(NamedSchedules, RefusedSettingsAreNamedAndLeaveTheOptimizerAlone) {
  auto optimizer = make_optimizer("adam");
  const auto refused = [&](const std::string& name, const SchedulerConfig& config, const std::string& fragment) {
    SCOPED_TRACE(name + ": " + fragment);
    expect_error(Code::InvalidArgument, fragment, [&] { Scheduler(optimizer, name, config); });
    EXPECT_EQ(optimizer.lr(0), kLr);
    EXPECT_EQ(optimizer.momentum(0), 0.9);
  };
  refused("poly", {}, "unknown scheduler 'poly' (known: constant, constant_with_warmup, linear");
  refused("linear", {}, "linear schedule needs total_steps > 0, got 0");
  SchedulerConfig config;
  config.total_steps = 10;
  config.warmup_steps = -1;
  refused("cosine", config, "cosine schedule needs warmup_steps >= 0");
  refused("inverse_sqrt", config, "inverse_sqrt schedule needs warmup_steps >= 0");
  config = {};
  config.total_steps = 4;
  config.warmup_steps = 4;
  refused("polynomial", config, "no decay phase: total_steps equals warmup_steps (4)");
  config.warmup_steps = 0;
  config.lr_end = kLr;
  refused("polynomial", config, "needs lr_end (0.1) below the optimizer's initial lr (0.1)");
  config.lr_end = 0;
  config.power = -1;
  refused("polynomial", config, "needs power >= 0");
  config = {};
  config.timescale = 0;
  refused("inverse_sqrt", config, "needs timescale > 0, got 0");
  config = {};
  config.total_steps = 10;
  refused("cosine_with_min_lr", config, "needs min_lr or min_lr_rate");
  config.min_lr = 0.01;
  config.min_lr_rate = 0.1;
  refused("cosine_with_min_lr", config, "takes min_lr or min_lr_rate, not both");
  config = {};
  config.num_decay_steps = 5;
  refused("warmup_stable_decay", config, "needs num_stable_steps, or total_steps > 0 to derive it");
  config.total_steps = 4;
  refused("warmup_stable_decay", config, "needs num_stable_steps >= 0, got -1 (total_steps - warmup_steps - num_decay_steps)");
  config.num_stable_steps = 2;
  config.decay_type = "sqrt";
  refused("warmup_stable_decay", config, "unknown decay_type 'sqrt' (known: linear, cosine, 1-sqrt)");
  config = {};
  config.step_size = 0;
  refused("step", config, "step schedule needs step_size > 0");
  refused("multistep", {}, "multistep schedule needs milestones");
  config = {};
  config.total_steps = 10;
  refused("one_cycle", config, "one_cycle schedule needs max_lr > 0");
  config.max_lr = 1.0;
  config.pct_start = 1.5;
  refused("one_cycle", config, "pct_start in [0, 1]");
  config.pct_start = 0.1;  // 0.1 * 10 - 1 == 0: torch raises ZeroDivisionError when it is made
  refused("one_cycle", config, "empty phase");
  config.pct_start = 1.0;  // the last phase is empty: torch raises at step 10
  refused("one_cycle", config, "empty phase");
  config.total_steps = 8;
  config.pct_start = 0.5625;  // three phases, the last one from 2 * 4.5 - 2 = 7 to 7
  config.three_phase = true;
  refused("one_cycle", config, "(total_steps + 1) / 2");
  config = {};
  config.max_lr = 1.0;
  refused("one_cycle", config, "one_cycle schedule needs total_steps > 0");
  config.total_steps = 10;
  config.anneal_strategy = "cosine";
  refused("one_cycle", config, "unknown anneal_strategy 'cosine' (known: cos, linear)");
  config.anneal_strategy = "cos";
  config.max_momentum = 1.0;
  refused("one_cycle", config, "one_cycle max_momentum must be in [0, 1) for adam");
  config = {};
  config.factor = 1.0;
  refused("reduce_on_plateau", config, "needs factor < 1, got 1");
  config.factor = 0.5;
  config.mode = "minimum";
  refused("reduce_on_plateau", config, "unknown mode 'minimum' (known: min, max)");
  config.mode = "min";
  config.threshold_mode = "relative";
  refused("reduce_on_plateau", config, "unknown threshold_mode 'relative' (known: rel, abs)");
}

}  // namespace
}  // namespace accel::train
