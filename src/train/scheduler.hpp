// Learning-rate schedules as torch.optim.lr_scheduler and transformers define them, and Accelerate's rule
// for stepping them (AcceleratedScheduler.step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/optimizer.hpp"

namespace accel::train {

// Options of the named schedules; each schedule reads only its own.
struct SchedulerConfig {
  int64_t warmup_steps = 0;  // linear, cosine
  int64_t total_steps = 0;  // linear, cosine, one_cycle; must be set (> 0)
  double num_cycles = 0.5;  // cosine
  int64_t step_size = 1;  // step
  double gamma = 0.1;  // step, exponential
  double max_lr = 0;  // one_cycle; must be set (> 0)
  double pct_start = 0.3;  // one_cycle
  double div_factor = 25;  // one_cycle
  double final_div_factor = 1e4;  // one_cycle
  // Not a schedule setting but Accelerate's stepping rule: the schedule counts global batches (step once per
  // optimizer step) instead of single-process ones (step num_processes times).
  bool split_batches = false;
};

// The lr of each group as a function of the step count n (0 before the first step), from the group's
// initial lr (torch's base_lrs, taken when the scheduler is made). Like torch, making a scheduler sets
// each group's lr for n = 0. The optimizer must outlive the scheduler.
//   "constant"     lr
//   "linear"       lr*n/warmup during warmup, then down to 0 at total_steps (get_linear_schedule_with_warmup)
//   "cosine"       warmup, then half a cosine per num_cycles=0.5 (get_cosine_schedule_with_warmup)
//   "step"         lr * gamma^(n / step_size) (StepLR)
//   "exponential"  lr * gamma^n (ExponentialLR)
//   "one_cycle"    torch OneCycleLR with cos annealing and two phases, which sets the lr absolutely (from
//                  max_lr) and allows total_steps steps; the momentum is not cycled (cycle_momentum=False)
//   a callback     lr * multiplier(n) (LambdaLR)
class Scheduler {
 public:
  // Unknown name or a missing / bad option: Error(InvalidArgument) naming it.
  Scheduler(Optimizer& optimizer, const std::string& name, const SchedulerConfig& config);
  // LambdaLR. An empty callback is Error(InvalidArgument); an exception from the callback propagates and
  // leaves the scheduler and the optimizer as they were.
  Scheduler(Optimizer& optimizer, std::function<double(int64_t step)> multiplier);

  void step();  // one torch-style scheduler.step(): n += 1, set each group's lr; !can_step(): InvalidState
  int64_t step_count() const;  // n, torch's last_epoch
  double last_lr(size_t group) const;  // torch's get_last_lr()[group]; out of range: Error(OutOfRange)
  const std::string& name() const;  // the schedule's name, "lambda" for a callback
  // False once a one_cycle schedule has made total_steps steps (torch raises on the next one; Accelerate
  // guards it, reference 4.2); always true for the others.
  bool can_step() const;

  // The step count, base lrs and last lrs (as torch's state_dict; the callback itself is not saved).
  // Loading does not touch the optimizer's lrs (they come back with the optimizer's own state). Bytes that
  // are not a scheduler state, or one of another schedule or group count: Error(InvalidArgument).
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  using LrFunction = std::function<double(int64_t step, double base_lr)>;
  Scheduler(Optimizer& optimizer, std::string name, LrFunction lr_at, int64_t max_steps);
  void apply(int64_t step);

  Optimizer& optimizer_;
  std::string name_;
  LrFunction lr_at_;
  int64_t max_steps_;  // the last allowed step count; -1: unbounded
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t step_count_ = 0;
};

// Accelerate's AcceleratedScheduler.step (reference 4.2): nothing when !sync_gradients or when the optimizer
// step was skipped (fp16 overflow); else one step with split_batches, or num_processes steps, each only
// while can_step(). num_processes < 1: Error(InvalidArgument).
void accelerated_scheduler_step(Scheduler& scheduler, bool sync_gradients, bool step_was_skipped, bool split_batches,
                                int64_t num_processes);

}  // namespace accel::train
