// The Scheduler: traces printed by torch 1.13 (StepLR, ExponentialLR, OneCycleLR with its momentum),
// LambdaLR, stepping with and without a metric, then Accelerate's stepping rule with the tests of
// tests/test_scheduler.py (reference 4.2), then state save / load. Each named schedule against its own
// reference: named_schedules_test.cpp; against torch at test time: torch_schedules_test.py.
#include "train/schedule/scheduler.hpp"

#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Two groups ("w", and "b" without weight decay) unless no_decay says otherwise.
Optimizer make_optimizer(double lr, std::vector<std::string> no_decay = {"b"}) {
  OptimizerConfig config;
  config.lr = lr;
  config.momentum = 0.9;
  config.no_decay_patterns = std::move(no_decay);
  return Optimizer("sgd", {{"w", at::tensor({1.0}).requires_grad_()}, {"b", at::tensor({1.0}).requires_grad_()}},
                   config);
}

// The lr after each of `steps` steps, starting with the lr the scheduler set when it was made (n = 0);
// after_step runs after each step.
std::vector<double> trace(Optimizer& optimizer, Scheduler& scheduler, int steps,
                          const std::function<void()>& after_step = [] {}) {
  std::vector<double> lrs{optimizer.lr(0)};
  for (int i = 0; i < steps; ++i) {
    scheduler.step();
    EXPECT_EQ(scheduler.last_lr(0), optimizer.lr(0));
    lrs.push_back(optimizer.lr(0));
    after_step();
  }
  return lrs;
}

void expect_trace(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance = 1e-15) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t n = 0; n < expected.size(); ++n) EXPECT_NEAR(actual[n], expected[n], tolerance) << "step " << n;
}

TEST(Scheduler, ConstantKeepsTheInitialLr) {
  auto optimizer = make_optimizer(0.3);
  Scheduler scheduler(optimizer, "constant", {});
  expect_trace(trace(optimizer, scheduler, 3), {0.3, 0.3, 0.3, 0.3});
  EXPECT_EQ(scheduler.step_count(), 3);
  EXPECT_EQ(scheduler.name(), "constant");
}

TEST(Scheduler, LinearWithWarmupMatchesTransformersFormula) {
  auto optimizer = make_optimizer(0.1);
  SchedulerConfig config;
  config.warmup_steps = 3;
  config.total_steps = 10;
  Scheduler scheduler(optimizer, "linear", config);
  std::vector<double> expected;
  for (int n = 0; n <= 12; ++n) expected.push_back(0.1 * (n < 3 ? n / 3.0 : std::max(0.0, (10.0 - n) / 7.0)));
  expect_trace(trace(optimizer, scheduler, 12), expected);
  EXPECT_EQ(optimizer.lr(0), 0.0);  // stays at 0 past total_steps
  EXPECT_EQ(optimizer.lr(1), 0.0);  // every group follows
}

TEST(Scheduler, LinearWithoutWarmupStartsAtTheInitialLr) {
  auto optimizer = make_optimizer(0.1);
  SchedulerConfig config;
  config.total_steps = 4;
  Scheduler scheduler(optimizer, "linear", config);
  expect_trace(trace(optimizer, scheduler, 4), {0.1, 0.075, 0.05, 0.025, 0.0});
}

TEST(Scheduler, CosineWithWarmupMatchesTransformersFormula) {
  for (double cycles : {0.5, 1.0}) {
    auto optimizer = make_optimizer(0.2);
    SchedulerConfig config;
    config.warmup_steps = 2;
    config.total_steps = 10;
    config.num_cycles = cycles;
    Scheduler scheduler(optimizer, "cosine", config);
    std::vector<double> expected;
    for (int n = 0; n <= 11; ++n) {
      const double progress = (n - 2) / 8.0;
      expected.push_back(0.2 * (n < 2 ? n / 2.0 : std::max(0.0, 0.5 * (1 + std::cos(kPi * cycles * 2 * progress)))));
    }
    expect_trace(trace(optimizer, scheduler, 11), expected);
  }
}

TEST(Scheduler, StepMatchesTorchStepLR) {
  auto optimizer = make_optimizer(0.1);
  SchedulerConfig config;
  config.step_size = 3;
  config.gamma = 0.5;
  Scheduler scheduler(optimizer, "step", config);
  // torch.optim.lr_scheduler.StepLR(SGD(lr=0.1), step_size=3, gamma=0.5)
  expect_trace(trace(optimizer, scheduler, 8), {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025});
}

