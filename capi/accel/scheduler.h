/* accel: learning-rate schedulers with Accelerate's semantics: a scheduler steps only after a real
 * optimizer step (not while accumulating, not after a skipped fp16 step), and then once per process
 * unless the scheduler's split_batches option is set (set it as on the loaders: the schedule then counts
 * global batches), so a schedule sized in single-process steps keeps its place.
 *
 * Names and options: "constant"; "linear" and "cosine" (warmup_steps, total_steps; num_cycles for
 * cosine: the Hugging Face schedules with warmup); "step" (step_size, gamma); "exponential" (gamma);
 * "one_cycle" (max_lr, total_steps, pct_start, div_factor, final_div_factor); or a callback
 * (accel_scheduler_from_callback).
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

/* A scheduler  driving the optimizer's learning rates; it keeps the optimizer alive.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name, missing total_steps, ...);
 * ACCEL_ERR_UNKNOWN_OPTION (a key of another object); ACCEL_ERR_BAD_OPTION_VALUE. */
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
 * ACCEL_ERR_INVALID_ARGUMENT (a schedule stepped past total_steps where torch refuses, e.g. one_cycle). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_step(accel_scheduler_t *scheduler);
/* *out receives the learning rate of parameter group `group` after the last step (torch's get_last_lr).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_last_lr(const accel_scheduler_t *scheduler, size_t group, double *out);
/* Scheduler steps taken; 0 for NULL. */
ACCEL_API int64_t accel_scheduler_step_count(const accel_scheduler_t *scheduler);

#ifdef __cplusplus
}
#endif
#endif
