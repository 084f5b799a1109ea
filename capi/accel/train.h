/* accel: the training step (Accelerate's accumulate, backward, sync_gradients, clip_grad_*) and save_model
 * (its reverse is accel_model_load_weights, in model.h).
 *
 * Every function here acts on the state (the accelerator) and is named accel_state_<verb>.
 * A step, as in Accelerate:
 *   accel_state_accumulate(state);                       // decides whether this step synchronises
 *   accel_model_forward(...); loss = ...;
 *   accel_state_backward(state, loss);                   // loss / gradient_accumulation_steps, fp16 scaling
 *   if (accel_state_sync_gradients(state)) accel_state_clip_grad_norm(state, model, 1.0, 2.0, &norm);
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
ACCEL_API ACCEL_NODISCARD int accel_state_accumulate(accel_state_t *state);
/* 1 when the current step synchronises gradients and steps the optimizer. */
ACCEL_API int accel_state_sync_gradients(const accel_state_t *state);

/* Backward of loss / gradient_accumulation_steps (scaled under fp16). Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (not a scalar, no graph; a parameter without gradient under data parallelism);
 * collective errors. */
ACCEL_API ACCEL_NODISCARD int accel_state_backward(accel_state_t *state, const accel_tensor_t *loss);

/* Unscales fp16 gradients first, then clips the model's gradients so that their total norm is at most
 * max_norm; *total_norm (may be NULL) receives the norm before clipping. After accel_state_backward on a sync
 * step the gradients are already averaged over the ranks, so the norm is the same everywhere.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (max_norm <= 0); ACCEL_ERR_INVALID_STATE once
 * the process group is broken, as the gradients may not be averaged. */
ACCEL_API ACCEL_NODISCARD int accel_state_clip_grad_norm(accel_state_t *state, accel_model_t *model, double max_norm,
                                                         double norm_type, double *total_norm);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (clip_value < 0 or NaN); ACCEL_ERR_INVALID_STATE
 * once the process group is broken. */
ACCEL_API ACCEL_NODISCARD int accel_state_clip_grad_value(accel_state_t *state, accel_model_t *model, double clip_value);

/* Accelerate's save_model: the unwrapped model's parameters and buffers as safetensors in directory
 * (created if missing), written by the main process while the others wait (collective; a failure of the
 * writer fails every rank, with ACCEL_ERR_PEER_FAILED on the others). Up to max_shard_size bytes of
 * tensors (0: Accelerate's default, 10 GB = 10^10 bytes) go into directory/model.safetensors. Above it
 * they are split in order into shards model-00001-of-0000N.safetensors, each filled until the next tensor
 * would exceed max_shard_size (a larger tensor gets a shard to itself), with
 * model.safetensors.index.json: {"metadata": {"total_size": bytes stored}, "weight_map": {name: shard}}.
 * Tied weights (tensors that are the same view of the same memory) are stored once, under the first name
 * in the model's order; the other names are left out of the files, as Accelerate and transformers leave
 * them (accel_model_load_weights fills them through the stored one).
 * Files are written under temporary names, then renamed into place (the index last); model.safetensors,
 * an index or shards left by an earlier save are removed, so the directory never holds two saves mixed
 * (a reader that looks while the new files are renamed, or after a save killed then, finds no model).
 * Other files in directory are kept.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO naming the path; ACCEL_ERR_PEER_FAILED; collective errors. */
ACCEL_API ACCEL_NODISCARD int accel_state_save_model(accel_state_t *state, const accel_model_t *model, const char *directory,
                                                     size_t max_shard_size);

#ifdef __cplusplus
}
#endif
#endif
