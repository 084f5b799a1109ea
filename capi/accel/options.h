/* accel: the options object, an opaque set of key/value settings handed to constructors.
 *
 * Each kind of object owns its keys: one options object may hold keys of several kinds, but a constructor
 * given a key of another object fails with ACCEL_ERR_UNKNOWN_OPTION naming the object (and function) the
 * key belongs to, so that "lr" passed to a loader is never silently ignored. A key no object knows is
 * refused by the setter already.
 *
 * State keys (accel_state_new; Accelerate's Accelerator arguments). These alone can also come from the
 * environment: precedence built-in default < ACCEL_<KEY> variable < value set here. An ACCEL_* variable
 * that names no state key is warned about on stderr when the first state is made.
 *   use_cpu          bool    force the CPU even when CUDA is present            default false
 *   mixed_precision  string  "no", "fp16" or "bf16"                             default "no"
 *   device           string  explicit device, e.g. "cpu" or "cuda:1"; "" = auto default ""
 *   backend          string  "auto", "gloo" or "nccl"                           default "auto"
 *                    (auto: nccl on CUDA, gloo on the CPU and where more local ranks than GPUs
 *                    share the host, since NCCL refuses two ranks on one GPU; one process makes no
 *                    process group whatever the backend)
 *   intra_node_transport string "auto", "shm" or "gloo"                     default "auto"
 *                    how all-reduces of CPU tensors (gradient buckets, reduce, clipping totals) travel
 *                    between ranks of one node: "shm" through a POSIX shared-memory segment (summed
 *                    in rank order: the same result run to run, and for 2 ranks bit for bit Gloo's),
 *                    "gloo" through Gloo's sockets; auto = shm when a node has several ranks and the
 *                    backend is gloo on the CPU. With several nodes the all-reduce is hierarchical:
 *                    within each node through its segment, between the nodes through one Gloo group
 *                    of their leaders (nodes told apart by GROUP_RANK, host name and boot id). Where a
 *                    segment cannot be made (/dev/shm too small, no shm_open) auto falls back to Gloo
 *                    for every rank with one line on rank 0's stderr and "shm" is an error; "shm" with
 *                    NCCL or with one rank per node is an error. accel_state_backend then says
 *                    "gloo+shm" on one host, "gloo+hier-shm" across nodes.
 *   timeout_s        double  rendezvous and collective timeout in seconds, in (0, 1e9] default 1800
 *   check_shapes     bool    compare shapes across ranks before collectives     default true
 *   gradient_accumulation_steps int  steps per optimizer step (> 0)            default 1
 *   sync_with_dataloader bool  the last batch of the active loader always syncs default true
 *   sync_each_batch  bool    all-reduce on every backward while accumulating    default false
 *   step_scheduler_with_optimizer bool  schedulers step after each real optimizer step, once per
 *                            process unless split_batches (accel/scheduler.h); false: once per
 *                            accel_scheduler_step call, whatever the optimizer did (schedules counted
 *                            in epochs or in calls)                              default true
 *   rng_types        string  the generators every rank takes from rank 0 when a loader that is not
 *                            dispatched starts an epoch (Accelerate's rng_types), a comma-separated list
 *                            of: generator (the loader's shuffling generator, unless use_seedable_sampler
 *                            or data_seed-seeded runs make that moot), torch (torch's default CPU
 *                            generator), cuda (the default generator of the state's CUDA device; nothing
 *                            on the CPU); "" = none                                default "generator"
 *   init_scale       double  fp16 grad scaler: the first loss scale (> 0)        default 65536
 *   growth_factor    double  fp16 grad scaler: scale multiplier after growth_interval clean steps
 *                            (> 1)                                               default 2
 *   backoff_factor   double  fp16 grad scaler: scale multiplier after an overflow, in (0, 1) default 0.5
 *   growth_interval  int     fp16 grad scaler: clean steps before the scale grows (> 0) default 2000
 *   grad_scaler_enabled bool fp16 scales the loss (torch's GradScaler); false runs fp16 without loss
 *                            scaling (Accelerate's GradScalerKwargs(enabled=False)) default true
 *   dynamo_backend   string  only "no" (any case): LibTorch has no TorchDynamo, so any other backend is
 *                            refused by accel_state_new with ACCEL_ERR_UNSUPPORTED saying why; what
 *                            torch.compile's "reduce-overhead" mode gives (CUDA graphs) is the train
 *                            step's cuda_graph (accel/train_step.h)              default "no"
 *   timeline         string  a directory: each rank writes its step timeline (a Chrome trace of forward,
 *                            backward, every gradient bucket's all-reduce, optimizer steps, loader waits,
 *                            collectives, saves) to timeline.rank<r>.json there when the state shuts
 *                            down; `accel timeline merge DIR` joins them; "" = off    default ""
 *   timeline_steps   int     how many of the last optimizer steps the timeline keeps (> 0) default 100
 *   project_dir      string  where accel_state_save_state with a NULL directory writes its numbered
 *                            checkpoints, project_dir/checkpoints/checkpoint_<i> (Accelerate's
 *                            ProjectConfiguration with automatic_checkpoint_naming)    default ""
 *   total_limit      int     numbered checkpoints kept in project_dir, the oldest removed first; 0 = all
 *                            (>= 0)                                                    default 0
 *                   project_dir and total_limit belong to the handle (Accelerate's ProjectConfiguration
 *                   belongs to the Accelerator): two states of one process may name different projects.
 * Loader keys (accel_loader_new; Accelerate's DataLoaderConfiguration and DataLoader arguments):
 *   batch_size       int     samples per batch (per process unless split_batches) default 1
 *   shuffle          bool    a new random order every epoch                      default false
 *   drop_last        bool    drop the last incomplete batch                      default false
 *   split_batches    bool    batch_size is the global batch, split over ranks    default false
 *   even_batches     bool    pad from the start so every rank gets equal batches default true
 *   dispatch_batches string "auto" (dispatch for iterable datasets only), "true" or "false": rank 0 reads
 *                            each global batch and sends every rank its part      default "auto"
 *   already_sharded  bool    the iterable dataset yields only this process's share already (a stream
 *                            reading its own shard): batched by each rank as it comes, never sharded
 *                            again nor dispatched ("auto" dispatch_batches then means false; "true" and
 *                            map-style datasets are refused); with split_batches each rank's batches hold
 *                            batch_size / processes items                        default false
 *   use_seedable_sampler bool order of epoch e = permutation seeded data_seed+e (without data_seed:
 *                            torch's initial seed when the loader is made, as set by
 *                            accel_state_set_seed; torch's default seed otherwise)  default false
 *   data_seed        int     seed of the shuffling generator; -1 = torch's default seed
 *                            (67280421310721, Accelerate's fresh torch.Generator())  default -1
 *   device_placement bool    batches go to the state's device (Accelerate's device_placement); false
 *                            leaves them where the dataset made them (dispatched batches under NCCL
 *                            travel through the device and arrive there)          default true
 *   non_blocking     bool    non-blocking copies to the device                   default false
 *   pin_memory       bool    page-locked batches before a CUDA copy              default false
 *   prefetch_threads int     threads reading batches ahead (map-style datasets that are not dispatched;
 *                            a get_item callback then runs on them, concurrently when there are several
 *                            threads); 0 = read in accel_loader_next                default 0
 *   prefetch_depth   int     batches read ahead of the one in use (> 0)          default 2
 * Model keys (accel_state_prepare_model; DDP's arguments): find_unused_parameters, bucket_cap_mb,
 * first_bucket_mb, broadcast_buffers, convert_outputs_to_fp32, gradient_as_bucket_view, static_graph,
 * grad_compression (DDP's comm hook: "no", "bf16", "fp16"), zero_stage (ZeRO: 0, 1, 2); see accel/model.h for their meanings, defaults
 * and, for grad_compression, the error it brings. Optimizer keys (accel_optimizer_new; accel/optimizer.h):
 * lr, momentum, dampening, nesterov, weight_decay, beta1, beta2, eps, no_decay. Scheduler keys
 * (accel_scheduler_new; accel/scheduler.h, per schedule): warmup_steps, total_steps, num_cycles, power,
 * lr_end, timescale, min_lr, min_lr_rate, num_stable_steps, num_decay_steps, min_lr_ratio, warmup_type,
 * decay_type, step_size, gamma, milestones, max_lr, pct_start, anneal_strategy, cycle_momentum,
 * base_momentum, max_momentum, div_factor, final_div_factor, three_phase, mode, factor, patience,
 * threshold, threshold_mode, cooldown, eps, split_batches. Loss keys (accel_loss_compute; accel/loss.h):
 * reduction, label_smoothing, ignore_index. Train step keys (accel_train_step_new; accel/train_step.h):
 * loss, the loss keys, max_grad_norm, norm_type, cuda_graph, cuda_graph_warmup. Tracker keys
 * (accel_state_init_trackers; accel/tracking.h):
 * log_with, overwrite. accel_options_dump lists every object's keys with their values.
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
