/* accel: learning-rate schedulers with Accelerate's semantics: a scheduler steps only after a real
 * optimizer step (not while accumulating, not after a skipped fp16 step), and then once per process
 * unless the scheduler's split_batches option is set (set it as on the loaders: the schedule then counts
 * global batches), so a schedule sized in single-process steps keeps its place. With the state setting
 * step_scheduler_with_optimizer off, every accel_scheduler_step is one step, whatever the optimizer did.
 *
 * A scheduler counts steps n (torch's last_epoch): n = 0 when it is made, which sets each group's lr for
 * step 0 (as torch's schedulers do), n + 1 after each step. "initial lr" is the lr the optimizer was made
 * with. The schedules, by name, and the options each reads (defaults in brackets):
 *
 * transformers' schedules (transformers/optimization.py), lr = initial lr * multiplier(n); their warmup
 * is n / warmup_steps for n < warmup_steps:
 *   "constant"              the initial lr
 *   "constant_with_warmup"  warmup_steps [0], then 1
 *   "linear"                warmup_steps [0], then down to 0 at total_steps (must be set, > 0)
 *   "cosine"                warmup_steps, total_steps, num_cycles [0.5]: cosine waves from 1 to 0
 *   "cosine_with_restarts"  warmup_steps, total_steps, num_cycles [1]: num_cycles half cosines from 1 to 0,
 *                           each starting again at 1; 0 from total_steps on
 *   "polynomial"            warmup_steps, total_steps (!= warmup_steps), power [1], lr_end [1e-7]: from
 *                           the initial lr down to lr_end along (1 - progress)^power; lr_end after
 *                           total_steps. lr_end must be below the initial lr; power >= 0
 *   "inverse_sqrt"          warmup_steps, timescale [warmup_steps, or 10000 without warmup]:
 *                           1 / sqrt((n + timescale - warmup_steps) / timescale)
 *   "cosine_with_min_lr"    as "cosine", squeezed into [min_lr_rate, 1]; give min_lr_rate, or min_lr
 *                           (an lr: min_lr_rate = min_lr / initial lr), exactly one of them
 *   "warmup_stable_decay"   warmup_steps, num_stable_steps [total_steps - warmup_steps - num_decay_steps],
 *                           num_decay_steps [0], min_lr_ratio [0], warmup_type and decay_type ["linear",
 *                           "cosine" (default for decay_type) or "1-sqrt"], num_cycles [0.5, of a cosine
 *                           decay]: warm up from min_lr_ratio to 1, hold, decay to min_lr_ratio, stay there
 * torch's schedulers (torch.optim.lr_scheduler, torch 1.13):
 *   "step"                  step_size [1, > 0], gamma [0.1]: the lr times gamma every step_size steps
 *   "multistep"             milestones (steps separated by commas, e.g. "30,80"; required), gamma: the lr
 *                           times gamma at each milestone (a repeated one: gamma per repetition)
 *   "exponential"           gamma: the lr times gamma at every step
 *                           (these three multiply the lr the group has, so a change made to it carries on)
 *   "one_cycle"             max_lr (must be set, > 0), total_steps, pct_start [0.3], anneal_strategy
 *                           ["cos" or "linear"], div_factor [25], final_div_factor [1e4], three_phase [0],
 *                           cycle_momentum [1], base_momentum [0.85], max_momentum [0.95]: the lr goes from
 *                           max_lr / div_factor up to max_lr and down to that / final_div_factor (three_phase:
 *                           back to max_lr / div_factor first); it may step total_steps times. With
 *                           cycle_momentum the momentum (sgd) or beta1 (adam, adamw) moves the other way,
 *                           between max_momentum and base_momentum, and is set to max_momentum when the
 *                           scheduler is made (read it with accel_optimizer_momentum)
 *   "reduce_on_plateau"     stepped with accel_scheduler_step_with_metric. mode ["min" or "max"], factor
 *                           [0.1, < 1], patience [10], threshold [1e-4], threshold_mode ["rel" or "abs"],
 *                           cooldown [0], min_lr [0], eps [1e-8, > 0]: once the metric has not improved on
 *                           the best one by threshold (rel: best * (1 -/+ threshold); abs: best -/+
 *                           threshold) for more than patience steps, each lr becomes max(lr * factor, min_lr)
 *                           unless that lowers it by eps or less; then cooldown steps are not counted.
 *                           Making it changes nothing
 * or a callback (accel_scheduler_from_callback).
 * Other option: split_batches [0] (see above).
 *
 * Where accel differs: options are single numbers, so every group gets the same max_lr, momentums and
 * min_lr (torch also takes one per group), and one_cycle takes total_steps only (not epochs and
 * steps_per_epoch). one_cycle refuses, when it is made, a last phase of no length (pct_start 1, or
 * three_phase with pct_start * total_steps = (total_steps + 1) / 2), where torch raises at step
 * total_steps; polynomial refuses total_steps == warmup_steps and a negative power, where Python divides
 * by zero at that step; one_cycle refuses base_momentum and max_momentum the optimizer would refuse as its
 * momentum (below 0; for adam and adamw, not below 1); reduce_on_plateau's eps must be > 0 (the key is
 * shared with the optimizer's). Otherwise the lrs are torch's, even where torch's are odd: one_cycle's
 * step total_steps goes past the end of its last phase, so with anneal_strategy "linear" the lr there is
 * negative and the momentum beyond max_momentum, as in torch (Accelerate's rule allows that step).
 *
 * Thread safety: one thread at a time per optimizer and its schedulers. */
