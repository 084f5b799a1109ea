/* accel: models (TorchScript modules) and prepare(model): device placement, rank 0's weights on every
 * rank, data-parallel gradient synchronisation overlapped with backward, and forward under the state's
 * mixed precision.
 *
 * Data parallelism: gradients are grouped in buckets (parameters in reverse order of registration; the
 * first bucket about first_bucket_mb, the others about bucket_cap_mb) and each bucket's all-reduce
 * starts as soon as its last gradient is accumulated, so communication overlaps the rest of backward.
 * When accel_state_backward returns on a sync step, every gradient holds the average over the ranks; while
 * accumulating (accel_state_accumulate said not to sync) no all-reduce happens. A trainable parameter that
 * receives no gradient is an error naming it, unless find_unused_parameters is set; then, as in DDP, one
 * that no rank's backward reached keeps its gradient as it was (none after accel_optimizer_zero_grad, so
 * the optimizer leaves it alone), and one that some ranks used gets the average with the others' zeros.
 * Options read by accel_state_prepare_model (DDP's arguments): find_unused_parameters (false),
 * bucket_cap_mb (25), first_bucket_mb (1), broadcast_buffers (true: rank 0's buffers are sent to the others
 * before a forward when the forward before it synchronised, as in DDP 1.13: the first micro-step of each
 * accumulation window, never later inside no_sync, and the first accel_model_evaluate after training, which
 * is then collective; the next training forward sends none), convert_outputs_to_fp32 (true: fp16/bf16 outputs of an autocast forward come back as
 * fp32), gradient_as_bucket_view (false: true makes each averaged gradient a view into its bucket, so it is
 * not copied back and later micro-batches accumulate in the bucket itself), static_graph (false: true
 * allows parameters without gradient as long as they are the same ones in every backward, as torch's
 * static graph does; a backward whose set differs from the first one's is ACCEL_ERR_INVALID_ARGUMENT
 * naming both), grad_compression ("no"; "bf16" or "fp16": DDP's bf16_compress_hook / fp16_compress_hook,
 * Accelerate's DistributedDataParallelKwargs(comm_hook=...): each fp32 bucket, divided by the number of
 * processes, is cast to 16 bits, all-reduced in them (half the bytes) and cast back. Each averaged gradient
 * element then differs from the fp32 average by at most n * u * mean_r |g_r| (n processes, g_r rank r's
 * gradient, u = 2^-8 for bf16 and 2^-11 for fp16), a relative 2^-7 for bf16 on 2 processes where the ranks'
 * gradients agree in sign; fp16 also loses gradients below 2^-14 in magnitude to its subnormals (up to
 * 2^-25 more per element and rounding) and turns those above 65504 into inf. Another value is
 * ACCEL_ERR_BAD_OPTION_VALUE; "bf16" where the all-reduces go through LibTorch 1.13's Gloo, which has no
 * bfloat16 sum, is ACCEL_ERR_UNSUPPORTED from accel_state_prepare_model: the shared-memory transport of
 * ranks on one host carries it), zero_stage (0; DeepSpeed's ZeRO stages, Accelerate's
 * DeepSpeedPlugin(zero_stage=...), for a model stepped by an accel optimizer (accel's own kinds, or the
 * caller's own optimizer through accel_optimizer_new_external): 1 gives each process the optimizer
 * state of, and the step of, only its share of the parameters' elements (each gradient bucket cut into
 * equal chunks, so a large parameter is owned in pieces by consecutive processes), the updated elements then
 * gathered to every process; 2 also reduce-scatters the gradient buckets, so a process holds only its own
 * elements' averaged gradients (a parameter it owns whole keeps its gradient, one it owns in part has none,
 * its piece being held for the optimizer, the others' are dropped; a model of the caller's tensors keeps its
 * gradient storage, unaveraged outside its share); 3 also holds each trainable parameter as each process's
 * share, gathered by the caller around its use for a model of the caller's tensors (accel_model_set_units
 * below), and for a TorchScript model by accel: a copy of its forward's graph runs with accel's calls around
 * each submodule it calls once in its own block (a chain such as nn.Sequential's, residual connections,
 * nn.ModuleList's items), whose units are gathered around its forward and again around its backward; the
 * units of what the forward uses otherwise (the root's own parameters, a submodule called twice or in a branch,
 * a parameter read outside its submodule's forward or tied across two) are held from the forward's start,
 * every unit when the forward passes self on (the root's own methods it calls are inlined); each unit (by default each submodule cut
 * around, the other parameters by top-level child, the model's own one more) freed in backward once its
 * gradients are reduced. All take the same steps as 0, bit for bit, clipping (the norm
 * is shared) and the fp16 scaler (an overflow anywhere skips every process's step) included; checkpoints
 * hold each process's share of the optimizer state, read back whole, so any stage and number of processes
 * resumes them. Another value is ACCEL_ERR_BAD_OPTION_VALUE; 2 with find_unused_parameters, static_graph,
 * grad_compression or gradient_as_bucket_view is ACCEL_ERR_UNSUPPORTED from accel_state_prepare_model, as
 * is a CUDA-graph step (accel_train_step_new with cuda_graph) of such a model; a model of the caller's
 * tensors under 1, 2 or 3 whose backward ends (accel_model_end_backward) without an accel optimizer made over
 * it (accel_optimizer_new, or accel_optimizer_new_external for the caller's own) is ACCEL_ERR_UNSUPPORTED, as is accel_optimizer_new over such a model with a non-contiguous parameter
 * (its pieces are views of its memory). On one process the option changes nothing, but with zero_cpu_offload
 * (options.h: the optimizer's state and step in host memory, and under 3 the shares too), which on one process
 * moves the optimizer as under 1, and under 3 holds the model in its units' host shares, each unit copied to
 * the device for its use, as with several processes: a model larger than the device trains on one).
 * The model is always moved to the state's device (Accelerate's device_placement applies to loaders
 * here): its buckets and autocast are the device's.
 *
 * Thread safety: a model is used by one thread at a time; accel_model_grad_sync_stat may be called from any. */
