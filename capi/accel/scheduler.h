/* accel: learning-rate schedulers with Accelerate's semantics: a scheduler steps only after a real
 * optimizer step (not while accumulating, not after a skipped fp16 step), and then once per process
 * unless split_batches, so a schedule sized in single-process steps keeps its place.
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
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name, missing total_steps, ...). */
ACCEL_API ACCEL_NODISCARD int accel_scheduler_new(accel_scheduler_t **out, accel_optimizer_t *optimizer, const char *name,
                                                  const accel_options_t *options);
/* lr of each group = its initial lr * multiplier(step) (torch's LambdaLR); step counts scheduler steps. */
typedef double (*accel_lr_multiplier_fn)(int64_t step, void *payload);
ACCEL_API ACCEL_NODISCARD int accel_scheduler_from_callback(accel_scheduler_t **out, accel_optimizer_t *optimizer,
                                                            accel_lr_multiplier_fn multiplier, void *payload);
ACCEL_API void accel_scheduler_free(accel_scheduler_t *scheduler);
ACCEL_API ACCEL_NODISCARD int accel_scheduler_step(accel_scheduler_t *scheduler);
/* Learning rate of group 0 after the last step. */
ACCEL_API double accel_scheduler_last_lr(const accel_scheduler_t *scheduler);
/* Scheduler steps taken. */
ACCEL_API int64_t accel_scheduler_step_count(const accel_scheduler_t *scheduler);

#ifdef __cplusplus
}
#endif
#endif
