// The schedules users pick by name: their settings, their checks, and what each sets at a step, built on
// the curves of schedule_formulas.hpp and the rules of torch.optim.lr_scheduler (torch 1.13).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/optim/optimizer.hpp"
#include "train/schedule/plateau.hpp"

namespace accel::train {

// The settings of every named schedule; each schedule reads only its own (capi/accel/scheduler.h says
// which). An unset optional is an option that was not given, where that matters.
struct SchedulerConfig {
  // transformers' schedules
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // linear, cosine, cosine_with_restarts, polynomial, cosine_with_min_lr, one_cycle
  std::optional<double> num_cycles;  // unset: 1 for cosine_with_restarts, 0.5 for the others
  double power = 1.0;  // polynomial
  double lr_end = 1e-7;  // polynomial
  std::optional<int64_t> timescale;  // inverse_sqrt; unset: warmup_steps, or 10000 without warmup
  std::optional<double> min_lr;  // cosine_with_min_lr (or min_lr_rate); reduce_on_plateau (unset: 0)
  std::optional<double> min_lr_rate;  // cosine_with_min_lr
  std::optional<int64_t> num_stable_steps;  // warmup_stable_decay; unset: total_steps - warmup - decay
  int64_t num_decay_steps = 0;  // warmup_stable_decay
  double min_lr_ratio = 0;  // warmup_stable_decay
  std::string warmup_type = "linear";  // warmup_stable_decay: linear, cosine, 1-sqrt
  std::string decay_type = "cosine";  // warmup_stable_decay: linear, cosine, 1-sqrt
  // torch's StepLR, MultiStepLR, ExponentialLR
  int64_t step_size = 1;
  double gamma = 0.1;
  std::vector<int64_t> milestones;  // multistep; a repeated milestone decays once per repetition
  // torch's OneCycleLR
  double max_lr = 0;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // cos, linear
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
  // torch's ReduceLROnPlateau (min_lr above)
  std::string mode = "min";  // min, max
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  // rel, abs
  int64_t cooldown = 0;
  double eps = 1e-8;
  // Not a schedule setting but Accelerate's stepping rule: the schedule counts global batches (step once per
  // optimizer step) instead of single-process ones (step num_processes times).
  bool split_batches = false;
};

// What a scheduler applies at step n (torch's last_epoch) of one named schedule.
struct Schedule {
  // The lr of a group at step n from its base lr (torch's base_lrs) and its lr now. torch's chainable
  // schedules (step, multistep, exponential) multiply the lr now, so that a change made to it between steps
  // carries on, as in torch. Empty for reduce_on_plateau, which is stepped with a metric instead.
  std::function<double(int64_t step, double base_lr, double current_lr)> lr_at;
  // one_cycle with cycle_momentum: every group's momentum (SGD) or beta1 (Adam, AdamW) at step n.
  std::function<double(int64_t step)> momentum_at;
  // one_cycle: every group's base lr is max_lr / div_factor (torch overwrites initial_lr with it); unset:
  // each group's initial lr.
  std::optional<double> base_lr;
  // The largest step count torch allows (one_cycle: total_steps); -1: unbounded.
  int64_t max_steps = -1;
  // reduce_on_plateau
  std::optional<PlateauConfig> plateau;
};

// The known names, in the order messages list them.
const std::vector<std::string>& schedule_names();

// The schedule `name` over `optimizer` (whose lr and kind some schedules read: polynomial's lr_init,
// cosine_with_min_lr's min_lr / lr, one_cycle's momentum range). An unknown name, a missing setting or a
// value the schedule refuses: Error(InvalidArgument) naming it.
Schedule named_schedule(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer);

}  // namespace accel::train