#ifndef ACCEL_MODEL_H
#define ACCEL_MODEL_H

#include "accel/common.h"
#include "accel/options.h"
#include "accel/state.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_model accel_model_t;
typedef struct accel_output accel_output_t;

/* Loads a TorchScript model (torch.jit.save's default, zip format) from a file or from memory, on the CPU,
 * not prepared. Every record LibTorch reads unchecked is checked first, so a damaged file is refused.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO (cannot open the file); ACCEL_ERR_INVALID_ARGUMENT (not a
 * TorchScript archive, or the mobile flatbuffer format, which LibTorch 1.13 reads unverified; the message
 * says why). */
ACCEL_API ACCEL_NODISCARD int accel_model_load(accel_model_t **out, const char *path);
/* Errors: as accel_model_load, without ACCEL_ERR_IO. */
ACCEL_API ACCEL_NODISCARD int accel_model_load_buffer(accel_model_t **out, const void *data, size_t size);
/* A model whose tensors live in the caller's runtime (an eager PyTorch nn.Module, a LibTorch C++ module,
 * arrays of Rust or Julia): count parameters named names[i] (trainable[i] 0 for a frozen one, as
 * requires_grad False; trainable NULL: all trainable) and buffer_count buffers, typically
 * accel_tensor_from_dlpack of the caller's memory. The memory stays the caller's: shared, never copied, kept
 * alive by the model. Its forward and backward run in the caller's runtime, which tells the model about
 * them (accel_model_begin_forward, accel_model_grad_ready, accel_model_end_backward); accel_model_forward
 * refuses it (ACCEL_ERR_UNSUPPORTED). accel_state_prepare_model on it: the tensors must already be on the
 * state's device (ACCEL_ERR_INVALID_ARGUMENT naming one that is not); rank 0's values are copied into every
 * rank's tensors, in place; and each trainable parameter gets accel's gradient storage
 * (accel_model_grad_view): with several processes the gradient buckets themselves (in shared memory on one
 * host), else a tensor of its own. Everything else takes it as any prepared model: accel_optimizer_new,
 * accumulation and no_sync, clipping, the fp16 grad scaler (accel/train.h), save_state / load_state and
 * save_model (the weights read from and written into the caller's tensors), the timeline and
 * accel_model_grad_sync_stat.
 * A tensor given under several names, or the same memory through several handles (two DLPack imports of
 * one array), is one parameter held twice (tied weights); tensors that share only part of their memory are
 * refused, as each would be stepped where they overlap.
 * Errors: ACCEL_ERR_NULL_ARGUMENT (an array with a non-zero count, an element); ACCEL_ERR_INVALID_ARGUMENT
 * (an empty or repeated name, a name that is not UTF-8 (naming its bytes), an undefined or sparse tensor,
 * a trainable parameter that is not floating, tensors that overlap in part, a tied tensor trainable under
 * one name only or given as a parameter and a buffer). */
