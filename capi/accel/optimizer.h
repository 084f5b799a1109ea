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

/* The caller's own optimizer steps (torch's, in Python), called back with payload by accel_optimizer_step
 * on a sync step; a non-zero return fails that call with ACCEL_ERR_CALLBACK. */
typedef int (*accel_external_step_fn)(void *payload);
/* An accelerated optimizer over the trainable parameters of a prepared model whose steps the caller's own
 * optimizer takes: accel_optimizer_step runs `step` (on sync steps; under fp16 unless the gradients
 * overflowed, after unscaling them), which must update exactly the elements accel_optimizer_piece lists
 * (every trainable element without zero_stage; this process's share under zero_stage 1, 2 or 3, so that
 * the caller's optimizer keeps the state of that share only); under zero_stage 1 or 2 every process's
 * updated elements are then gathered to every process (under 3 the caller's next use of a unit gathers it;
 * the caller steps accel_optimizer_piece_tensors' values there). Clipping (accel_state_clip_grad_norm) and the fp16 scaler
 * treat its parameters as an accel optimizer's, so that under zero_stage 2 the norm is shared. It keeps no
 * state: checkpoint the caller's optimizer (passing this one to accel_state_save_state or load_state is
 * ACCEL_ERR_UNSUPPORTED), as is a CUDA-graph step over it. `step` is called on the thread of
 * accel_optimizer_step; payload is the caller's, kept until the optimizer is freed.
 * The model must be one of the caller's tensors (accel_model_from_tensors): the caller steps its own
 * tensors, reading each gradient where its tensors hold it (averaged there for the listed elements).
 * Errors: ACCEL_ERR_NULL_ARGUMENT (out, model, step); ACCEL_ERR_INVALID_STATE (model not prepared);
 * ACCEL_ERR_INVALID_ARGUMENT (a TorchScript model, whose tensors are accel's).
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE; prepared torchscript ->
 * ACCEL_ERR_INVALID_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_new_external(accel_optimizer_t **out, accel_model_t *model,
                                                           accel_external_step_fn step, void *payload);
/* How many runs of elements this process steps: accel_optimizer_piece's count. 0 for NULL. */
ACCEL_API size_t accel_optimizer_num_pieces(const accel_optimizer_t *optimizer);
/* Run `index` of the elements this process steps: the parameter's name (owned by the optimizer, valid
 * while it lives) and [*begin, *begin + *numel) of its flattened elements. Runs come parameter by
 * parameter, a parameter at most once; one this process steps none of is absent.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (index >= accel_optimizer_num_pieces). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_piece(const accel_optimizer_t *optimizer, size_t index, const char **name,
                                                    int64_t *begin, int64_t *numel);
/* Run `index`'s memory: *value a new handle on its elements as a 1-d tensor (a view of the parameter under
 * zero_stage 1 and 2; under zero_stage 3 of this process's share of the parameter, the only memory of its
 * values between the caller's uses; the parameter itself without ZeRO; with zero_cpu_offload under zero_stage
 * 1 and 2, and on one process, a host copy of the elements, which the library fills from the parameter before
 * the step callback and writes back after it), and *grad a new handle on its gradient during a call of the
 * step callback (NULL when it has none, and outside the callback under ZeRO; offloaded, a host copy).
 * What a caller's optimizer steps under zero_stage 3, whose parameters hold no values between uses, and
 * offloaded, where the parameters are not what the optimizer steps.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (index >= accel_optimizer_num_pieces). */
ACCEL_API ACCEL_NODISCARD int accel_optimizer_piece_tensors(const accel_optimizer_t *optimizer, size_t index,
                                                            accel_tensor_t **value, accel_tensor_t **grad);
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
