#include "train/schedule/scheduler.hpp"

#include <torch/serialize/archive.h>

#include <utility>

#include "core/error.hpp"
#include "train/optim/archive.hpp"

namespace accel::train {
namespace {

Schedule lambda_schedule(std::function<double(int64_t)> multiplier) {
  require_argument(static_cast<bool>(multiplier), "scheduler multiplier callback is empty");
  Schedule schedule;
  schedule.lr_at = [multiplier = std::move(multiplier)](int64_t step, double base_lr, double) {
    return base_lr * multiplier(step);
  };
  return schedule;
}

// torch's ReduceLROnPlateau needs a metric, and its other schedulers read a number given to step() as an
// epoch to jump to: either mix-up is refused.
void require_metric_use(const Scheduler& scheduler, bool metric_given) {
  if (scheduler.takes_metric() && !metric_given) {
    fail(Code::InvalidArgument, "the " + scheduler.name() +
                                    " schedule is stepped with a metric (accel_scheduler_step_with_metric)");
  }
  if (!scheduler.takes_metric() && metric_given) {
    fail(Code::InvalidArgument,
         "the " + scheduler.name() + " schedule takes no metric (only reduce_on_plateau does)");
  }
}

std::vector<double> read_group_values(torch::serialize::InputArchive& archive, const std::string& key, size_t size) {
  auto values = read_double_list(archive, key, "scheduler");
  require_argument(values.size() == size, "scheduler state has " + std::to_string(values.size()) + " " + key +
                                              ", this scheduler's optimizer has " + std::to_string(size) + " groups");
  return values;
}

Plateau::Counters read_plateau_counters(torch::serialize::InputArchive& archive) {
  Plateau::Counters counters;
  counters.best = read_double(archive, "plateau/best", "scheduler");
  counters.num_bad_epochs = read_int(archive, "plateau/num_bad_epochs", "scheduler");
  counters.cooldown_counter = read_int(archive, "plateau/cooldown_counter", "scheduler");
  require_argument(counters.num_bad_epochs >= 0 && counters.cooldown_counter >= 0,
                   "scheduler state has negative plateau counters");
  return counters;
}

}  // namespace

Scheduler::Scheduler(Optimizer& optimizer, const std::string& name, const SchedulerConfig& config)
    : optimizer_(optimizer), name_(name), schedule_(named_schedule(name, config, optimizer)) {
  start();
}

Scheduler::Scheduler(Optimizer& optimizer, std::function<double(int64_t step)> multiplier)
    : optimizer_(optimizer), name_("lambda"), schedule_(lambda_schedule(std::move(multiplier))) {
  start();
}

void Scheduler::start() {
  if (schedule_.plateau) plateau_.emplace(*schedule_.plateau);
  for (size_t group = 0; group < optimizer_.num_groups(); ++group) {
    base_lrs_.push_back(schedule_.base_lr.value_or(optimizer_.initial_lr(group)));
  }
  if (!plateau_) {
    apply(0);
    return;
  }
  // torch's ReduceLROnPlateau sets nothing when it is made.
  for (size_t group = 0; group < optimizer_.num_groups(); ++group) last_lrs_.push_back(optimizer_.lr(group));
}

// Every lr is computed before any is set, so a throwing callback changes nothing. The values are set as
// torch sets them, unchecked: its own schedules can give a negative lr (see Optimizer::assign_lr).
void Scheduler::apply(int64_t step) {
  std::vector<double> lrs;
  for (size_t group = 0; group < base_lrs_.size(); ++group) {
    lrs.push_back(schedule_.lr_at(step, base_lrs_[group], optimizer_.lr(group)));
  }
  const std::optional<double> momentum =
      schedule_.momentum_at ? std::optional<double>(schedule_.momentum_at(step)) : std::nullopt;
  for (size_t group = 0; group < lrs.size(); ++group) {
    optimizer_.assign_lr(group, lrs[group]);
    if (momentum) optimizer_.assign_momentum(group, *momentum);
  }
  last_lrs_ = std::move(lrs);
  step_count_ = step;
}

void Scheduler::step() {
  require_metric_use(*this, /*metric_given=*/false);
  if (!can_step()) {
    // torch OneCycleLR's ValueError
    fail(Code::InvalidState, "Tried to step " + std::to_string(step_count_ + 1) +
                                 " times. The specified number of total steps is " + std::to_string(schedule_.max_steps));
  }
  apply(step_count_ + 1);
}

void Scheduler::step_with_metric(double metric) {
  require_metric_use(*this, /*metric_given=*/true);
  if (plateau_->record(metric)) {
    for (size_t group = 0; group < optimizer_.num_groups(); ++group) {
      optimizer_.assign_lr(group, plateau_->reduced(optimizer_.lr(group)));
    }
  }
  for (size_t group = 0; group < optimizer_.num_groups(); ++group) last_lrs_[group] = optimizer_.lr(group);
  ++step_count_;
}

bool Scheduler::takes_metric() const { return plateau_.has_value(); }

int64_t Scheduler::step_count() const { return step_count_; }

double Scheduler::last_lr(size_t group) const {
  if (group >= last_lrs_.size()) {
    fail(Code::OutOfRange, "parameter group " + std::to_string(group) + " out of range (the scheduler has " +
                               std::to_string(last_lrs_.size()) + ")");
  }
  return last_lrs_[group];
}

const std::string& Scheduler::name() const { return name_; }

bool Scheduler::can_step() const { return schedule_.max_steps < 0 || step_count_ < schedule_.max_steps; }

std::string Scheduler::save_state() const {
  torch::serialize::OutputArchive archive;
  archive.write("accel/scheduler", c10::IValue(name_));
  archive.write("step_count", c10::IValue(step_count_));
  archive.write("base_lrs", c10::IValue(base_lrs_));
  archive.write("last_lrs", c10::IValue(last_lrs_));
  if (plateau_) {
    const auto& counters = plateau_->counters();
    archive.write("plateau/best", c10::IValue(counters.best));
    archive.write("plateau/num_bad_epochs", c10::IValue(counters.num_bad_epochs));
    archive.write("plateau/cooldown_counter", c10::IValue(counters.cooldown_counter));
  }
  return archive_bytes(archive);
}

void Scheduler::load_state(const std::string& bytes) {
  auto archive = read_archive(bytes, "scheduler");
  c10::IValue name;
  require_argument(archive.try_read("accel/scheduler", name) && name.isString(), "scheduler state has no schedule name");
  require_argument(name.toStringRef() == name_,
                   "scheduler state is for schedule '" + name.toStringRef() + "', this scheduler is '" + name_ + "'");
  c10::IValue step_count;
  require_argument(archive.try_read("step_count", step_count) && step_count.isInt() && step_count.toInt() >= 0,
                   "scheduler state has no step count");
  require_argument(schedule_.max_steps < 0 || step_count.toInt() <= schedule_.max_steps,
                   "scheduler state's step count " + std::to_string(step_count.toInt()) + " is past total_steps " +
                       std::to_string(schedule_.max_steps));
  auto base_lrs = read_group_values(archive, "base_lrs", base_lrs_.size());
  auto last_lrs = read_group_values(archive, "last_lrs", base_lrs_.size());
  std::optional<Plateau::Counters> counters;
  if (plateau_) counters = read_plateau_counters(archive);
  base_lrs_ = std::move(base_lrs);
  last_lrs_ = std::move(last_lrs);
  step_count_ = step_count.toInt();
  if (counters) plateau_->restore(*counters);
}

void accelerated_scheduler_step(Scheduler& scheduler, bool sync_gradients, bool step_was_skipped, bool split_batches,
                                int64_t num_processes, std::optional<double> metric, bool step_with_optimizer) {
  require_argument(num_processes >= 1, "num_processes must be >= 1, got " + std::to_string(num_processes));
  require_metric_use(scheduler, metric.has_value());
  const auto step_once = [&] {
    if (metric) {
      scheduler.step_with_metric(*metric);
    } else {
      scheduler.step();
    }
  };
  if (!step_with_optimizer) {
    step_once();
    return;
  }
  // Not syncing: the optimizer did not step. Skipped: an fp16 overflow, so the lr stays frozen.
  if (!sync_gradients || step_was_skipped) return;
  if (split_batches) {
    step_once();
    return;
  }
  // The loader is num_processes times shorter than the one the schedule was sized for; stepping that many
  // times keeps the schedule where single-process training would have it.
  for (int64_t i = 0; i < num_processes; ++i) {
    if (scheduler.can_step()) step_once();
  }
}

}  // namespace accel::train