ACCEL_API ACCEL_NODISCARD int accel_model_from_tensors(accel_model_t **out, const char *const *names,
                                                       accel_tensor_t *const *parameters, const int *trainable,
                                                       size_t count, const char *const *buffer_names,
                                                       accel_tensor_t *const *buffers, size_t buffer_count);
/* Releases the handle; the model lives on while an optimizer made from it does. NULL is a no-op. */
ACCEL_API void accel_model_free(accel_model_t *model);

/* Prepares the model for this process of state (see above). Collective with several processes: every
 * process's model must have the same parameters and buffers, with the same names, shapes and dtypes and the
 * same ones frozen (ACCEL_ERR_SHAPE_MISMATCH on every process otherwise, naming the first that differs).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (already prepared); ACCEL_ERR_UNKNOWN_OPTION (a
 * key of another object, naming it); ACCEL_ERR_BAD_OPTION_VALUE; ACCEL_ERR_UNSUPPORTED (grad_compression
 * "bf16" through LibTorch 1.13's Gloo); ACCEL_ERR_SHAPE_MISMATCH; collective errors.
 * Model states: prepared host, prepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_state_prepare_model(accel_state_t *state, accel_model_t *model, const accel_options_t *options);

/* forward(inputs...): count positional tensors, and optionally named ones (names may be NULL when
 * named_count is 0). *out holds what forward returned: one tensor, a tuple/list, or a dict of tensors.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_TORCH (the model's own error, e.g. a wrong input shape);
 * ACCEL_ERR_UNSUPPORTED (an output that is not made of tensors; a model of the caller's tensors, whose
 * forward runs in the caller's runtime). Model states: unprepared host, prepared host -> ACCEL_ERR_UNSUPPORTED. */
ACCEL_API ACCEL_NODISCARD int accel_model_forward(accel_model_t *model, accel_tensor_t *const *inputs, size_t count,
                                                  const char *const *names, accel_tensor_t *const *named_inputs,
                                                  size_t named_count, accel_output_t **out);
/* The same without building a graph (Accelerate users write it under torch.no_grad()): for evaluation.
 * On a model prepared on several processes it is collective when it broadcasts the buffers (see
 * broadcast_buffers above), as DDP's forward is; evaluate the unwrapped model (accel_model_unwrap) on some
 * ranks only. Errors: as accel_model_forward.
 * Model states: unprepared host, prepared host -> ACCEL_ERR_UNSUPPORTED. */
ACCEL_API ACCEL_NODISCARD int accel_model_evaluate(accel_model_t *model, accel_tensor_t *const *inputs, size_t count,
                                                   const char *const *names, accel_tensor_t *const *named_inputs,
                                                   size_t named_count, accel_output_t **out);

