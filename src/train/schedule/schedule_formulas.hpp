// The learning-rate curves themselves, as pure functions of the step: the multipliers of transformers'
// schedules (transformers/optimization.py, applied to each group's initial lr as LambdaLR does) and the
// annealing of torch's OneCycleLR. Each is written with the operations of the Python, in its order, so
// that the doubles agree with it and not only the curves.
#pragma once

#include <cstdint>

namespace accel::train::formulas {

// step / max(1, warmup_steps): the linear warmup every transformers schedule starts with.
double warmup_fraction(int64_t step, int64_t warmup_steps);

// get_constant_schedule_with_warmup: the warmup, then 1.
double constant_with_warmup(int64_t step, int64_t warmup_steps);

// get_linear_schedule_with_warmup: the warmup, then down to 0 at total_steps, 0 after.
double linear_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps);

// get_cosine_schedule_with_warmup (min_lr_rate 0) and get_cosine_with_min_lr_schedule_with_warmup: the
// warmup, then num_cycles cosine waves over the remaining steps, squeezed into [min_lr_rate, 1].
double cosine_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps, double num_cycles,
                          double min_lr_rate);

// get_cosine_with_hard_restarts_schedule_with_warmup: the warmup, then num_cycles half-cosines from 1 to 0,
// each starting again at 1; 0 from total_steps on.
double cosine_with_hard_restarts(int64_t step, int64_t warmup_steps, int64_t total_steps, double num_cycles);

// get_polynomial_decay_schedule_with_warmup: the warmup, then from lr_init down to lr_end along
// (1 - progress)^power, divided by lr_init (the optimizer's lr, which LambdaLR multiplies back);
// lr_end / lr_init after total_steps. total_steps == warmup_steps divides by zero at that step, as in
// transformers: callers refuse it.
double polynomial_decay_with_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps, double lr_init,
                                    double lr_end, double power);

// get_inverse_sqrt_schedule: the warmup, then 1 / sqrt((step + timescale - warmup_steps) / timescale).
double inverse_sqrt(int64_t step, int64_t warmup_steps, int64_t timescale);

// The curve of a warmup or a decay phase of get_wsd_schedule, as progress goes from 0 to 1.
enum class Ramp { Linear, Cosine, OneMinusSqrt };

// get_wsd_schedule: warm up from min_lr_ratio to 1, hold 1 for stable_steps, decay to min_lr_ratio over
// decay_steps, then stay at min_lr_ratio.
struct WarmupStableDecay {
  int64_t warmup_steps = 0;
  int64_t stable_steps = 0;
  int64_t decay_steps = 0;
  Ramp warmup = Ramp::Linear;
  Ramp decay = Ramp::Cosine;
  double min_lr_ratio = 0;
  double num_cycles = 0.5;  // of the cosine decay
};
double warmup_stable_decay(int64_t step, const WarmupStableDecay& shape);

// OneCycleLR._annealing_cos and _annealing_linear: from start (pct 0) to end (pct 1).
double anneal_cos(double start, double end, double pct);
double anneal_linear(double start, double end, double pct);

}  // namespace accel::train::formulas
