#include "train/schedule/named_schedules.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "core/options.hpp"
#include "train/schedule/schedule_formulas.hpp"

namespace accel::train {
namespace {

using Builder = Schedule (*)(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer);

// LambdaLR: every group's base lr times the multiplier of the step.
Schedule multiplying(std::function<double(int64_t)> multiplier) {
  Schedule schedule;
  schedule.lr_at = [multiplier = std::move(multiplier)](int64_t step, double base_lr, double) {
    return base_lr * multiplier(step);
  };
  return schedule;
}

// torch's chainable form: the lr now times the decay of the step (1 between decays; multiplying by 1 is
// exact, so this is torch's "return group['lr']" there).
Schedule chaining(std::function<double(int64_t)> decay) {
  Schedule schedule;
  schedule.lr_at = [decay = std::move(decay)](int64_t step, double, double current_lr) {
    return current_lr * decay(step);
  };
  return schedule;
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

void require_warmup(const std::string& name, const SchedulerConfig& config) {
  require_argument(config.warmup_steps >= 0,
                   name + " schedule needs warmup_steps >= 0, got " + std::to_string(config.warmup_steps));
}

void require_total_and_warmup(const std::string& name, const SchedulerConfig& config) {
  require_argument(config.total_steps > 0,
                   name + " schedule needs total_steps > 0, got " + std::to_string(config.total_steps));
  require_warmup(name, config);
}

// transformers reads optimizer.defaults["lr"]: the lr every group of an accel optimizer starts with.
double optimizer_initial_lr(const Optimizer& optimizer) { return optimizer.initial_lr(0); }

Schedule constant(const std::string&, const SchedulerConfig&, const Optimizer&) {
  return multiplying([](int64_t) { return 1.0; });
}

Schedule constant_with_warmup(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_warmup(name, config);
  const int64_t warmup = config.warmup_steps;
  return multiplying([=](int64_t step) { return formulas::constant_with_warmup(step, warmup); });
}

Schedule linear(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_total_and_warmup(name, config);
  const int64_t warmup = config.warmup_steps, total = config.total_steps;
  return multiplying([=](int64_t step) { return formulas::linear_with_warmup(step, warmup, total); });
}

Schedule cosine(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_total_and_warmup(name, config);
  const int64_t warmup = config.warmup_steps, total = config.total_steps;
  const double cycles = config.num_cycles.value_or(0.5);
  return multiplying([=](int64_t step) { return formulas::cosine_with_warmup(step, warmup, total, cycles, 0.0); });
}

Schedule cosine_with_restarts(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_total_and_warmup(name, config);
  const int64_t warmup = config.warmup_steps, total = config.total_steps;
  const double cycles = config.num_cycles.value_or(1.0);
  return multiplying(
      [=](int64_t step) { return formulas::cosine_with_hard_restarts(step, warmup, total, cycles); });
}

Schedule polynomial(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer) {
  require_total_and_warmup(name, config);
  // transformers divides by total_steps - warmup_steps at step total_steps, and raises 0 ** power there.
  require_argument(config.total_steps != config.warmup_steps,
                   name + " schedule has no decay phase: total_steps equals warmup_steps (" +
                       std::to_string(config.total_steps) + ")");
  require_argument(config.power >= 0, name + " schedule needs power >= 0, got " + format_number(config.power));
  const double lr_init = optimizer_initial_lr(optimizer);
  require_argument(lr_init > config.lr_end, name + " schedule needs lr_end (" + format_number(config.lr_end) +
                                                ") below the optimizer's initial lr (" + format_number(lr_init) + ")");
  const int64_t warmup = config.warmup_steps, total = config.total_steps;
  const double lr_end = config.lr_end, power = config.power;
  return multiplying([=](int64_t step) {
    return formulas::polynomial_decay_with_warmup(step, warmup, total, lr_init, lr_end, power);
  });
}

Schedule inverse_sqrt(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_warmup(name, config);
  const int64_t warmup = config.warmup_steps;
  const int64_t timescale = config.timescale.value_or(warmup > 0 ? warmup : 10000);
  require_argument(timescale > 0, name + " schedule needs timescale > 0, got " + std::to_string(timescale));
  return multiplying([=](int64_t step) { return formulas::inverse_sqrt(step, warmup, timescale); });
}

Schedule cosine_with_min_lr(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer) {
  require_total_and_warmup(name, config);
  require_argument(!(config.min_lr && config.min_lr_rate), name + " schedule takes min_lr or min_lr_rate, not both");
  require_argument(config.min_lr || config.min_lr_rate, name + " schedule needs min_lr or min_lr_rate");
  double min_lr_rate = 0;
  if (config.min_lr) {
    const double lr_init = optimizer_initial_lr(optimizer);
    require_argument(lr_init > 0, name + " schedule with min_lr needs an optimizer lr > 0 (min_lr_rate = min_lr / lr)");
    min_lr_rate = *config.min_lr / lr_init;
  } else {
    min_lr_rate = *config.min_lr_rate;
  }
  const int64_t warmup = config.warmup_steps, total = config.total_steps;
  const double cycles = config.num_cycles.value_or(0.5);
  return multiplying(
      [=](int64_t step) { return formulas::cosine_with_warmup(step, warmup, total, cycles, min_lr_rate); });
}

formulas::Ramp ramp_named(const std::string& schedule, const std::string& key, const std::string& value) {
  if (value == "linear") return formulas::Ramp::Linear;
  if (value == "cosine") return formulas::Ramp::Cosine;
  if (value == "1-sqrt") return formulas::Ramp::OneMinusSqrt;
  fail(Code::InvalidArgument,
       schedule + " schedule has an unknown " + key + " " + quoted(value) + " (known: linear, cosine, 1-sqrt)");
}

Schedule warmup_stable_decay(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_warmup(name, config);
  require_argument(config.num_decay_steps >= 0,
                   name + " schedule needs num_decay_steps >= 0, got " + std::to_string(config.num_decay_steps));
  formulas::WarmupStableDecay shape;
  shape.warmup_steps = config.warmup_steps;
  shape.decay_steps = config.num_decay_steps;
  if (config.num_stable_steps) {
    shape.stable_steps = *config.num_stable_steps;
  } else {
    require_argument(config.total_steps > 0, name + " schedule needs num_stable_steps, or total_steps > 0 to derive it");
    shape.stable_steps = config.total_steps - config.warmup_steps - config.num_decay_steps;
  }
  require_argument(shape.stable_steps >= 0,
                   name + " schedule needs num_stable_steps >= 0, got " + std::to_string(shape.stable_steps) +
                       (config.num_stable_steps ? "" : " (total_steps - warmup_steps - num_decay_steps)"));
  shape.warmup = ramp_named(name, "warmup_type", config.warmup_type);
  shape.decay = ramp_named(name, "decay_type", config.decay_type);
  shape.min_lr_ratio = config.min_lr_ratio;
  shape.num_cycles = config.num_cycles.value_or(0.5);
  return multiplying([=](int64_t step) { return formulas::warmup_stable_decay(step, shape); });
}

Schedule step(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_argument(config.step_size > 0, name + " schedule needs step_size > 0, got " + std::to_string(config.step_size));
  const int64_t step_size = config.step_size;
  const double gamma = config.gamma;
  return chaining([=](int64_t n) { return n == 0 || n % step_size != 0 ? 1.0 : gamma; });
}

Schedule multistep(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_argument(!config.milestones.empty(), name + " schedule needs milestones (steps, e.g. \"30,80\")");
  std::map<int64_t, int64_t> repetitions;  // torch's Counter(milestones)
  for (int64_t milestone : config.milestones) ++repetitions[milestone];
  const double gamma = config.gamma;
  return chaining([=](int64_t n) {
    const auto found = repetitions.find(n);
    return found == repetitions.end() ? 1.0 : std::pow(gamma, static_cast<double>(found->second));
  });
}

Schedule exponential(const std::string&, const SchedulerConfig& config, const Optimizer&) {
  const double gamma = config.gamma;
  return chaining([=](int64_t n) { return n == 0 ? 1.0 : gamma; });
}

// One phase of torch's OneCycleLR: it ends at end_step and anneals from its start values to its end ones.
struct OneCyclePhase {
  double end_step;
  double start_lr, end_lr;
  double start_momentum, end_momentum;
};

std::vector<OneCyclePhase> one_cycle_phases(const SchedulerConfig& config) {
  const double initial_lr = config.max_lr / config.div_factor;
  const double min_lr = initial_lr / config.final_div_factor;
  const double total = static_cast<double>(config.total_steps);
  const double low = config.base_momentum, high = config.max_momentum;
  if (config.three_phase) {
    return {{config.pct_start * total - 1, initial_lr, config.max_lr, high, low},
            {2 * config.pct_start * total - 2, config.max_lr, initial_lr, low, high},
            {total - 1, initial_lr, min_lr, high, high}};
  }
  return {{config.pct_start * total - 1, initial_lr, config.max_lr, high, low},
          {total - 1, config.max_lr, min_lr, low, high}};
}

void validate_one_cycle(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer) {
  require_argument(config.total_steps > 0, name + " schedule needs total_steps > 0, got " + std::to_string(config.total_steps));
  require_argument(config.max_lr > 0, name + " schedule needs max_lr > 0, got " + format_number(config.max_lr));
  require_argument(config.pct_start >= 0 && config.pct_start <= 1,
                   name + " schedule needs pct_start in [0, 1], got " + format_number(config.pct_start));
  require_argument(config.div_factor > 0, name + " schedule needs div_factor > 0, got " + format_number(config.div_factor));
  require_argument(config.final_div_factor > 0,
                   name + " schedule needs final_div_factor > 0, got " + format_number(config.final_div_factor));
  require_argument(config.anneal_strategy == "cos" || config.anneal_strategy == "linear",
                   name + " schedule has an unknown anneal_strategy " + quoted(config.anneal_strategy) +
                       " (known: cos, linear)");
  if (config.cycle_momentum) {
    validate_momentum(optimizer.kind(), config.base_momentum, name + " base_momentum");
    validate_momentum(optimizer.kind(), config.max_momentum, name + " max_momentum");
  }
  // torch divides by each phase's length: an empty first phase raises ZeroDivisionError when the scheduler
  // is made, an empty last one at step total_steps. Both are refused here.
  const auto phases = one_cycle_phases(config);
  const double last_start = phases[phases.size() - 2].end_step;
  require_argument(phases.front().end_step != 0 && phases.back().end_step != last_start,
                   name + " schedule has an empty phase: pct_start * total_steps must be neither 1 nor " +
                       (config.three_phase ? "(total_steps + 1) / 2" : "total_steps") + " (pct_start " +
                       format_number(config.pct_start) + ", total_steps " + std::to_string(config.total_steps) + ")");
}

// torch's OneCycleLR.get_lr: the phase step n falls in (the last one past its end) and the fraction of it
// done, which both the lr and the momentum anneal by.
std::pair<const OneCyclePhase*, double> one_cycle_position(const std::vector<OneCyclePhase>& phases, int64_t step) {
  const auto n = static_cast<double>(step);
  double start_step = 0;
  for (size_t i = 0; i + 1 < phases.size(); ++i) {
    if (n <= phases[i].end_step) return {&phases[i], (n - start_step) / (phases[i].end_step - start_step)};
    start_step = phases[i].end_step;
  }
  const OneCyclePhase& last = phases.back();
  return {&last, (n - start_step) / (last.end_step - start_step)};
}

Schedule one_cycle(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer) {
  validate_one_cycle(name, config, optimizer);
  const auto phases = one_cycle_phases(config);
  const auto anneal = config.anneal_strategy == "cos" ? &formulas::anneal_cos : &formulas::anneal_linear;
  Schedule schedule;
  schedule.lr_at = [=](int64_t step, double, double) {
    const auto [phase, pct] = one_cycle_position(phases, step);
    return anneal(phase->start_lr, phase->end_lr, pct);
  };
  if (config.cycle_momentum) {
    schedule.momentum_at = [=](int64_t step) {
      const auto [phase, pct] = one_cycle_position(phases, step);
      return anneal(phase->start_momentum, phase->end_momentum, pct);
    };
  }
  schedule.base_lr = config.max_lr / config.div_factor;
  schedule.max_steps = config.total_steps;
  return schedule;
}

Schedule reduce_on_plateau(const std::string& name, const SchedulerConfig& config, const Optimizer&) {
  require_argument(config.mode == "min" || config.mode == "max",
                   name + " has an unknown mode " + quoted(config.mode) + " (known: min, max)");
  require_argument(config.threshold_mode == "rel" || config.threshold_mode == "abs",
                   name + " has an unknown threshold_mode " + quoted(config.threshold_mode) + " (known: rel, abs)");
  PlateauConfig plateau;
  plateau.maximize = config.mode == "max";
  plateau.factor = config.factor;
  plateau.patience = config.patience;
  plateau.threshold = config.threshold;
  plateau.relative_threshold = config.threshold_mode == "rel";
  plateau.cooldown = config.cooldown;
  plateau.min_lr = config.min_lr.value_or(0.0);
  plateau.eps = config.eps;
  Schedule schedule;
  schedule.plateau = plateau;
  return schedule;
}

const std::vector<std::pair<std::string, Builder>>& builders() {
  static const std::vector<std::pair<std::string, Builder>> table{
      {"constant", &constant},
      {"constant_with_warmup", &constant_with_warmup},
      {"linear", &linear},
      {"cosine", &cosine},
      {"cosine_with_restarts", &cosine_with_restarts},
      {"polynomial", &polynomial},
      {"inverse_sqrt", &inverse_sqrt},
      {"cosine_with_min_lr", &cosine_with_min_lr},
      {"warmup_stable_decay", &warmup_stable_decay},
      {"step", &step},
      {"multistep", &multistep},
      {"exponential", &exponential},
      {"one_cycle", &one_cycle},
      {"reduce_on_plateau", &reduce_on_plateau},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const auto& entry : builders()) all.push_back(entry.first);
    return all;
  }();
  return names;
}

Schedule named_schedule(const std::string& name, const SchedulerConfig& config, const Optimizer& optimizer) {
  for (const auto& [known, build] : builders()) {
    if (known == name) return build(name, config, optimizer);
  }
  std::string known;
  for (const auto& entry : schedule_names()) known += (known.empty() ? "" : ", ") + entry;
  fail(Code::InvalidArgument, "unknown scheduler '" + name + "' (known: " + known + ")");
}

}  // namespace accel::train