/* A prepared model of the caller's tensors (accel_model_from_tensors), as DDP drives its module:
 * accel_model_begin_forward before each of the caller's forwards (grad_enabled 0 under torch.no_grad):
 * with several processes it sends rank 0's buffers when the forward before synchronised (broadcast_buffers;
 * collective then, on every rank alike) and decides whether the coming backward synchronises
 * (accel_state_sync_gradients, no_sync, sync_each_batch).
 * accel_model_grad_view: parameter index's gradient storage, a tensor of accel's to install as the gradient
 * of the caller's tensor (torch: p.grad = torch.from_dlpack(...)) so that its backward accumulates there in
 * place: with several processes a view into the gradient bucket, as DDP's gradient_as_bucket_view (no copy
 * into the bucket). The same storage every step; clipping, the grad scaler, accel's optimizers and
 * save_state read the gradient there. If the caller's runtime replaced it (a zero_grad that sets gradients
 * to None), copy the new gradient into it and install it again before marking it ready, as DDP does.
 * accel_model_grad_ready: parameter index's gradient for this backward is complete (call it from a
 * post-accumulate-grad hook): once every gradient of its bucket is, the bucket's all-reduce starts,
 * overlapping the rest of backward; a repeat within one backward is ignored, and outside a synchronising
 * backward nothing happens.
 * accel_model_end_backward: the caller's backward is over: on a synchronising backward, waits for the
 * all-reduces, after which every gradient holds the average over the ranks; parameters never marked ready
 * follow find_unused_parameters as DDP does (one no rank used keeps its gradient as it was, in its bucket slot
 * too), or fail naming
 * them. With one process grad_ready and end_backward only check their arguments.
 * accel_model_grad_reached_by_no_rank: *out = 1 when no rank's backward reached parameter index in the last
 * synchronising backward (with find_unused_parameters or static_graph, whose count tells it), so its gradient
 * was left as it was; 0 otherwise, before the first synchronising backward, and on one process. A runtime
 * whose "no gradient" is not a zero tensor restores it then (torch: p.grad = None after a set-to-none
 * zero_grad, as DDP leaves it, so that the optimizer skips the parameter).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (a TorchScript model, whose backward accel runs
 * itself; a model not prepared); ACCEL_ERR_OUT_OF_RANGE (index); ACCEL_ERR_INVALID_ARGUMENT (a frozen
 * parameter; parameters without gradient, see above); collective errors. Thread safety: as the model's
 * (grad_ready may be called from the caller's autograd threads, one at a time).
 * Model states: unprepared host, unprepared torchscript, prepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_model_begin_forward(accel_model_t *model, int grad_enabled);
ACCEL_API ACCEL_NODISCARD int accel_model_grad_view(const accel_model_t *model, size_t index, accel_tensor_t **out);
ACCEL_API ACCEL_NODISCARD int accel_model_grad_ready(accel_model_t *model, size_t index);
ACCEL_API ACCEL_NODISCARD int accel_model_end_backward(accel_model_t *model);
ACCEL_API ACCEL_NODISCARD int accel_model_grad_reached_by_no_rank(const accel_model_t *model, size_t index, int *out);

/* ZeRO stage 3 (the prepare option zero_stage 3; FSDP's FULL_SHARD) on a model of the caller's tensors
 * prepared on several processes: each trainable parameter is held as this process's share of its elements
 * only (the master weights, which the model's optimizer steps), and the caller holds a parameter's values
 * only while it uses them. The model is cut into units, parameters the caller uses together (a module and
 * its children), given before prepare by accel_model_set_units (without it, one unit of every trainable
 * parameter). Each unit has a layout of accel_model_unit_numel elements where each of its parameters starts
 * at accel_model_parameter_place's offset (zeros between them): a parameter's values are elements [offset,
 * offset + numel) of the unit's layout, in row-major order. Prepare takes the trainable parameters' values
 * a unit at a time from process 0 (laid out there, moved to the state's device and broadcast, each process
 * keeping its share), so no process holds more than one unit's layout beside its shares: the trainable
 * parameters may lie anywhere (in host memory for a model larger than the device), and on the other
 * processes their values are never read (a tensor of one element expanded to each shape will do: a model
 * built without weights); the frozen parameters and the buffers must be on the device and hold memory for
 * every element (ACCEL_ERR_SHAPE_MISMATCH on every process naming one that does not). After prepare the model
 * holds no reference to the caller's memory of the trainable parameters (release it: their values are in the
 * model's shares) and the caller, per step:
 * - before using a unit (its forward, and its backward again when it released it after the forward):
 *   allocates a buffer of the layout, its parameters views of it, and fills it with accel_model_unit_gather;
 * - after its forward: may release the buffer (FSDP's reshard_after_forward), and must keep it (or gather it
 *   again) while the backward needs it;
 * - once the backward has accumulated the unit's gradients into a buffer of the same layout (zeros where
 *   none): accel_model_unit_reduce, which on a synchronising backward averages them over the processes into
 *   this process's share (*reduced 1: release the gradients), and on one that only accumulates (no_sync,
 *   gradient accumulation) does nothing (*reduced 0: keep them, and go on accumulating into them); on a
 *   synchronising backward every unit must be reduced before accel_model_end_backward, in the same order on
 *   every process, also one the backward did not reach (zeros).
 * The optimizer steps the shares (accel_optimizer_new, or accel_optimizer_new_external with the caller's
 * optimizer stepping accel_optimizer_piece_tensors' values); clipping and the fp16 scaler work on them.
 * accel_model_grad_view and accel_model_grad_ready are ACCEL_ERR_INVALID_STATE under stage 3, and
 * accel_model_parameter ACCEL_ERR_UNSUPPORTED for a trainable parameter. accel_state_save_state and
 * accel_state_save_model gather the parameters unit by unit (every process takes part, process 0 writes each
 * unit's tensors before the next is gathered), and the files are those of any stage; a model saved in pieces
 * (checkpoint_model "sharded", accel_model_set_checkpoint_model) gathers nothing, each process writing its
 * shares. load_state and load_model put each process's share of the saved values into the model, so a
 * checkpoint moves between stages and numbers of processes. With one process stage 3 shards nothing (as stages
 * 1 and 2) unless zero_cpu_offload is on (the units' shares, then whole, in host memory), and otherwise these
 * calls are ACCEL_ERR_INVALID_STATE but accel_model_set_units and accel_model_num_units (0). On a TorchScript model
 * accel_model_set_units chooses the units (accel_model_unit_gather and accel_model_unit_reduce, the
 * caller's protocol, which accel runs itself there, are ACCEL_ERR_INVALID_STATE), zero_param_dtype is ACCEL_ERR_UNSUPPORTED at prepare, and
 * accel_model_unwrap and accel_model_save_torchscript are ACCEL_ERR_UNSUPPORTED (its parameters exist only
 * around a forward; save_model writes them whole).
 * accel_model_set_units: per parameter (count accel_model_num_parameters, in its order), its unit, numbered
 * from 0 without gaps; a frozen parameter's entry is not read (frozen parameters stay whole in the caller's
 * memory). A unit's parameters need one dtype (ACCEL_ERR_INVALID_ARGUMENT at prepare naming two).
 * Mixed precision (FSDP's MixedPrecision; the prepare options zero_param_dtype and zero_reduce_dtype): a unit
 * is computed in zero_param_dtype, its buffer of that dtype filled with the shares cast to it (the cast before
 * the all-gather, so half the traffic in 16 bits), and its gradients handed over in it, averaged in
 * zero_reduce_dtype and added to the share's gradients in the parameters' dtype (the shares are the master
 * weights the optimizer steps). A buffer of the parameters' own dtype is gathered exact (what a checkpoint or
 * a state dict needs).
 * CPU offload (FSDP's CPUOffload(offload_params=True); the prepare option zero_cpu_offload): the shares of the
 * parameters and of their gradients live in host memory (pinned for a CUDA model), so the optimizer steps them
 * there and accel_optimizer_piece_tensors hands out host tensors; the caller's buffers stay on the parameters'
 * device (a gather copies the share there before the all-gather, a reduction copies the averaged share back).
 * accel_model_unit_gather: collective; full is of the unit's compute dtype or its parameters' dtype.
 * accel_model_unit_prefetch (FSDP's forward and backward prefetch): starts the unit's gather into full and
 * returns before it is done, so that it travels while the caller computes with another unit; the unit's next
 * accel_model_unit_gather then only waits for it (into full itself; into another buffer of its dtype, the
 * values copied). Collective: every process prefetches the same units in the same order, as it gathers them.
 * full must stay alive and untouched until that gather or the end of the backward (accel_model_end_backward,
 * which waits for the prefetches still in flight and forgets them: the next gather gathers afresh, as the
 * shares change in the step). It carries the shares of when it starts: gather it before anything changes
 * them (an optimizer step, a load). ACCEL_ERR_INVALID_STATE when the unit is prefetched already.
 * accel_model_unit_reduce: collective on a synchronising backward; full_gradients, of the compute dtype, is
 * overwritten.
 * accel_model_unit_gather_gradients (FSDP's summon_full_params(with_grads=True)): fills full, of the parameters'
 * dtype, with the unit's averaged gradients (the shares' gradients the optimizer steps), zeros where no
 * process holds any; *present is 0 when no process holds gradients of the unit (before its first
 * synchronising backward, and after a zero_grad that set them to none). Collective; also on a TorchScript
 * model. Gradients still accumulating in the caller's buffers (no_sync) are not the model's yet.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (set_units after prepare; the others on a model not
 * sharded); ACCEL_ERR_INVALID_ARGUMENT (a count other than the parameters'; a negative unit; a frozen
 * parameter's place; a buffer on another device); ACCEL_ERR_OUT_OF_RANGE (unit, index); ACCEL_ERR_SHAPE_MISMATCH
 * (a buffer that is not 1-d, contiguous, of the layout's length); ACCEL_ERR_DTYPE (a buffer of another dtype);
 * ACCEL_ERR_UNSUPPORTED at prepare (zero_reduce_dtype "bf16" where Gloo would carry it: LibTorch 1.13's has
 * no bfloat16 sum);
 * ACCEL_ERR_UNSUPPORTED (reduce without an accel optimizer over the model); collective errors, naming the
 * unit. Thread safety: as the model's.
 * Model states (set_units): prepared host, unprepared torchscript, prepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_model_set_units(accel_model_t *model, const int32_t *unit_of_parameter, size_t count);
/* The number of units of a sharded model; 0 for one that is not (and for NULL). */
ACCEL_API size_t accel_model_num_units(const accel_model_t *model);
/* See accel_model_set_units. On one process only an offloaded model is sharded:
 * Model states: unprepared host, prepared host, unprepared torchscript, prepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_model_unit_numel(const accel_model_t *model, size_t unit, int64_t *out);
ACCEL_API ACCEL_NODISCARD int accel_model_parameter_place(const accel_model_t *model, size_t index, size_t *unit,
                                                          int64_t *offset);
ACCEL_API ACCEL_NODISCARD int accel_model_unit_gather(accel_model_t *model, size_t unit, accel_tensor_t *full);
ACCEL_API ACCEL_NODISCARD int accel_model_unit_prefetch(accel_model_t *model, size_t unit, accel_tensor_t *full);
ACCEL_API ACCEL_NODISCARD int accel_model_unit_reduce(accel_model_t *model, size_t unit, accel_tensor_t *full_gradients,
                                                      int *reduced);
ACCEL_API ACCEL_NODISCARD int accel_model_unit_gather_gradients(accel_model_t *model, size_t unit, accel_tensor_t *full,
                                                                int *present);

/* How accel_state_save_state writes a prepared model from now on, as the prepare option checkpoint_model
 * chose at prepare ("auto": sharded when the parameters are, zero_stage 3 on several processes, whole
 * otherwise; FSDP's state_dict_type, which
 * Accelerate's set_state_dict_type changes in a run): "whole"
 * (one model file, written by process 0; under stage 3 its units gathered one after another) or "sharded"
 * (each process writes its piece of every tensor into its own folder of the checkpoint, in parallel and
 * without a collective: under stage 3 its shares, so no process gathers anything; a buffer process 0's whole;
 * any other tensor an even split of its elements). Either loads on any number of processes and stage
 * (accel_state_load_state), and `accel checkpoint merge` joins the pieces into one file; save_model always
 * writes the model whole. Every process must choose alike: accel_state_save_state refuses otherwise
 * (ACCEL_ERR_INVALID_ARGUMENT on every process, naming each one's choice, before anything is written).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_BAD_OPTION_VALUE (neither name, both named). Thread safety: as
 * the model's; a save in the background keeps what was chosen when it started.
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_model_set_checkpoint_model(accel_model_t *model, const char *how);

/* Output accessors: count; name of entry index (NULL unless the output is a dict); a new handle on entry
 * index (ACCEL_ERR_OUT_OF_RANGE otherwise); accel_output_get_named looks a dict entry up by name. */
