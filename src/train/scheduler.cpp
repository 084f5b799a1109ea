#include "train/scheduler.hpp"

#include <torch/serialize/archive.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "core/options.hpp"
#include "train/archive.hpp"

namespace accel::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The multiplier of both transformers schedules during warmup.
double warmup_fraction(int64_t step, int64_t warmup_steps) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
}

void require_total_and_warmup(const std::string& name, const SchedulerConfig& config) {
  require_argument(config.total_steps > 0, name + " schedule needs total_steps > 0, got " + std::to_string(config.total_steps));
  require_argument(config.warmup_steps >= 0,
          name + " schedule needs warmup_steps >= 0, got " + std::to_string(config.warmup_steps));
}

// transformers.get_linear_schedule_with_warmup
double linear_multiplier(int64_t step, int64_t warmup, int64_t total) {
  if (step < warmup) return warmup_fraction(step, warmup);
  return std::max(0.0, static_cast<double>(total - step) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
}

// transformers.get_cosine_schedule_with_warmup
double cosine_multiplier(int64_t step, int64_t warmup, int64_t total, double num_cycles) {
  if (step < warmup) return warmup_fraction(step, warmup);
  const double progress =
      static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
  return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress)));
}

// torch OneCycleLR._annealing_cos
double annealing_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1.0);
}

// torch OneCycleLR.get_lr with three_phase=False: warm up from max_lr/div_factor to max_lr until
// pct_start*total_steps - 1, then anneal to initial/final_div_factor at total_steps - 1.
double one_cycle_lr(int64_t step, const SchedulerConfig& config) {
  const double initial_lr = config.max_lr / config.div_factor;
  const double min_lr = initial_lr / config.final_div_factor;
  const double warmup_end = config.pct_start * static_cast<double>(config.total_steps) - 1.0;
  const auto n = static_cast<double>(step);
  if (n <= warmup_end) return annealing_cos(initial_lr, config.max_lr, n / warmup_end);
  const double end = static_cast<double>(config.total_steps) - 1.0;
  return annealing_cos(config.max_lr, min_lr, (n - warmup_end) / (end - warmup_end));
}

void validate_one_cycle(const SchedulerConfig& config) {
  require_argument(config.total_steps > 0, "one_cycle schedule needs total_steps > 0, got " + std::to_string(config.total_steps));
  require_argument(config.max_lr > 0, "one_cycle schedule needs max_lr > 0, got " + format_number(config.max_lr));
  require_argument(config.pct_start >= 0 && config.pct_start <= 1,
          "one_cycle schedule needs pct_start in [0, 1], got " + format_number(config.pct_start));
  require_argument(config.div_factor > 0, "one_cycle schedule needs div_factor > 0, got " + format_number(config.div_factor));
  require_argument(config.final_div_factor > 0,
          "one_cycle schedule needs final_div_factor > 0, got " + format_number(config.final_div_factor));
  // torch divides by each phase's length and raises ZeroDivisionError when it steps into an empty one.
  const double warmup_end = config.pct_start * static_cast<double>(config.total_steps) - 1.0;
  require_argument(warmup_end != 0 && config.pct_start != 1,
          "one_cycle schedule has an empty phase: pct_start * total_steps must be neither 1 nor total_steps "
          "(pct_start " + format_number(config.pct_start) + ", total_steps " + std::to_string(config.total_steps) + ")");
}

using LrFunction = std::function<double(int64_t, double)>;

LrFunction named_schedule(const std::string& name, const SchedulerConfig& config) {
  const auto scaled = [](std::function<double(int64_t)> multiplier) -> LrFunction {
    return [multiplier](int64_t step, double base_lr) { return base_lr * multiplier(step); };
  };
  const int64_t warmup = config.warmup_steps;
  const int64_t total = config.total_steps;
  if (name == "constant") return [](int64_t, double base_lr) { return base_lr; };
  if (name == "linear") {
    require_total_and_warmup(name, config);
    return scaled([=](int64_t step) { return linear_multiplier(step, warmup, total); });
  }
  if (name == "cosine") {
    require_total_and_warmup(name, config);
    const double cycles = config.num_cycles;
    return scaled([=](int64_t step) { return cosine_multiplier(step, warmup, total, cycles); });
  }
  if (name == "step") {
    require_argument(config.step_size > 0, "step schedule needs step_size > 0, got " + std::to_string(config.step_size));
    const int64_t step_size = config.step_size;
    const double gamma = config.gamma;
    return scaled([=](int64_t step) { return std::pow(gamma, static_cast<double>(step / step_size)); });
  }
  if (name == "exponential") {
    const double gamma = config.gamma;
    return scaled([=](int64_t step) { return std::pow(gamma, static_cast<double>(step)); });
  }
  if (name == "one_cycle") {
    validate_one_cycle(config);
    return [config](int64_t step, double) { return one_cycle_lr(step, config); };
  }
  fail(Code::InvalidArgument,
       "unknown scheduler '" + name + "' (known: constant, linear, cosine, step, exponential, one_cycle)");
}

