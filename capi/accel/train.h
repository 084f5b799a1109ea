/* accel: the training step (Accelerate's accumulate, backward, sync_gradients, clip_grad_*), and losses
 * for callers who cannot express theirs in TorchScript.
 *
 * A step, as in Accelerate:
 *   accel_accumulate(state);                       // decides whether this step synchronises
 *   accel_model_forward(...); loss = ...;
 *   accel_backward(state, loss);                   // loss / gradient_accumulation_steps, fp16 scaling
 *   if (accel_sync_gradients(state)) accel_clip_grad_norm(state, model, 1.0, 2.0, &norm);
 *   accel_optimizer_step(opt); accel_scheduler_step(sched); accel_optimizer_zero_grad(opt);
 * State options: gradient_accumulation_steps (1), sync_with_dataloader (true: the last batch of the
 * active loader always syncs), sync_each_batch (false).
 * Thread safety: one thread at a time per state. */
#ifndef ACCEL_TRAIN_H
#define ACCEL_TRAIN_H

#include "accel/common.h"
#include "accel/model.h"
#include "accel/options.h"
#include "accel/state.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Accelerate's accumulate(model): call once at the start of each step. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_accumulate(accel_state_t *state);
/* 1 when the current step synchronises gradients and steps the optimizer. */
ACCEL_API int accel_sync_gradients(const accel_state_t *state);

/* Backward of loss / gradient_accumulation_steps (scaled under fp16). Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (not a scalar, no graph; a parameter without gradient under data parallelism);
 * collective errors. */
ACCEL_API ACCEL_NODISCARD int accel_backward(accel_state_t *state, const accel_tensor_t *loss);

/* Unscales fp16 gradients first, then clips the model's gradients so that their total norm is at most
 * max_norm; *total_norm (may be NULL) receives the norm before clipping. After accel_backward on a sync
 * step the gradients are already averaged over the ranks, so the norm is the same everywhere.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (max_norm <= 0); ACCEL_ERR_INVALID_STATE
 * (both functions) once the process group is broken, as the gradients may not be averaged. */
ACCEL_API ACCEL_NODISCARD int accel_clip_grad_norm(accel_state_t *state, accel_model_t *model, double max_norm,
                                                   double norm_type, double *total_norm);
ACCEL_API ACCEL_NODISCARD int accel_clip_grad_value(accel_state_t *state, accel_model_t *model, double clip_value);

/* A loss: name "cross_entropy" (input [N, C] logits, int64 target [N]; options label_smoothing,
 * ignore_index), "nll", "mse", "l1" or "bce_with_logits"; option reduction ("mean", "sum", "none").
 * With options NULL the defaults and ACCEL_* environment are read at the first call only.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name; class index out of range);
 * ACCEL_ERR_DTYPE (a target of the wrong type, saying which is expected); ACCEL_ERR_SHAPE_MISMATCH. */
ACCEL_API ACCEL_NODISCARD int accel_loss(const char *name, const accel_tensor_t *input, const accel_tensor_t *target,
                                         const accel_options_t *options, accel_tensor_t **out);

/* Saves the unwrapped model's parameters and buffers into directory/model.safetensors (written to a
 * temporary file, then renamed), on the main process only; the directory is created if missing.
 * Collective (the other ranks wait for the main one). Errors: ACCEL_ERR_NULL_ARGUMENT, ACCEL_ERR_IO. */
ACCEL_API ACCEL_NODISCARD int accel_save_model(accel_state_t *state, const accel_model_t *model, const char *directory);

#ifdef __cplusplus
}
#endif
#endif