ACCEL_API size_t accel_output_count(const accel_output_t *output);
ACCEL_API const char *accel_output_name(const accel_output_t *output, size_t index);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (no entry index). */
ACCEL_API ACCEL_NODISCARD int accel_output_get(const accel_output_t *output, size_t index, accel_tensor_t **out);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (no entry of that name; the message lists them). */
ACCEL_API ACCEL_NODISCARD int accel_output_get_named(const accel_output_t *output, const char *name, accel_tensor_t **out);
ACCEL_API void accel_output_free(accel_output_t *output);

/* Training (1) or evaluation (0) mode. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (on not 0
 * or 1). accel_model_is_training gives 0 for NULL. */
ACCEL_API ACCEL_NODISCARD int accel_model_train(accel_model_t *model, int on);
ACCEL_API int accel_model_is_training(const accel_model_t *model);

/* Parameters and buffers by index, in registration order, each tensor once under its first name (as torch's
 * named_parameters): a tensor several modules hold (tied weights, as an embedding and its output layer)
 * is one parameter, here and in the gradient buckets, optimizers and clipping. Names are owned by the
 * model; tensors are new handles sharing the model's memory (zero-copy: export them with
 * accel_tensor_to_dlpack).
 * Names are NULL for an index out of range and valid as long as the model (prepare keeps them).
 * Errors: ACCEL_ERR_NULL_ARGUMENT, ACCEL_ERR_OUT_OF_RANGE. */
