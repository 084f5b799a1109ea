/* accel: optimizers, with Accelerate's semantics: on a step that does not
 * synchronise gradients (accumulation) accel_optimizer_step and accel_optimizer_zero_grad do nothing;
 * under fp16 a step whose gradients overflowed is skipped (accel_optimizer_step_was_skipped) and the
 * scale backs off. A state may have several optimizers (a GAN's generator and discriminator, over two
 * prepared models): under fp16 the grad scaler tracks each apart (its own unscale, inf check and skipped
 * step; every optimizer's step updates the one shared scale, as in Accelerate), and
 * accel_state_clip_grad_norm unscales only the optimizers holding the clipped model's parameters.
 * A scheduler steps only after a real optimizer step, and then once per process
 * unless split_batches (the schedule is sized in single-process steps, as in Accelerate; see
 * accel/scheduler.h).
 *
 * Optimizer options: lr (1e-3), momentum, dampening, nesterov (sgd), weight_decay, beta1 (0.9),
 * beta2 (0.999), eps (1e-8) (adam, adamw), no_decay: comma-separated glob patterns of parameter names
 * (e.g. "*bias,*norm*") put in a second group with weight decay 0.
 *
 * Thread safety: one thread at a time per optimizer and its schedulers. */
#ifndef ACCEL_OPTIMIZER_H
#define ACCEL_OPTIMIZER_H

#include "accel/common.h"
#include "accel/model.h"
#include "accel/options.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_optimizer accel_optimizer_t;

/* An accelerated optimizer of kind "sgd", "adam" or "adamw" over the trainable parameters of a prepared
 * model. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (model not prepared);
 * ACCEL_ERR_INVALID_ARGUMENT (unknown kind, listing the known ones; bad values naming the option);
 * ACCEL_ERR_UNKNOWN_OPTION (a key of another object, naming it).
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_new(accel_optimizer_t **out, accel_model_t *model, const char *kind,
                                                  const accel_options_t *options);
ACCEL_API void accel_optimizer_free(accel_optimizer_t *optimizer);
/* Steps on a sync step (see above). Errors: ACCEL_ERR_NULL_ARGUMENT; collective errors while waiting for
 * the gradient all-reduce; ACCEL_ERR_INVALID_STATE once the process group is broken (the gradients may not
 * be averaged over the processes; the parameters are left unchanged); the failure of a background save no
 * call reported yet, before doing anything (accel/checkpoint.h, accel_state_save_state_async). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_step(accel_optimizer_t *optimizer);
/* Clears the gradients on a sync step. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_zero_grad(accel_optimizer_t *optimizer);
/* 1 when the last sync step was skipped because of an fp16 overflow. */
ACCEL_API int accel_optimizer_step_was_skipped(const accel_optimizer_t *optimizer);
ACCEL_API size_t accel_optimizer_num_groups(const accel_optimizer_t *optimizer);
/* *out receives the learning rate of a parameter group.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_lr(const accel_optimizer_t *optimizer, size_t group, double *out);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group); ACCEL_ERR_INVALID_ARGUMENT (lr < 0,
 * NaN or infinite). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_set_lr(accel_optimizer_t *optimizer, size_t group, double lr);
/* *out receives the momentum of a parameter group: sgd's momentum, or beta1 for adam and adamw (what a
 * one_cycle scheduler cycles, as torch's OneCycleLR does).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_momentum(const accel_optimizer_t *optimizer, size_t group, double *out);
/* *beta1 and *beta2 receive the betas of a parameter group of an adam or adamw optimizer.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no such group); ACCEL_ERR_INVALID_ARGUMENT (an
 * sgd optimizer, which has none). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_betas(const accel_optimizer_t *optimizer, size_t group, double *beta1,
                                                    double *beta2);
/* *out receives the current fp16 loss scale (1 without fp16). Reading it waits for the device.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_TORCH (the device failed). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_loss_scale(const accel_optimizer_t *optimizer, double *out);

#ifdef __cplusplus
}
#endif
#endif