TEST(Scheduler, ExponentialMatchesTorchExponentialLR) {
  auto optimizer = make_optimizer(0.1);
  SchedulerConfig config;
  config.gamma = 0.9;
  Scheduler scheduler(optimizer, "exponential", config);
  // torch.optim.lr_scheduler.ExponentialLR(SGD(lr=0.1), gamma=0.9): multiplied step by step, so the
  // rounding is torch's exactly.
  expect_trace(trace(optimizer, scheduler, 5),
               {0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002,
                0.05904900000000002},
               0);
}

TEST(Scheduler, OneCycleMatchesTorchOneCycleLR) {
  auto optimizer = make_optimizer(123.0);  // ignored: one_cycle sets the lr absolutely
  SchedulerConfig config;
  config.max_lr = 0.5;
  config.total_steps = 10;
  Scheduler scheduler(optimizer, "one_cycle", config);
  // torch.optim.lr_scheduler.OneCycleLR(SGD(lr=0.1, momentum=0.9), max_lr=0.5, total_steps=10): the lr, and
  // the momentum, cycled by default (it was 0.9 before the scheduler was made).
  std::vector<double> momentums{optimizer.momentum(0)};
  const auto lrs = trace(optimizer, scheduler, 10, [&] { momentums.push_back(optimizer.momentum(1)); });
  expect_trace(lrs, {0.020000000000000018, 0.26, 0.5, 0.47524231600673683, 0.40587282697488153, 0.30563101096814466,
                     0.19437098903185537, 0.09412917302511849, 0.024759683993263143, 2e-06, 0.024759683993263115},
               0);
  expect_trace(momentums, {0.95, 0.8999999999999999, 0.85, 0.854951556604879, 0.8688255099070633, 0.8888739533021842,
                           0.9111260466978157, 0.9311744900929366, 0.945048443395121, 0.95, 0.945048443395121},
               0);
  // torch allows total_steps steps and raises on the next one.
  EXPECT_FALSE(scheduler.can_step());
  expect_error(Code::InvalidState, "Tried to step 11 times. The specified number of total steps is 10",
               [&] { scheduler.step(); });
  EXPECT_EQ(scheduler.step_count(), 10);
}

TEST(Scheduler, LambdaMultipliesTheInitialLr) {
  auto optimizer = make_optimizer(2.0);
  Scheduler scheduler(optimizer, [](int64_t n) { return 1.0 / static_cast<double>(n + 1); });
  EXPECT_EQ(scheduler.name(), "lambda");
  expect_trace(trace(optimizer, scheduler, 3), {2.0, 1.0, 2.0 / 3.0, 0.5});
}

TEST(Scheduler, ThrowingCallbackPropagatesAndChangesNothing) {
  auto optimizer = make_optimizer(1.0);
  Scheduler scheduler(optimizer, [](int64_t n) {
    if (n == 2) throw std::runtime_error("callback failed at 2");
    return 0.5;
  });
  scheduler.step();
  EXPECT_THROW(scheduler.step(), std::runtime_error);
  EXPECT_EQ(scheduler.step_count(), 1);
  EXPECT_EQ(optimizer.lr(0), 0.5);
  EXPECT_THROW(Scheduler(optimizer, [](int64_t) -> double { throw std::runtime_error("at 0"); }), std::runtime_error);
  expect_error(Code::InvalidArgument, "callback is empty", [&] { Scheduler(optimizer, nullptr); });
}

TEST(Scheduler, LastLrOfAGroupOutOfRange) {
  auto optimizer = make_optimizer(0.1);
  Scheduler constant(optimizer, "constant", {});
  expect_error(Code::OutOfRange, "group 2", [&] { constant.last_lr(2); });
}

TEST(Scheduler, AMetricGoesToReduceOnPlateauAndOnlyThere) {
  auto optimizer = make_optimizer(0.1);
  Scheduler constant(optimizer, "constant", {});
  expect_error(Code::InvalidArgument, "the constant schedule takes no metric (only reduce_on_plateau does)",
               [&] { constant.step_with_metric(1.0); });
  EXPECT_FALSE(constant.takes_metric());
  EXPECT_EQ(constant.step_count(), 0);
  Scheduler plateau(optimizer, "reduce_on_plateau", {});
  expect_error(Code::InvalidArgument, "the reduce_on_plateau schedule is stepped with a metric",
               [&] { plateau.step(); });
  plateau.step_with_metric(1.0);
  EXPECT_EQ(plateau.step_count(), 1);
  EXPECT_EQ(plateau.last_lr(0), 0.1);
}