ACCEL_API size_t accel_model_num_parameters(const accel_model_t *model);
ACCEL_API const char *accel_model_parameter_name(const accel_model_t *model, size_t index);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE; ACCEL_ERR_UNSUPPORTED (a trainable parameter under
 * zero_stage 3, see accel_model_set_units; accel_model_each_whole_tensor gathers them). */
ACCEL_API ACCEL_NODISCARD int accel_model_parameter(const accel_model_t *model, size_t index, accel_tensor_t **out);
/* Writes value, the whole value of parameter index (of its shape; converted to its dtype and device, as
 * torch's copy_), into the model: under zero_stage 3 this process's share of the parameter (its elements of
 * the flattened value; each process passes the whole value, as every FSDP rank loads a full state dict),
 * otherwise the tensor itself. What loading a state dict into a prepared model does, whatever the stage;
 * the optimizer's state is left as it is. Not collective; prefetches in flight are discarded first, and a unit
 * the caller holds gathered keeps its former values until its next gather. The caller keeps value.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE (index); ACCEL_ERR_SHAPE_MISMATCH (another shape,
 * naming both); ACCEL_ERR_DTYPE (a complex value for a real parameter). Thread safety: as the model's. */
ACCEL_API ACCEL_NODISCARD int accel_model_set_parameter(accel_model_t *model, size_t index, const accel_tensor_t *value);
ACCEL_API size_t accel_model_num_buffers(const accel_model_t *model);
ACCEL_API const char *accel_model_buffer_name(const accel_model_t *model, size_t index);
/* Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_OUT_OF_RANGE. */
ACCEL_API ACCEL_NODISCARD int accel_model_buffer(const accel_model_t *model, size_t index, accel_tensor_t **out);