LrFunction lambda_schedule(std::function<double(int64_t)> multiplier) {
  require_argument(static_cast<bool>(multiplier), "scheduler multiplier callback is empty");
  return [multiplier = std::move(multiplier)](int64_t step, double base_lr) { return base_lr * multiplier(step); };
}

std::vector<double> read_group_values(torch::serialize::InputArchive& archive, const std::string& key, size_t size) {
  auto values = read_double_list(archive, key, "scheduler");
  require_argument(values.size() == size, "scheduler state has " + std::to_string(values.size()) + " " + key +
                                              ", this scheduler's optimizer has " + std::to_string(size) + " groups");
  return values;
}

}  // namespace

Scheduler::Scheduler(Optimizer& optimizer, std::string name, LrFunction lr_at, int64_t max_steps)
    : optimizer_(optimizer), name_(std::move(name)), lr_at_(std::move(lr_at)), max_steps_(max_steps) {
  for (size_t group = 0; group < optimizer_.num_groups(); ++group) base_lrs_.push_back(optimizer_.initial_lr(group));
  apply(0);
}

Scheduler::Scheduler(Optimizer& optimizer, const std::string& name, const SchedulerConfig& config)
    : Scheduler(optimizer, name, named_schedule(name, config), name == "one_cycle" ? config.total_steps : -1) {}

Scheduler::Scheduler(Optimizer& optimizer, std::function<double(int64_t step)> multiplier)
    : Scheduler(optimizer, "lambda", lambda_schedule(std::move(multiplier)), -1) {}

// Every lr is computed before any is set, so a throwing callback changes nothing.
void Scheduler::apply(int64_t step) {
  std::vector<double> lrs;
  for (double base_lr : base_lrs_) lrs.push_back(lr_at_(step, base_lr));
  for (size_t group = 0; group < lrs.size(); ++group) optimizer_.set_lr(group, lrs[group]);
  last_lrs_ = std::move(lrs);
  step_count_ = step;
}

void Scheduler::step() {
  if (!can_step()) {
    // torch OneCycleLR's ValueError
    fail(Code::InvalidState, "Tried to step " + std::to_string(step_count_ + 1) +
                                 " times. The specified number of total steps is " + std::to_string(max_steps_));
  }
  apply(step_count_ + 1);
}

int64_t Scheduler::step_count() const { return step_count_; }

double Scheduler::last_lr(size_t group) const {
  if (group >= last_lrs_.size()) {
    fail(Code::OutOfRange, "parameter group " + std::to_string(group) + " out of range (the scheduler has " +
                               std::to_string(last_lrs_.size()) + ")");
  }
  return last_lrs_[group];
}

const std::string& Scheduler::name() const { return name_; }

bool Scheduler::can_step() const { return max_steps_ < 0 || step_count_ < max_steps_; }

std::string Scheduler::save_state() const {
  torch::serialize::OutputArchive archive;
  archive.write("accel/scheduler", c10::IValue(name_));
  archive.write("step_count", c10::IValue(step_count_));
  archive.write("base_lrs", c10::IValue(base_lrs_));
  archive.write("last_lrs", c10::IValue(last_lrs_));
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
  require_argument(max_steps_ < 0 || step_count.toInt() <= max_steps_,
          "scheduler state's step count " + std::to_string(step_count.toInt()) + " is past total_steps " +
              std::to_string(max_steps_));
  auto base_lrs = read_group_values(archive, "base_lrs", base_lrs_.size());
  auto last_lrs = read_group_values(archive, "last_lrs", base_lrs_.size());
  base_lrs_ = std::move(base_lrs);
  last_lrs_ = std::move(last_lrs);
  step_count_ = step_count.toInt();
}

void accelerated_scheduler_step(Scheduler& scheduler, bool sync_gradients, bool step_was_skipped, bool split_batches,
                                int64_t num_processes) {
  require_argument(num_processes >= 1, "num_processes must be >= 1, got " + std::to_string(num_processes));
  // Not syncing: the optimizer did not step. Skipped: an fp16 overflow, so the lr stays frozen.
  if (!sync_gradients || step_was_skipped) return;
  if (split_batches) {
    scheduler.step();
    return;
  }
  // The loader is num_processes times shorter than the one the schedule was sized for; stepping that many
  // times keeps the schedule where single-process training would have it.
  for (int64_t i = 0; i < num_processes; ++i) {
    if (scheduler.can_step()) scheduler.step();
  }
}

}  // namespace accel::train
