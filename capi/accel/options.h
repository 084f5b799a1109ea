/* accel: the options object, an opaque set of key/value settings handed to constructors.
 *
 * Each kind of object owns its keys: one options object may hold keys of several kinds, but a constructor
 * given a key of another object fails with ACCEL_ERR_UNKNOWN_OPTION naming the object (and function) the
 * key belongs to, so that "lr" passed to a loader is never silently ignored. A key no object knows is
 * refused by the setter already.
 *
 * <generated: option keys, by ./dev gen from capi/gen/option_tables.py>
 * State keys (accel_state_new; Accelerate's Accelerator arguments). These alone can also come from the
 * environment: precedence built-in default < ACCEL_<KEY> variable < value set here. An ACCEL_* variable that
 * names no state key is warned about on stderr when the first state is made. Keys marked "each handle's"
 * belong to the handle, as Accelerate's belong to the Accelerator: two states of one process may differ in
 * them.
 *   use_cpu          bool; default false
 *                    force the CPU even when CUDA is present
 *   mixed_precision  string: "no", "fp16", "bf16"; default "no"
 *                    the mixed precision forward and backward run in
 *   device           string; default ""
 *                    explicit device, e.g. "cpu" or "cuda:1"; "" = auto
 *   backend          string: "auto", "gloo", "nccl"; default "auto"
 *                    the process group's backend (auto: nccl on CUDA, gloo on the CPU and where more local
 *                    ranks than GPUs share the host, since NCCL refuses two ranks on one GPU; one process
 *                    makes no process group whatever the backend)
 *   intra_node_transport string: "auto", "shm", "gloo"; default "auto"
 *                    how all-reduces of CPU tensors (gradient buckets, reduce, clipping totals) travel
 *                    between ranks of one node: "shm" through a POSIX shared-memory segment (summed in rank
 *                    order: the same result run to run, and for 2 ranks bit for bit Gloo's), "gloo" through
 *                    Gloo's sockets; auto = shm when a node has several ranks and the backend is gloo on the
 *                    CPU. With several nodes the all-reduce is hierarchical: within each node through its
 *                    segment, between the nodes through one Gloo group of their leaders (nodes told apart by
 *                    GROUP_RANK, host name and boot id). Where a segment cannot be made (/dev/shm too small,
 *                    no shm_open) auto falls back to Gloo for every rank with one line on rank 0's stderr and
 *                    "shm" is an error; "shm" with NCCL or with one rank per node is an error.
 *                    accel_state_backend then says "gloo+shm" on one host, "gloo+hier-shm" across nodes.
 *   timeout_s        double > 0, <= 1e9; default 1800
 *                    rendezvous and collective timeout in seconds
 *   check_shapes     bool; default true
 *                    compare shapes across ranks before collectives
 *   gradient_accumulation_steps int > 0; default 1; each handle's
 *                    steps per optimizer step
 *   sync_with_dataloader bool; default true
 *                    the last batch of the active loader always syncs
 *   sync_each_batch  bool; default false
 *                    all-reduce on every backward while accumulating
 *   step_scheduler_with_optimizer bool; default true
 *                    schedulers step after each real optimizer step, once per process unless split_batches
 *                    (accel/scheduler.h); false: once per accel_scheduler_step call, whatever the optimizer
 *                    did (schedules counted in epochs or in calls)
 *   rng_types        string, a comma-separated list of "generator", "torch", "cuda"; default "generator"
 *                    the generators every rank takes from rank 0 when a loader that is not dispatched starts
 *                    an epoch (Accelerate's rng_types): generator (the loader's shuffling generator, unless
 *                    use_seedable_sampler or data_seed-seeded runs make that moot), torch (torch's default
 *                    CPU generator), cuda (the default generator of the state's CUDA device; nothing on the
 *                    CPU); "" = none
 *   init_scale       double > 0; default 65536
 *                    fp16 grad scaler: the first loss scale
 *   growth_factor    double > 1; default 2
 *                    fp16 grad scaler: scale multiplier after growth_interval clean steps
 *   backoff_factor   double > 0, < 1; default 0.5
 *                    fp16 grad scaler: scale multiplier after an overflow
 *   growth_interval  int > 0; default 2000
 *                    fp16 grad scaler: clean steps before the scale grows
 *   grad_scaler_enabled bool; default true
 *                    fp16 scales the loss (torch's GradScaler); false runs fp16 without loss scaling
 *                    (Accelerate's GradScalerKwargs(enabled=False))
 *   dynamo_backend   string; default "no"
 *                    only "no" (any case): LibTorch has no TorchDynamo, so any other backend is refused by
 *                    accel_state_new with ACCEL_ERR_UNSUPPORTED saying why; what torch.compile's
 *                    "reduce-overhead" mode gives (CUDA graphs) is the train step's cuda_graph
 *                    (accel/train_step.h)
 *   timeline         string; default ""
 *                    a directory: each rank writes its step timeline (a Chrome trace of forward, backward,
 *                    every gradient bucket's all-reduce, optimizer steps, loader waits, collectives, saves)
 *                    to timeline.rank<r>.json there when the state shuts down; `accel timeline merge DIR`
 *                    joins them; "" = off
 *   timeline_steps   int > 0; default 100
 *                    how many of the last optimizer steps the timeline keeps
 *   project_dir      string; default ""; each handle's
 *                    where accel_state_save_state with a NULL directory writes its numbered checkpoints,
 *                    project_dir/checkpoints/checkpoint_<i> (Accelerate's ProjectConfiguration with
 *                    automatic_checkpoint_naming)
 *   total_limit      int; default 0; each handle's
 *                    numbered checkpoints kept in project_dir, the oldest removed first; 0 = all; a negative
 *                    value is refused when a checkpoint is saved
 * Loader keys (accel_loader_new; Accelerate's DataLoaderConfiguration and DataLoader arguments).
 *   batch_size       int > 0; default 1
 *                    samples per batch (per process unless split_batches)
 *   shuffle          bool; default false
 *                    a new random order every epoch
 *   drop_last        bool; default false
 *                    drop the last incomplete batch
 *   split_batches    bool; default false
 *                    batch_size is the global batch, split over ranks
 *   even_batches     bool; default true
 *                    pad from the start so every rank gets equal batches
 *   dispatch_batches string: "auto", "true", "false"; default "auto"
 *                    auto: dispatch for iterable datasets only; true: rank 0 reads each global batch and
 *                    sends every rank its part
 *   already_sharded  bool; default false
 *                    the iterable dataset yields only this process's share already (a stream reading its own
 *                    shard): batched by each rank as it comes, never sharded again nor dispatched ("auto"
 *                    dispatch_batches then means false; "true" and map-style datasets are refused); with
 *                    split_batches each rank's batches hold batch_size / processes items
 *   use_seedable_sampler bool; default false
 *                    order of epoch e = permutation seeded data_seed+e (without data_seed: torch's initial
 *                    seed when the loader is made, as set by accel_state_set_seed; torch's default seed
 *                    otherwise)
 *   data_seed        int; default -1
 *                    seed of the shuffling generator; -1 = torch's default seed (67280421310721, Accelerate's
 *                    fresh torch.Generator())
 *   device_placement bool; default true
 *                    batches go to the state's device (Accelerate's device_placement); false leaves them
 *                    where the dataset made them (dispatched batches under NCCL travel through the device and
 *                    arrive there)
 *   non_blocking     bool; default false
 *                    non-blocking copies to the device
 *   pin_memory       bool; default false
 *                    page-locked batches before a CUDA copy
 *   prefetch_threads int; default 0
 *                    threads reading batches ahead (map-style datasets that are not dispatched; a get_item
 *                    callback then runs on them, concurrently when there are several threads); 0 = read in
 *                    accel_loader_next
 *   prefetch_depth   int > 0; default 2
 *                    batches read ahead of the one in use
 * Model keys (accel_state_prepare_model; DDP's arguments): their meanings, and the errors they bring, in
 * accel/model.h.
 *   find_unused_parameters bool; default false
 *                    a trainable parameter without a gradient is not an error (DDP's)
 *   bucket_cap_mb    double > 0; default 25
 *                    the size of each gradient bucket after the first, in MiB
 *   first_bucket_mb  double > 0; default 1
 *                    the size of the first gradient bucket, in MiB
 *   broadcast_buffers bool; default true
 *                    rank 0's buffers are sent to the others before a forward that follows a synchronising
 *                    one
 *   gradient_as_bucket_view bool; default false
 *                    each averaged gradient is a view into its bucket
 *   static_graph     bool; default false
 *                    parameters without a gradient are allowed when they are the same ones in every backward
 *   convert_outputs_to_fp32 bool; default true
 *                    fp16/bf16 outputs of an autocast forward come back as fp32
 *   grad_compression string: "no", "fp16", "bf16"; default "no"
 *                    DDP's fp16/bf16 compress hook: buckets all-reduced in 16 bits
 *   zero_stage       int; default 0
 *                    DeepSpeed's ZeRO stage: 0 data parallel, 1 optimizer state split, 2 gradients too, 3
 *                    parameters too (models of the caller's tensors)
 *   zero_param_dtype string: "auto", "fp32", "bf16", "fp16"; default "auto"
 *                    zero_stage 3's mixed precision (FSDP's MixedPrecision param_dtype): the dtype units are
 *                    gathered in and their gradients handed over in, the shares staying in the parameters'
 *                    dtype as the master weights the optimizer steps; auto = the parameters' own
 *   zero_reduce_dtype string: "auto", "fp32", "bf16", "fp16"; default "auto"
 *                    zero_stage 3's gradient reduction dtype (FSDP's reduce_dtype): gradients are averaged in
 *                    it, then added to the shares' gradients in the parameters' dtype; auto =
 *                    zero_param_dtype's
 *   zero_prefetch    bool; default true
 *                    zero_stage 3 on a TorchScript model: run a child at a time, the next child's gather
 *                    starts as a child's forward and backward begin (FSDP's forward_prefetch and
 *                    BACKWARD_PRE); gathered whole, every unit's gather starts before the first is waited for
 *   zero_cpu_offload bool; default false
 *                    ZeRO-Offload. zero_stage 3 (FSDP's CPUOffload(offload_params=True), DeepSpeed's
 *                    offload_param): each process's shares of the parameters and their gradients, and so the
 *                    optimizer's state and step, in host memory (pinned for a CUDA model), copied to the
 *                    model's device for each gather and back after each reduction; on the CPU nothing moves.
 *                    zero_stage 1 and 2 (DeepSpeed's offload_optimizer): the optimizer's state and step on
 *                    host copies of the process's pieces and their averaged gradients, copied from the device
 *                    before each step and back after it (also on the CPU, and on one process, which owns
 *                    every element); zero_stage 0 refused
 *   zero_hybrid_shard bool; default false
 *                    zero_stage 1, 2 or 3 split over each node's ranks, every node holding the same (FSDP's
 *                    HYBRID_SHARD under 3, HYBRID_SHARD_ZERO2 under 2): gathers and reduce-scatters stay
 *                    within a node, and only each chunk's sum travels between the nodes; every node needs as
 *                    many ranks, numbered consecutively
 *   checkpoint_model string: "auto", "whole", "sharded"; default "auto"
 *                    how save_state writes the model: whole (one file by process 0; under zero_stage 3
 *                    streamed as its units are gathered) or sharded (each process its piece of every tensor,
 *                    in parallel, without a collective: FSDP's SHARDED_STATE_DICT, DeepSpeed's ZeRO-3
 *                    checkpoints); auto = sharded when the parameters are (zero_stage 3 on several
 *                    processes), whole otherwise; either loads on any number of processes and stage, and
 *                    `accel checkpoint merge` joins the pieces
 * Optimizer keys (accel_optimizer_new; accel/optimizer.h).
 *   lr               double; default 0.001
 *                    the learning rate
 *   momentum         double; default 0
 *                    sgd's momentum
 *   dampening        double; default 0
 *                    sgd's dampening
 *   nesterov         bool; default false
 *                    sgd's Nesterov momentum
 *   weight_decay     double; default 0
 *                    the weight decay (adamw's decoupled)
 *   beta1            double; default 0.9
 *                    adam's and adamw's beta1
 *   beta2            double; default 0.999
 *                    adam's and adamw's beta2
 *   eps              double > 0; default 1e-8
 *                    adam's and adamw's eps; reduce_on_plateau's smallest lr change
 *   no_decay         string; default ""
 *                    comma-separated glob patterns of parameter names (e.g. "*bias,*norm*") put in a second
 *                    group with weight decay 0
 * Scheduler keys (accel_scheduler_new): which schedule reads which, and their defaults there, in
 * accel/scheduler.h.
 *   warmup_steps     int; default 0
 *   total_steps      int; default 0
 *   num_cycles       double; default 0.5
 *   power            double; default 1
 *   lr_end           double; default 1e-7
 *   timescale        int; default 0
 *   min_lr           double; default 0
 *   min_lr_rate      double; default 0
 *   num_stable_steps int; default 0
 *   num_decay_steps  int; default 0
 *   min_lr_ratio     double; default 0
 *   warmup_type      string: "linear", "cosine", "1-sqrt"; default "linear"
 *   decay_type       string: "linear", "cosine", "1-sqrt"; default "cosine"
 *   step_size        int > 0; default 1
 *   gamma            double; default 0.1
 *   milestones       string; default ""
 *   max_lr           double; default 0
 *   pct_start        double; default 0.3
 *   anneal_strategy  string: "cos", "linear"; default "cos"
 *   cycle_momentum   bool; default true
 *   base_momentum    double; default 0.85
 *   max_momentum     double; default 0.95
 *   div_factor       double > 0; default 25
 *   final_div_factor double > 0; default 10000
 *   three_phase      bool; default false
 *   mode             string: "min", "max"; default "min"
 *   factor           double; default 0.1
 *   patience         int; default 10
 *   threshold        double; default 0.0001
 *   threshold_mode   string: "rel", "abs"; default "rel"
 *   cooldown         int; default 0
 *   eps              double > 0; default 1e-8
 *                    adam's and adamw's eps; reduce_on_plateau's smallest lr change
 *   split_batches    bool; default false
 *                    the schedule counts global batches (set it as on the loaders)
 * Loss keys (accel_loss_compute; accel/loss.h).
 *   reduction        string: "mean", "sum", "none"; default "mean"
 *                    how the per-sample losses are reduced
 *   label_smoothing  double; default 0
 *                    cross_entropy's label smoothing, in [0, 1]
 *   ignore_index     int; default -100
 *                    the target class cross_entropy and nll ignore
 * Train step keys (accel_train_step_new; accel/train_step.h), and the loss keys.
 *   loss             string: "cross_entropy", "nll", "mse", "l1", "bce_with_logits", "output"; default "cross_entropy"
 *                    the loss the step computes (output: the model returns it)
 *   max_grad_norm    double; default 0
 *                    clip the gradients' total norm to this on sync steps; 0 = no clipping
 *   norm_type        double > 0; default 2
 *                    the norm max_grad_norm measures
 *   cuda_graph       bool; default false
 *                    capture the step in a CUDA graph and replay it
 *   cuda_graph_warmup int > 0; default 3
 *                    eager steps before the capture
 * Tracker keys (accel_state_init_trackers; accel/tracking.h).
 *   log_with         string; default "jsonl,csv,tensorboard"
 *                    the trackers, comma-separated: jsonl, csv, tensorboard
 *   overwrite        bool; default false
 *                    a run directory that holds records already is emptied first (else refused)
 * </generated: option keys>
 * accel_options_dump lists every object's keys with their values.
 *
 * Accelerate's Accelerator and DataLoaderConfiguration arguments without a key here, and why:
 * deepspeed_plugin, fsdp_plugin, megatron_lm_plugin, fp8 (mixed_precision "fp8") and their recipe kwargs:
 * those engines are Python (or CUDA extensions torch's C++ API does not ship), and LibTorch 1.13 has no
 * fp8 dtype; dynamo_plugin: as dynamo_backend; use_stateful_dataloader: every loader is stateful already
 * (accel_loader_save_state, accel_state_save_state); AutocastKwargs: forward and the
 * accel_state_autocast_begin/end scope use the state's mixed precision, with the autocast cache on;
 * ProfileKwargs: the state setting timeline
 * records each step instead; log_with and project_config: accel_state_init_trackers' options and the state
 * settings project_dir and total_limit; even_batches etc.: the loader keys above.
 * Booleans accept 1/0, true/false, yes/no, on/off, y/n, t/f (any case) as strings.
 *
 * Thread safety: an options object may be read from several threads at once (by constructors and
 * accel_options_dump), but setters must not race with any other use of the same object. */