/* Called with a tensor's name (valid for the call) and a new handle the callback owns (free it with
 * accel_tensor_free, also when returning non-zero): a copy of the tensor's whole value. Non-zero stops the
 * walk (ACCEL_ERR_CALLBACK). */
typedef int (*accel_whole_tensor_fn)(const char *name, accel_tensor_t *tensor, void *payload);

/* Every parameter and buffer of the model, whole, in the order accel_state_save_model writes them (a tensor
 * several modules hold once, under its first name), handed to `each` on a process with keep non-zero: what
 * Accelerate's get_state_dict gives. Under zero_stage 3, where no process holds the whole parameters, they are
 * gathered unit by unit (the next unit's gather in flight meanwhile; two units' memory at a time besides what
 * `each` keeps): collective, every process calls it, those with keep 0 only taking part (each may then be
 * NULL), as Accelerate's FSDP gives its full state dict to the main process only. Otherwise no collective.
 * keep: 0 or 1 (else ACCEL_ERR_INVALID_ARGUMENT).
 * Errors: ACCEL_ERR_NULL_ARGUMENT (model; each with keep); ACCEL_ERR_CALLBACK (each returned non-zero: no
 * further call, and under zero_stage 3 only once every unit has been gathered, so that no other process is
 * left waiting); the gathers' (ACCEL_ERR_PEER_FAILED, ACCEL_ERR_TIMEOUT).
 * Thread safety: as the model's other calls. */
ACCEL_API ACCEL_NODISCARD int accel_model_each_whole_tensor(accel_model_t *model, int keep, accel_whole_tensor_fn each,
                                                            void *payload);

