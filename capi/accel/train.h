/* accel: the training step (Accelerate's accumulate, backward, sync_gradients, no_sync, autocast,
 * clip_grad_*, free_memory) and save_model (its reverse is accel_model_load_weights, in model.h).
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
/* This handle's gradient_accumulation_steps (its options and ACCEL_GRADIENT_ACCUMULATION_STEPS resolved, or
 * what accel_state_set_gradient_accumulation_steps set): the N that accel_state_backward divides by. Each
 * state handle has its own, as a later Accelerate Accelerator sets its own. Never fails, thread-safe; 0 for
 * a NULL or dead handle. */
ACCEL_API int64_t accel_state_gradient_accumulation_steps(const accel_state_t *state);
/* Accelerate's `accelerator.gradient_accumulation_steps = steps`: this handle's accumulation from the next
 * accel_state_accumulate on. Not thread-safe with a step of the same handle in flight.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (steps < 1). */
ACCEL_API ACCEL_NODISCARD int accel_state_set_gradient_accumulation_steps(accel_state_t *state, int64_t steps);
/* Accelerate's `accelerator.sync_gradients = value`: whether the current step synchronises (sync != 0)
 * until the next accel_state_accumulate decides again; the process's flag, which every handle of the state
 * reads. Thread-safe. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_set_sync_gradients(accel_state_t *state, int sync);

/* Backward of loss / gradient_accumulation_steps (scaled under fp16). Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (not a scalar, no graph; a parameter without gradient under data parallelism);
 * collective errors; the failure of a background save no call reported yet, before doing anything
 * (accel/checkpoint.h, accel_state_save_state_async). */
ACCEL_API ACCEL_NODISCARD int accel_state_backward(accel_state_t *state, const accel_tensor_t *loss);

/* Backward normalised by item count, for losses over a varying number of items (tokens): loss is summed
 * over this micro-batch's items (accel_loss_compute with reduction "sum"; ignored labels count as no
 * item), and num_items is the number of items in the whole accumulated global batch, every micro-batch of
 * this optimizer step on every rank (count them with accel_state_reduce "sum" before the first
 * micro-batch). The backward is of loss * num_processes / num_items, without the division by
 * gradient_accumulation_steps, so that after the all-reduce's average the gradient equals that of the mean
 * loss over the full batch, however unevenly the items fall between micro-batches and ranks (with
 * accel_state_backward each micro-batch's mean would weigh the same). Scaled under fp16, synchronised like
 * accel_state_backward. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (num_items 0, and as
 * accel_state_backward); collective errors; a background save's failure, as accel_state_backward. */
ACCEL_API ACCEL_NODISCARD int accel_state_backward_with_items(accel_state_t *state, const accel_tensor_t *loss,
                                                              size_t num_items);

/* Accelerate's no_sync(model) as a scope: the backward of every forward of model run between begin and
 * end only accumulates gradients on this process (no all-reduce), whatever accel_state_sync_gradients
 * says; the first synchronising backward after end averages the sum over the ranks. With one process it
 * changes nothing. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (model not prepared with
 * state); ACCEL_ERR_INVALID_STATE (begin while in the scope, end outside it).
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_no_sync_begin(accel_state_t *state, accel_model_t *model);
/* Errors: as accel_state_no_sync_begin.
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_no_sync_end(accel_state_t *state, accel_model_t *model);

/* Accelerate's autocast() as a scope, for code outside a prepared model's forward (which always runs
 * under the state's mixed precision): LibTorch operations of the calling thread between begin and end run
 * under autocast to bf16 (CPU or CUDA) or fp16 (CUDA; nothing on the CPU, where fp16 is the grad scaler
 * alone), e.g. a loss computed with accel_loss_compute or in C++ code. Scopes nest; end closes the
 * innermost one the calling thread opened, restoring what was in effect before it. Thread safety: the
 * scope belongs to the calling thread. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (end
 * without begin on this thread). */
ACCEL_API ACCEL_NODISCARD int accel_state_autocast_begin(accel_state_t *state);
/* Errors: as accel_state_autocast_begin. */
ACCEL_API ACCEL_NODISCARD int accel_state_autocast_end(accel_state_t *state);

/* Accelerate's free_memory, for what the state itself holds (models, optimizers, schedulers and loaders
 * are the caller's handles, released with their *_free): the accumulation counter restarts
 * (accel_state_sync_gradients is 1 again), loaders in the middle of an epoch are no longer tracked (so
 * accel_state_gather_for_metrics trims nothing until a loader starts its next epoch), the objects registered
 * for checkpointing (accel_state_register_for_checkpointing) are forgotten, so that objects made afresh
 * to resume into register under the same names again, and CUDA's caching allocator returns its unused
 * blocks. Not collective. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_free_memory(accel_state_t *state);

/* The fp16 grad scaler for gradients whose optimizer is not accel's (a model of the caller's tensors trained
 * by its runtime's own optimizer; accel's optimizers do this themselves):
 * accel_state_grad_scale: *out, a new handle on the loss scale as a 0-dim float32 tensor on the state's
 * device, to multiply the loss by before the caller's backward (the same memory every call: the update
 * changes it in place; 1 without fp16 loss scaling).
 * accel_state_unscale_gradients: divides the model's gradients by the scale and sets *found_inf to 1 when
 * any holds inf or NaN (reading the device, as torch's GradScaler does); call it once per optimizer step,
 * before clipping. Without fp16 loss scaling nothing changes and *found_inf is 0.
 * accel_state_update_grad_scale: the scale's growth / backoff rule after an optimizer step that was taken
 * (found_inf 0) or skipped (1), as GradScaler.update. Without fp16 loss scaling, nothing.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_DTYPE (fp16 gradients, torch's "Attempting to unscale FP16
 * gradients."); ACCEL_ERR_INVALID_STATE (update before any scale). */
ACCEL_API ACCEL_NODISCARD int accel_state_grad_scale(accel_state_t *state, accel_tensor_t **out);
ACCEL_API ACCEL_NODISCARD int accel_state_unscale_gradients(accel_state_t *state, accel_model_t *model, int *found_inf);
ACCEL_API ACCEL_NODISCARD int accel_state_update_grad_scale(accel_state_t *state, int found_inf);

/* Unscales fp16 gradients first (those of the optimizers over the model's parameters, each once per step;
 * Accelerate unscales every optimizer, so a GAN clipping its discriminator would unscale the generator's
 * gradients before its backward), then clips the model's gradients so that their total norm is at most
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