// tests/test_scheduler.py lambda_test: LambdaLR(1 - n/10) on lr 1.0; one optimizer step, then a skipped one
// (and one that does not sync). With step_with_optimizer=False every call is one step, whatever happened.
TEST(AcceleratedSchedulerStep, LambdaTest) {
  for (bool with_optimizer : {true, false}) {
    for (int64_t processes : {1, 2}) {
      for (bool split : {false, true}) {
        SCOPED_TRACE("with_optimizer=" + std::to_string(with_optimizer) + " P=" + std::to_string(processes) +
                     " split=" + std::to_string(split));
        auto optimizer = make_optimizer(1.0);
        Scheduler scheduler(optimizer, [](int64_t n) { return 1.0 - static_cast<double>(n) / 10.0; });
        const auto call = [&](bool sync, bool skipped) {
          accelerated_scheduler_step(scheduler, sync, skipped, split, processes, std::nullopt, with_optimizer);
        };
        const double first = 1.0 - static_cast<double>(with_optimizer && !split ? processes : 1) / 10.0;
        call(/*sync=*/true, /*skipped=*/false);
        EXPECT_DOUBLE_EQ(optimizer.lr(0), first);
        call(true, /*skipped=*/true);
        EXPECT_DOUBLE_EQ(optimizer.lr(0), with_optimizer ? first : 1.0 - 2.0 / 10.0);
        call(/*sync=*/false, false);
        EXPECT_DOUBLE_EQ(optimizer.lr(0), with_optimizer ? first : 1.0 - 3.0 / 10.0);
      }
    }
  }
}

// tests/test_scheduler.py one_cycle_test: OneCycleLR with steps_per_epoch=2, epochs=1 (total_steps 2).
TEST(AcceleratedSchedulerStep, OneCycleTestAndTheTotalStepsGuard) {
  SchedulerConfig config;
  config.max_lr = 0.01;
  config.total_steps = 2;
  for (int64_t processes : {1, 2, 3}) {
    SCOPED_TRACE("P=" + std::to_string(processes));
    auto optimizer = make_optimizer(0.1);
    Scheduler scheduler(optimizer, "one_cycle", config);
    accelerated_scheduler_step(scheduler, true, false, /*split_batches=*/false, processes);
    // P steps, but never past total_steps: P=3 stops at 2 without an error.
    EXPECT_EQ(scheduler.step_count(), std::min<int64_t>(processes, 2));
  }
  // With split_batches, or without step_with_optimizer (one step per call, last_epoch 1 and not P),
  // Accelerate calls step() unguarded, so torch's error surfaces.
  for (bool split : {true, false}) {
    SCOPED_TRACE("split=" + std::to_string(split));
    auto optimizer = make_optimizer(0.1);
    Scheduler scheduler(optimizer, "one_cycle", config);
    const auto call = [&] { accelerated_scheduler_step(scheduler, true, false, split, 2, std::nullopt, split); };
    call();
    EXPECT_EQ(scheduler.step_count(), 1);
    call();
    expect_error(Code::InvalidState, "Tried to step 3 times", call);
  }
}

// tests/test_scheduler.py accumulation_test: 2 processes, linear schedule (warmup 0, 20 total steps),
// num_steps micro-batches per optimizer step over 10 * num_steps iterations.
TEST(AcceleratedSchedulerStep, AccumulationTest) {
  for (int num_steps : {1, 2, 4}) {
    SCOPED_TRACE("num_steps=" + std::to_string(num_steps));
    auto optimizer = make_optimizer(0.1);
    SchedulerConfig config;
    config.total_steps = 20;
    Scheduler scheduler(optimizer, "linear", config);
    const int iterations = 10 * num_steps;
    for (int it = 0; it < iterations; ++it) {
      const bool sync = (it + 1) % num_steps == 0;
      accelerated_scheduler_step(scheduler, sync, false, /*split_batches=*/false, 2);
      if (it == iterations - 2) {
        EXPECT_NE(optimizer.lr(0), 0.0);
      }
    }
    EXPECT_EQ(optimizer.lr(0), 0.0);
    EXPECT_EQ(scheduler.step_count(), 20);
  }
}