/* What the gradient all-reduces of data-parallel backwards cost, one figure by name, into *out. Totals since
 * prepare: "syncs" (synchronising backwards; accumulating ones all-reduce nothing and count nowhere),
 * "bytes" (what this rank all-reduced: its buckets, whose slots start on 16-byte boundaries, so with up to
 * 15 bytes of padding between two; halved by grad_compression), "copied_bytes" (gradient bytes copied into
 * the buckets before the all-reduces and out of them after: twice the gradients' bytes, or once with
 * gradient_as_bucket_view; through shared memory on one host, the share of each bucket that a rank reduces
 * is reduced straight from its gradients and skips both copies), "reduce_ms" (wall time during which a
 * bucket's all-reduce was in flight), "overlapped_ms" (the part of it before backward had computed its last
 * gradient: hidden behind backward), "exposed_ms" (the rest, after it: the all-reduce time the step paid
 * for), "wait_ms" (how long backward waited for them, measured on its thread: exposed_ms plus the wake-up
 * after the last one, which is long where other processes keep the cores busy),
 * "helper_cpu_ms" (CPU time of the thread that ran the shared-memory all-reduces, spinning included: what
 * the overlap costs this rank's cores; 0 under Gloo, whose threads are its own). The same names with the
 * prefix "last_" give the last synchronising backward's figures. And the memory ZeRO splits (zero_stage):
 * "gradient_bytes" (the gradient memory this process held when the last synchronising backward ended: the
 * gradients' and the buckets' storage, each counted once) and "optimizer_state_bytes" (the per-parameter
 * state, momentum buffers and Adam's moments, of the accel optimizers made over the model, as of their last
 * step or load). And zero_stage 3's parameter gathers: "unit_gathers" (the units gathered, prefetched or
 * not), "unit_prefetches" (those whose gather was started ahead) and "unit_gather_wait_ms" (how long the
 * gathers waited for their all-gathers, what prefetching hides; under NCCL a wait only orders the streams, so
 * the host waits next to nothing). All 0 for a model that is not prepared
 * or runs on one process. With the timeline on, each synchronising backward also records the event
 * "all-reduce wait" (from its last gradient to the end of the wait) with these figures as arguments.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (another name; the message lists them).
 * Thread-safe: may be called while another thread trains the model. */
ACCEL_API ACCEL_NODISCARD int accel_model_grad_sync_stat(const accel_model_t *model, const char *name, double *out);

/* The plain module without the data-parallel wrapper (same parameters), e.g. to save or export it.
 * Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_model_unwrap(const accel_model_t *model, accel_model_t **out);
/* Writes the module as TorchScript (loadable by torch.jit.load). Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_IO (the file cannot be written); ACCEL_ERR_UNSUPPORTED (a model of the caller's tensors, which
 * has no TorchScript). Model states: unprepared host, prepared host -> ACCEL_ERR_UNSUPPORTED. */
ACCEL_API ACCEL_NODISCARD int accel_model_save_torchscript(const accel_model_t *model, const char *path);

/* Loads the weights that accel_state_save_model wrote into directory (model.safetensors, or
 * model.safetensors.index.json and the shards it names), and so also a checkpoint's first model
 * (accel_state_save_state; saved in pieces, checkpoint_model, every rank's part is read). Every tensor is checked before any is copied, so on an error the model is
 * unchanged: each parameter and buffer must be in the files (a tied one, which shares its memory with an
 * earlier one, through the name that was stored; in a model whose copies are not tied, a name the files
 * record as tied to a stored one, from that one) with the model's shape and dtype (no conversion), and
 * the files may hold no tensor the model lacks. Values are copied onto each tensor's device; prepared or
 * not, the model keeps its tensors. Not collective: each rank that calls it reads the files.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO (no model.safetensors or index in directory, a shard the
 * index names is missing or unreadable; naming it); ACCEL_ERR_INVALID_ARGUMENT naming the file and the
 * tensor (a name missing or unknown, a shape or dtype, a shard that holds other tensors than its index
 * says, tied tensors saved with different values, a damaged file, both model.safetensors and an index);
 * ACCEL_ERR_DTYPE (a dtype safetensors allows but accel cannot hold). */
ACCEL_API ACCEL_NODISCARD int accel_model_load_weights(accel_model_t *model, const char *directory);

#ifdef __cplusplus
}
#endif
#endif