#ifndef ACCEL_SCHEDULER_H
#define ACCEL_SCHEDULER_H

#include "accel/common.h"
#include "accel/optimizer.h"
#include "accel/options.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_scheduler accel_scheduler_t;

/* A scheduler driving the optimizer's learning rates (and, for one_cycle, momentums); it keeps the
 * optimizer alive. options may be NULL (the defaults); the caller keeps ownership of it.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name, listing the known ones; a
 * missing or refused setting, naming it; the optimizer is then untouched); ACCEL_ERR_UNKNOWN_OPTION (a key
 * of another object); ACCEL_ERR_BAD_OPTION_VALUE (a value of the wrong type, not among a key's choices, or
 * milestones that are not integers separated by commas). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_new(accel_scheduler_t **out, accel_optimizer_t *optimizer, const char *name,
                                                  const accel_options_t *options);
/* lr of each group = its initial lr * multiplier(step) (torch's LambdaLR); step counts scheduler steps.
 * The callback writes the multiplier to *multiplier and returns 0; any other return (or a multiplier that
 * is negative or not finite) makes the call that ran it (accel_scheduler_from_callback for step 0,
 * accel_scheduler_step afterwards) fail with ACCEL_ERR_CALLBACK, the learning rates unchanged. It runs on
 * the thread that made that call. payload is passed back untouched and must stay valid until the
 * scheduler is freed (accel never frees it). */
typedef int (*accel_lr_multiplier_fn)(int64_t step, double *multiplier, void *payload);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_CALLBACK (the callback failed for step 0). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_from_callback(accel_scheduler_t **out, accel_optimizer_t *optimizer,
                                                            accel_lr_multiplier_fn multiplier, void *payload);
ACCEL_API void accel_scheduler_free(accel_scheduler_t *scheduler);
/* Accelerate's AcceleratedScheduler.step (see above). Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_CALLBACK;
 * ACCEL_ERR_INVALID_STATE (a schedule stepped past total_steps where torch refuses: one_cycle with
 * split_batches); ACCEL_ERR_INVALID_ARGUMENT (reduce_on_plateau, which steps with a metric). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_step(accel_scheduler_t *scheduler);
/* Accelerate's AcceleratedScheduler.step(metric) for "reduce_on_plateau" (torch's
 * ReduceLROnPlateau.step(metric), e.g. a validation loss): by the rule above, nothing unless the optimizer
 * really stepped, then one step with split_batches or one per process without, each with this metric, so
 * without split_batches patience and cooldown count num_processes steps per call, as in Accelerate. Pass
 * the same metric on every process (accel_state_reduce it first). A NaN metric counts as no improvement.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (a schedule that takes no metric). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_step_with_metric(accel_scheduler_t *scheduler, double metric);
/* *out receives the learning rate of parameter group `group` after the last step (torch's get_last_lr;
 * for reduce_on_plateau, the lr when it was made until its first step).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_last_lr(const accel_scheduler_t *scheduler, size_t group, double *out);
/* Scheduler steps taken (torch's last_epoch; each of the num_processes steps of one accel_scheduler_step
 * counts); 0 for NULL. */
ACCEL_API int64_t accel_scheduler_step_count(const accel_scheduler_t *scheduler);

#ifdef __cplusplus
}
#endif
#endif