TEST(AcceleratedSchedulerStep, TracesForOneAndTwoProcesses) {
  SchedulerConfig config;
  config.warmup_steps = 2;
  config.total_steps = 10;
  const auto linear = [](int64_t n) { return 0.1 * (n < 2 ? n / 2.0 : (10.0 - n) / 8.0); };
  struct Case {
    int64_t processes;
    bool split;
    int64_t steps_per_call;
  };
  for (const auto& c : {Case{1, false, 1}, Case{1, true, 1}, Case{2, false, 2}, Case{2, true, 1}}) {
    SCOPED_TRACE("P=" + std::to_string(c.processes) + " split=" + std::to_string(c.split));
    auto optimizer = make_optimizer(0.1);
    Scheduler scheduler(optimizer, "linear", config);
    for (int64_t call = 1; call <= 4; ++call) {
      accelerated_scheduler_step(scheduler, true, false, c.split, c.processes);
      EXPECT_EQ(scheduler.step_count(), call * c.steps_per_call);
      EXPECT_NEAR(optimizer.lr(0), linear(call * c.steps_per_call), 1e-15);
    }
  }
}

// AcceleratedScheduler.step(metric) passes the metric to each of its steps: without split_batches a
// plateau counts num_processes bad steps per call.
TEST(AcceleratedSchedulerStep, AMetricStepsReduceOnPlateauByTheSameRule) {
  SchedulerConfig config;
  config.patience = 3;
  for (int64_t processes : {1, 2}) {
    for (bool split : {false, true}) {
      SCOPED_TRACE("P=" + std::to_string(processes) + " split=" + std::to_string(split));
      auto optimizer = make_optimizer(1.0);
      Scheduler scheduler(optimizer, "reduce_on_plateau", config);
      accelerated_scheduler_step(scheduler, /*sync_gradients=*/false, false, split, processes, 5.0);
      accelerated_scheduler_step(scheduler, true, /*step_was_skipped=*/true, split, processes, 5.0);
      EXPECT_EQ(scheduler.step_count(), 0);
      const int64_t per_call = split ? 1 : processes;
      int calls = 0;
      while (optimizer.lr(0) == 1.0) {
        accelerated_scheduler_step(scheduler, true, false, split, processes, 5.0);
        ++calls;
      }
      // The first step sets the best metric, the next patience + 1 (4) are bad and reduce.
      EXPECT_EQ(calls, (5 + per_call - 1) / per_call);
      EXPECT_EQ(scheduler.step_count(), calls * per_call);
      EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.1);
    }
  }
}

TEST(AcceleratedSchedulerStep, AMetricMixUpFailsEvenWhenNothingWouldStep) {
  auto optimizer = make_optimizer(0.1);
  Scheduler plateau(optimizer, "reduce_on_plateau", {});
  expect_error(Code::InvalidArgument, "stepped with a metric",
               [&] { accelerated_scheduler_step(plateau, /*sync_gradients=*/false, false, false, 2); });
  Scheduler constant(optimizer, "constant", {});
  expect_error(Code::InvalidArgument, "takes no metric",
               [&] { accelerated_scheduler_step(constant, /*sync_gradients=*/false, false, false, 2, 0.5); });
}

TEST(AcceleratedSchedulerStep, RefusesZeroProcesses) {
  auto optimizer = make_optimizer(0.1);
  Scheduler scheduler(optimizer, "constant", {});
  expect_error(Code::InvalidArgument, "num_processes", [&] { accelerated_scheduler_step(scheduler, true, false, false, 0); });
}

// Resuming: the optimizer state brings the lr back, the scheduler state the step count and lrs.
TEST(Scheduler, StateRoundTripResumesTheSchedule) {
  SchedulerConfig config;
  config.warmup_steps = 2;
  config.total_steps = 10;
  auto optimizer = make_optimizer(0.1);
  Scheduler scheduler(optimizer, "cosine", config);
  for (int i = 0; i < 5; ++i) scheduler.step();
  const auto optimizer_bytes = optimizer.save_state();
  const auto scheduler_bytes = scheduler.save_state();

  auto resumed_optimizer = make_optimizer(0.1);
  Scheduler resumed(resumed_optimizer, "cosine", config);
  resumed_optimizer.load_state(optimizer_bytes);
  resumed.load_state(scheduler_bytes);
  EXPECT_EQ(resumed.step_count(), 5);
  EXPECT_EQ(resumed.last_lr(0), scheduler.last_lr(0));
  EXPECT_EQ(resumed_optimizer.lr(0), optimizer.lr(0));
  scheduler.step();
  resumed.step();
  EXPECT_EQ(resumed_optimizer.lr(0), optimizer.lr(0));
  EXPECT_EQ(resumed_optimizer.lr(1), optimizer.lr(1));
}

