/* accel: a training step as one call: forward, loss, backward, gradient clipping, the optimizer step and
 * zero_grad for a batch, run eagerly or captured once as a CUDA graph and replayed.
 *
 * Eagerly a step makes the calls an Accelerate loop makes, in its order and to the same results:
 *   accel_state_accumulate; accel_model_forward; accel_loss_compute; accel_state_backward;
 *   on a sync step with max_grad_norm > 0, accel_state_clip_grad_norm; accel_optimizer_step;
 *   accel_optimizer_zero_grad.
 * With the option cuda_graph on a CUDA device, the first cuda_graph_warmup steps run eagerly on a side stream,
 * then the whole step (forward, loss, backward, the fp16 scaler's unscale, inf check and scale update,
 * clipping, the optimizer step and zero_grad) is captured as one CUDA graph and replayed for every later
 * batch of the same layout (the inputs' and target's names, shapes and dtypes, and the model's training
 * mode): each batch is copied into the graph's input tensors (from the host without waiting, so pinned
 * memory such as a loader's is copied asynchronously), learning rates a scheduler changed are written to the
 * device, and nothing is read back, so a step does not wait for the GPU. An fp16 overflow skips the
 * optimizer step inside the graph (accel_optimizer_step_was_skipped then reads the flag, waiting for it).
 * Captured and eager steps agree to rounding: the captured optimizer takes the learning rate and Adam's
 * step counts from device memory, which rounds the update -lr * d once more than torch::optim's step does
 * (each weight may differ by one unit in the last place per step), and keeps torch::optim's state, so a
 * checkpoint saved from captured steps resumes eagerly or captured.
 * A step runs eagerly instead, saying why in accel_train_step_eager_reason and once on standard error,
 * when: cuda_graph is off; the device is not CUDA or the library was built without it; there are several
 * processes (the gradient all-reduce is not captured); gradient_accumulation_steps > 1; several optimizers
 * are prepared on the state; the batch's layout is not the captured one (an uneven last batch: a layout
 * that lasts for cuda_graph_warmup + 1 steps in a row is captured in its place); the model cannot be
 * captured (a host synchronisation or data-dependent control flow in forward: then no later step tries);
 * optimizer settings other than the lr changed more than three times (one_cycle cycling momentum).
 *
 * Options: loss ("cross_entropy"; "nll", "mse", "l1", "bce_with_logits": applied to the model's output,
 * a dict's "logits" entry, else its first value, against the target; "output": the model's output is the
 * loss, a dict's "loss" entry, else its first value, and there is no target), reduction ("mean" or
 * "sum"), label_smoothing, ignore_index (as accel_loss_compute), max_grad_norm (0: no clipping), norm_type
 * (2), cuda_graph (false), cuda_graph_warmup (3).
 *
 * Thread safety: one thread at a time per step, and not while another thread trains the same model. */
#ifndef ACCEL_TRAIN_STEP_H
#define ACCEL_TRAIN_STEP_H

#include "accel/common.h"
#include "accel/model.h"
#include "accel/optimizer.h"
#include "accel/options.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_train_step accel_train_step_t;

/* A step training a prepared model with an optimizer made from it (both kept alive by the step).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (model not prepared); ACCEL_ERR_UNSUPPORTED (a
 * model of the caller's tensors, whose forward and backward the step cannot run); ACCEL_ERR_INVALID_ARGUMENT
 * (an optimizer of another model, reduction "none", label_smoothing outside [0, 1] or given to a loss other
 * than cross_entropy, max_grad_norm < 0); ACCEL_ERR_UNKNOWN_OPTION (a key of another object, naming it);
 * ACCEL_ERR_BAD_OPTION_VALUE. Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE;
 * prepared host -> ACCEL_ERR_UNSUPPORTED. */
ACCEL_API ACCEL_NODISCARD int accel_train_step_new(accel_train_step_t **out, accel_model_t *model,
                                                   accel_optimizer_t *optimizer, const accel_options_t *options);
/* Releases the handle. NULL is a no-op. */
ACCEL_API void accel_train_step_free(accel_train_step_t *step);

/* One step on a batch: count positional inputs and named_count named ones (as accel_model_forward; on the
 * host or the device: they are copied to the model's device), and the target (NULL for the loss "output").
 * *loss (may be NULL) receives the loss, a new tensor the next step leaves alone.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (no target for a loss that takes one); those
 * of accel_model_forward, accel_loss_compute and
 * accel_state_backward, before any parameter changes; ACCEL_ERR_INVALID_STATE once the process group is
 * broken; the failure of a background save no call reported yet, before doing anything. */
ACCEL_API ACCEL_NODISCARD int accel_train_step_run(accel_train_step_t *step, accel_tensor_t *const *inputs, size_t count,
                                                   const char *const *names, accel_tensor_t *const *named_inputs,
                                                   size_t named_count, const accel_tensor_t *target,
                                                   accel_tensor_t **loss);

/* Why the last step did not replay a CUDA graph, "" when it did (valid until the next call on the step);
 * NULL for a NULL or dead handle. */
ACCEL_API const char *accel_train_step_eager_reason(const accel_train_step_t *step);

/* A count by name, into *out: "steps" (runs that succeeded; a failed run counts nowhere), "replays" (steps
 * that ran the captured graph, the capturing one included), "captures", "warmup_steps", "eager_steps" (the
 * rest).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (another name; the message lists them). */
ACCEL_API ACCEL_NODISCARD int accel_train_step_stat(const accel_train_step_t *step, const char *name, double *out);

#ifdef __cplusplus
}
#endif
#endif
