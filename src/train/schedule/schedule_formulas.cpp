#include "train/schedule/schedule_formulas.hpp"

#include <algorithm>
#include <cmath>

namespace accel::train::formulas {
namespace {

constexpr double kPi = 3.141592653589793;  // math.pi

double to_double(int64_t value) { return static_cast<double>(value); }

// Python's x % 1.0, whose result takes the divisor's sign (std::fmod keeps the dividend's).
double python_remainder_of_one(double x) {
  const double remainder = std::fmod(x, 1.0);
  return remainder < 0 ? remainder + 1.0 : remainder;
}

double ramp_up(Ramp ramp, double progress) {
  if (ramp == Ramp::Linear) return progress;
  if (ramp == Ramp::Cosine) return 0.5 * (1.0 - std::cos(kPi * progress));
  return 1.0 - std::sqrt(1.0 - progress);
}

double ramp_down(Ramp ramp, double progress, double num_cycles) {
  if (ramp == Ramp::Linear) return 1.0 - progress;
  if (ramp == Ramp::Cosine) return 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress));
  return 1.0 - std::sqrt(progress);
}

}  // namespace

double warmup_fraction(int64_t step, int64_t warmup_steps) {
  return to_double(step) / to_double(std::max<int64_t>(1, warmup_steps));
}

double constant_with_warmup(int64_t step, int64_t warmup_steps) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  return 1.0;
}

double linear_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  return std::max(0.0, to_double(total_steps - step) / to_double(std::max<int64_t>(1, total_steps - warmup_steps)));
}

double cosine_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps, double num_cycles,
                          double min_lr_rate) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  const double progress =
      to_double(step - warmup_steps) / to_double(std::max<int64_t>(1, total_steps - warmup_steps));
  double factor = 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress));
  factor = factor * (1 - min_lr_rate) + min_lr_rate;
  return std::max(0.0, factor);
}

double cosine_with_hard_restarts(int64_t step, int64_t warmup_steps, int64_t total_steps, double num_cycles) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  const double progress =
      to_double(step - warmup_steps) / to_double(std::max<int64_t>(1, total_steps - warmup_steps));
  if (progress >= 1.0) return 0.0;
  return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * python_remainder_of_one(num_cycles * progress))));
}

double polynomial_decay_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps, double lr_init,
                                    double lr_end, double power) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  if (step > total_steps) return lr_end / lr_init;
  const double lr_range = lr_init - lr_end;
  const int64_t decay_steps = total_steps - warmup_steps;
  const double pct_remaining = 1 - to_double(step - warmup_steps) / to_double(decay_steps);
  const double decay = lr_range * std::pow(pct_remaining, power) + lr_end;
  return decay / lr_init;
}

double inverse_sqrt(int64_t step, int64_t warmup_steps, int64_t timescale) {
  if (step < warmup_steps) return warmup_fraction(step, warmup_steps);
  const int64_t shift = timescale - warmup_steps;
  return 1.0 / std::sqrt(to_double(step + shift) / to_double(timescale));
}

double warmup_stable_decay(int64_t step, const WarmupStableDecay& shape) {
  if (step < shape.warmup_steps) {
    const double factor = ramp_up(shape.warmup, warmup_fraction(step, shape.warmup_steps));
    return std::max(0.0, factor * (1.0 - shape.min_lr_ratio) + shape.min_lr_ratio);
  }
  if (step < shape.warmup_steps + shape.stable_steps) return 1.0;
  if (step < shape.warmup_steps + shape.stable_steps + shape.decay_steps) {
    const double progress = to_double(step - shape.warmup_steps - shape.stable_steps) /
                            to_double(std::max<int64_t>(1, shape.decay_steps));
    const double factor = ramp_down(shape.decay, progress, shape.num_cycles);
    return std::max(0.0, factor * (1.0 - shape.min_lr_ratio) + shape.min_lr_ratio);
  }
  return shape.min_lr_ratio;
}

double anneal_cos(double start, double end, double pct) {
  const double cos_out = std::cos(kPi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

double anneal_linear(double start, double end, double pct) { return (end - start) * pct + start; }

}  // namespace accel::train::formulas