TEST(Scheduler, LoadOfForeignBytesIsRefused) {
  auto optimizer = make_optimizer(0.1);
  Scheduler scheduler(optimizer, "constant", {});
  expect_error(Code::InvalidArgument, "not a saved scheduler archive", [&] { scheduler.load_state("junk"); });
  SchedulerConfig config;
  config.total_steps = 5;
  Scheduler linear(optimizer, "linear", config);
  expect_error(Code::InvalidArgument, "for schedule 'linear', this scheduler is 'constant'",
               [&] { scheduler.load_state(linear.save_state()); });
  expect_error(Code::InvalidArgument, "no schedule name", [&] { scheduler.load_state(optimizer.save_state()); });
  auto one_group = make_optimizer(0.1, {});
  Scheduler other(one_group, "constant", {});
  expect_error(Code::InvalidArgument, "has 1 base_lrs, this scheduler's optimizer has 2 groups",
               [&] { scheduler.load_state(other.save_state()); });
  EXPECT_EQ(scheduler.step_count(), 0);
}

// The momentum one_cycle cycles comes back with the optimizer's state, the step count with the scheduler's.
TEST(Scheduler, OneCycleResumesWithItsMomentum) {
  SchedulerConfig config;
  config.max_lr = 0.5;
  config.total_steps = 12;
  auto optimizer = make_optimizer(0.1);
  Scheduler scheduler(optimizer, "one_cycle", config);
  for (int i = 0; i < 5; ++i) scheduler.step();
  const auto optimizer_bytes = optimizer.save_state();
  const auto scheduler_bytes = scheduler.save_state();

  auto resumed_optimizer = make_optimizer(0.1);
  Scheduler resumed(resumed_optimizer, "one_cycle", config);
  resumed_optimizer.load_state(optimizer_bytes);
  resumed.load_state(scheduler_bytes);
  EXPECT_EQ(resumed_optimizer.momentum(0), optimizer.momentum(0));
  EXPECT_EQ(resumed.last_lr(1), scheduler.last_lr(1));
  while (scheduler.can_step()) {
    scheduler.step();
    resumed.step();
    EXPECT_EQ(resumed_optimizer.lr(0), optimizer.lr(0));
    EXPECT_EQ(resumed_optimizer.momentum(1), optimizer.momentum(1));
  }
  EXPECT_FALSE(resumed.can_step());
}

// reduce_on_plateau's best metric, bad steps and cooldown are in its state: a resumed plateau reduces
// when the uninterrupted one does.
TEST(Scheduler, ReduceOnPlateauResumesItsCounters) {
  SchedulerConfig config;
  config.patience = 2;
  config.cooldown = 2;
  auto optimizer = make_optimizer(1.0);
  Scheduler scheduler(optimizer, "reduce_on_plateau", config);
  for (double metric : {3.0, 2.0, 2.5, 2.5, 2.5, 2.4}) scheduler.step_with_metric(metric);  // reduced, cooling down
  auto resumed_optimizer = make_optimizer(1.0);
  Scheduler resumed(resumed_optimizer, "reduce_on_plateau", config);
  resumed_optimizer.load_state(optimizer.save_state());
  resumed.load_state(scheduler.save_state());
  EXPECT_EQ(resumed.step_count(), 6);
  for (double metric : {2.4, 2.3, 2.2, 2.1, 2.0, 2.0, 2.0}) {
    scheduler.step_with_metric(metric);
    resumed.step_with_metric(metric);
    EXPECT_EQ(resumed_optimizer.lr(0), optimizer.lr(0)) << metric;
  }
  EXPECT_DOUBLE_EQ(optimizer.lr(0), 0.01);  // reduced twice in all (a fresh plateau would not have yet)
}

}  // namespace
}  // namespace accel::train
