#include "train/schedule/plateau.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "core/options.hpp"

namespace accel::train {

Plateau::Plateau(const PlateauConfig& config) : config_(config) {
  require_argument(config.factor < 1.0,
                   "reduce_on_plateau needs factor < 1, got " + format_number(config.factor));
  const double worst = std::numeric_limits<double>::infinity();
  counters_.best = config.maximize ? -worst : worst;
}

bool Plateau::is_better(double metric) const {
  const double best = counters_.best;
  if (!config_.maximize && config_.relative_threshold) return metric < best * (1. - config_.threshold);
  if (!config_.maximize) return metric < best - config_.threshold;
  if (config_.relative_threshold) return metric > best * (config_.threshold + 1.);
  return metric > best + config_.threshold;
}

bool Plateau::record(double metric) {
  if (is_better(metric)) {
    counters_.best = metric;
    counters_.num_bad_epochs = 0;
  } else {
    ++counters_.num_bad_epochs;
  }
  if (counters_.cooldown_counter > 0) {
    --counters_.cooldown_counter;
    counters_.num_bad_epochs = 0;  // bad steps during the cooldown do not count
  }
  if (counters_.num_bad_epochs <= config_.patience) return false;
  counters_.cooldown_counter = config_.cooldown;
  counters_.num_bad_epochs = 0;
  return true;
}

double Plateau::reduced(double lr) const {
  const double lowered = std::max(lr * config_.factor, config_.min_lr);
  return lr - lowered > config_.eps ? lowered : lr;
}

}  // namespace accel::train
