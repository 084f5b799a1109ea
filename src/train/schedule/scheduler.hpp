// A learning-rate scheduler over an optimizer's groups, stepped as torch.optim.lr_scheduler steps (the
// schedules themselves are in named_schedules.hpp), and Accelerate's rule for stepping it
// (AcceleratedScheduler.step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/optim/optimizer.hpp"
#include "train/schedule/named_schedules.hpp"
#include "train/schedule/plateau.hpp"

namespace accel::train {

// The lr of each group as a function of the step count n (torch's last_epoch: 0 when the scheduler is
// made, +1 per step). Like torch, making a scheduler sets each group's lr for n = 0 (one_cycle also the
// momentum, reduce_on_plateau nothing). The optimizer must outlive the scheduler. Not thread-safe: one
// thread at a time per optimizer and its schedulers.
class Scheduler {
 public:
  // A named schedule (named_schedules.hpp). Unknown name or a missing / bad option: Error(InvalidArgument)
  // naming it, with the optimizer untouched.
  Scheduler(Optimizer& optimizer, const std::string& name, const SchedulerConfig& config);
  // LambdaLR: lr = initial lr * multiplier(n). An empty callback is Error(InvalidArgument); an exception
  // from the callback propagates and leaves the scheduler and the optimizer as they were.
  Scheduler(Optimizer& optimizer, std::function<double(int64_t step)> multiplier);

  // One torch-style scheduler.step(): n += 1, then each group's lr (and momentum) for n. !can_step():
  // Error(InvalidState) with torch's message; reduce_on_plateau: Error(InvalidArgument) (it needs a metric).
  void step();
  // ReduceLROnPlateau.step(metric): n += 1, and each group's lr reduced when the metric has not improved
  // for more than patience steps. Any other schedule: Error(InvalidArgument) (torch would read the metric
  // as an epoch number).
  void step_with_metric(double metric);
  bool takes_metric() const;  // reduce_on_plateau

  int64_t step_count() const;  // n, torch's last_epoch
  double last_lr(size_t group) const;  // torch's get_last_lr()[group]; out of range: Error(OutOfRange)
  const std::string& name() const;  // the schedule's name, "lambda" for a callback
  // False once a one_cycle schedule has made total_steps steps (torch raises on the next one; Accelerate
  // guards it, reference 4.2); always true for the others.
  bool can_step() const;

  // The step count, base lrs, last lrs and, for reduce_on_plateau, the best metric, the steps without
  // improvement and the cooldown left (torch's state_dict less the settings, which come from the options
  // the scheduler was made with, as transformers' schedules' do). Loading touches no optimizer setting: the
  // lrs and momentums come back with the optimizer's own state. Bytes that are not a scheduler state, or one
  // of another schedule or group count: Error(InvalidArgument), and the scheduler is unchanged.
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  void start();  // what making the scheduler does to the optimizer, once the schedule is known
  void apply(int64_t step);

  Optimizer& optimizer_;
  std::string name_;
  Schedule schedule_;
  std::optional<Plateau> plateau_;  // reduce_on_plateau only
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t step_count_ = 0;
};

// Accelerate's AcceleratedScheduler.step (reference 4.2): nothing when !sync_gradients or when the optimizer
// step was skipped (fp16 overflow); else one step with split_batches, or num_processes steps, each only
// while can_step(). With a metric every step is step_with_metric(metric), so a reduce_on_plateau scheduler
// counts num_processes steps per call unless split_batches, as in Accelerate. Without step_with_optimizer
// (Accelerate's step_scheduler_with_optimizer=False, for schedules counted in epochs or calls) every call
// is one step, whatever the optimizer did. num_processes < 1, or a metric given to a schedule that takes
// none or missing for one that does: Error(InvalidArgument), even on a step that would not step.
void accelerated_scheduler_step(Scheduler& scheduler, bool sync_gradients, bool step_was_skipped, bool split_batches,
                                int64_t num_processes, std::optional<double> metric = std::nullopt,
                                bool step_with_optimizer = true);

}  // namespace accel::train