#ifndef ACCEL_OPTIONS_H
#define ACCEL_OPTIONS_H

#include "accel/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_options accel_options_t;

/* Creates an empty options object (every key at its default). On success *out owns it; release it with
 * accel_options_free. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_options_new(accel_options_t **out);
/* Releases the object; NULL is a no-op. Objects created from these options do not need it any more. */
ACCEL_API void accel_options_free(accel_options_t *options);

/* Typed setters. Errors: ACCEL_ERR_NULL_ARGUMENT (options or key NULL), ACCEL_ERR_UNKNOWN_OPTION (the
 * message names the key and lists the known ones), ACCEL_ERR_BAD_OPTION_VALUE (wrong type for the key or
 * value out of range; the message names the key and the value). On error the object is unchanged. */
ACCEL_API ACCEL_NODISCARD int accel_options_set_bool(accel_options_t *options, const char *key, int value);
/* Errors: as accel_options_set_bool. */
ACCEL_API ACCEL_NODISCARD int accel_options_set_int(accel_options_t *options, const char *key, int64_t value);
/* Errors: as accel_options_set_bool. */
ACCEL_API ACCEL_NODISCARD int accel_options_set_double(accel_options_t *options, const char *key, double value);
/* Errors: as accel_options_set_bool. */
ACCEL_API ACCEL_NODISCARD int accel_options_set_string(accel_options_t *options, const char *key, const char *value);
/* Sets any key from its text form ("true", "30", "bf16"), parsed by the key's type. Same errors. */
ACCEL_API ACCEL_NODISCARD int accel_options_set(accel_options_t *options, const char *key, const char *value);

/* *out receives a new string with the configuration these options resolve to right now (defaults,
 * then ACCEL_* environment for state keys, then explicit values), one "key=value (source)" line per key,
 * source being default, env or set; release it with accel_string_free. Thread-safe against other
 * readers of the same options (the options object is not written).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_BAD_OPTION_VALUE when an environment variable does not
 * parse (the message names the variable). */
ACCEL_API ACCEL_NODISCARD int accel_options_dump(const accel_options_t *options, char **out);

#ifdef __cplusplus
}
#endif
#endif
