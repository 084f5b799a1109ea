"""The options of every object, the one place each is written: its key, type, default, allowed values and
what it does. `./dev gen` (capi/gen/emit_options.py) writes from these tables the C++ tables the library
checks values against (the *_option_table.cpp files of src/) and the key reference in capi/accel/options.h;
the bindings pass keys as strings, so the library's check is theirs. Adding an option is one Option line
here, `./dev gen`, and the code that reads it (its area's *_config function)."""
from option_model import Option, Scope

STATE = Scope(
    "state", "accel_state_new", area="distributed", header="state_options.hpp", function="state_option_scope",
    from_environment=True,
    note=("State keys (accel_state_new; Accelerate's Accelerator arguments). These alone can also come from the"
         " environment: precedence built-in default < ACCEL_<KEY> variable < value set here. An ACCEL_* "
         "variable that names no state key is warned about on stderr when the first state is made. Keys marked"
         " \"each handle's\" belong to the handle, as Accelerate's belong to the Accelerator: two states of one "
         "process may differ in them."),
    options=[
        Option("use_cpu", bool, False, "force the CPU even when CUDA is present"),
        Option("mixed_precision", str, "no",
               "the mixed precision forward and backward run in", choices=("no", "fp16", "bf16")),
        Option("device", str, "", "explicit device, e.g. \"cpu\" or \"cuda:1\"; \"\" = auto"),
        Option("backend", str, "auto",
               "the process group's backend (auto: nccl on CUDA, gloo on the CPU and where more local ranks than "
               "GPUs share the host, since NCCL refuses two ranks on one GPU; one process makes no process group "
               "whatever the backend)", choices=("auto", "gloo", "nccl")),
        Option("intra_node_transport", str, "auto",
               "how all-reduces of CPU tensors (gradient buckets, reduce, clipping totals) travel between ranks of "
               "one node: \"shm\" through a POSIX shared-memory segment (summed in rank order: the same result run to "
               "run, and for 2 ranks bit for bit Gloo's), \"gloo\" through Gloo's sockets; auto = shm when a node has "
               "several ranks and the backend is gloo on the CPU. With several nodes the all-reduce is hierarchical:"
               " within each node through its segment, between the nodes through one Gloo group of their leaders "
               "(nodes told apart by GROUP_RANK, host name and boot id). Where a segment cannot be made (/dev/shm "
               "too small, no shm_open) auto falls back to Gloo for every rank with one line on rank 0's stderr and "
               "\"shm\" is an error; \"shm\" with NCCL or with one rank per node is an error. accel_state_backend then "
               "says \"gloo+shm\" on one host, \"gloo+hier-shm\" across nodes.", choices=("auto", "shm", "gloo")),
        Option("timeout_s", float, 1800.0,
               "rendezvous and collective timeout in seconds", positive=True, maximum=1e9),
        Option("check_shapes", bool, True, "compare shapes across ranks before collectives"),
        Option("gradient_accumulation_steps", int, 1, "steps per optimizer step", positive=True, per_handle=True),
        Option("sync_with_dataloader", bool, True, "the last batch of the active loader always syncs"),
        Option("sync_each_batch", bool, False, "all-reduce on every backward while accumulating"),
        Option("step_scheduler_with_optimizer", bool, True,
               "schedulers step after each real optimizer step, once per process unless split_batches "
               "(accel/scheduler.h); false: once per accel_scheduler_step call, whatever the optimizer did "
               "(schedules counted in epochs or in calls)"),
        Option("rng_types", str, "generator",
               "the generators every rank takes from rank 0 when a loader that is not dispatched starts an epoch "
               "(Accelerate's rng_types): generator (the loader's shuffling generator, "
               "unless use_seedable_sampler or data_seed-seeded runs make that moot), torch (torch's default CPU "
               "generator), cuda (the default generator of the state's CUDA device; nothing on the CPU); \"\" = none",
               choices=("generator", "torch", "cuda"), comma_list=True),
        Option("init_scale", float, 65536.0, "fp16 grad scaler: the first loss scale", positive=True),
        Option("growth_factor", float, 2.0,
               "fp16 grad scaler: scale multiplier after growth_interval clean steps", above=1.0),
        Option("backoff_factor", float, 0.5,
               "fp16 grad scaler: scale multiplier after an overflow", positive=True, below=1.0),
        Option("growth_interval", int, 2000, "fp16 grad scaler: clean steps before the scale grows", positive=True),
        Option("grad_scaler_enabled", bool, True,
               "fp16 scales the loss (torch's GradScaler); false runs fp16 without loss scaling (Accelerate's "
               "GradScalerKwargs(enabled=False))"),
        Option("dynamo_backend", str, "no",
               "only \"no\" (any case): LibTorch has no TorchDynamo, so any other backend is refused by "
               "accel_state_new with ACCEL_ERR_UNSUPPORTED saying why; what torch.compile's \"reduce-overhead\" mode "
               "gives (CUDA graphs) is the train step's cuda_graph (accel/train_step.h)"),
        Option("timeline", str, "",
               "a directory: each rank writes its step timeline (a Chrome trace of forward, backward, every gradient"
               " bucket's all-reduce, optimizer steps, loader waits, collectives, saves) to timeline.rank<r>.json "
               "there when the state shuts down; `accel timeline merge DIR` joins them; \"\" = off"),
        Option("timeline_steps", int, 100, "how many of the last optimizer steps the timeline keeps", positive=True),
        Option("project_dir", str, "",
               "where accel_state_save_state with a NULL directory writes its numbered checkpoints, "
               "project_dir/checkpoints/checkpoint_<i> (Accelerate's ProjectConfiguration with "
               "automatic_checkpoint_naming)", per_handle=True),
        Option("total_limit", int, 0,
               "numbered checkpoints kept in project_dir, the oldest removed first; 0 = all; a negative value is "
               "refused when a checkpoint is saved", per_handle=True),
    ])

LOADER = Scope(
    "loader", "accel_loader_new", area="data", header="loader_options.hpp", function="loader_option_scope",
    note="Loader keys (accel_loader_new; Accelerate's DataLoaderConfiguration and DataLoader arguments).",
    options=[
        Option("batch_size", int, 1, "samples per batch (per process unless split_batches)", positive=True),
        Option("shuffle", bool, False, "a new random order every epoch"),
        Option("drop_last", bool, False, "drop the last incomplete batch"),
        Option("split_batches", bool, False, "batch_size is the global batch, split over ranks"),
        Option("even_batches", bool, True, "pad from the start so every rank gets equal batches"),
        Option("dispatch_batches", str, "auto",
               "auto: dispatch for iterable datasets only; true: rank 0 reads each global batch and sends every rank "
               "its part", choices=("auto", "true", "false")),
        Option("already_sharded", bool, False,
               "the iterable dataset yields only this process's share already (a stream reading its own shard): "
               "batched by each rank as it comes, never sharded again nor dispatched (\"auto\" dispatch_batches then "
               "means false; \"true\" and map-style datasets are refused); with split_batches each rank's batches hold"
               " batch_size / processes items"),
        Option("use_seedable_sampler", bool, False,
               "order of epoch e = permutation seeded data_seed+e (without data_seed: torch's initial seed when the "
               "loader is made, as set by accel_state_set_seed; torch's default seed otherwise)"),
        Option("data_seed", int, -1,
               "seed of the shuffling generator; -1 = torch's default seed (67280421310721, Accelerate's fresh "
               "torch.Generator())"),
        Option("device_placement", bool, True,
               "batches go to the state's device (Accelerate's device_placement); false leaves them where the "
               "dataset made them (dispatched batches under NCCL travel through the device and arrive there)"),
        Option("non_blocking", bool, False, "non-blocking copies to the device"),
        Option("pin_memory", bool, False, "page-locked batches before a CUDA copy"),
        Option("prefetch_threads", int, 0,
               "threads reading batches ahead (map-style datasets that are not dispatched; a get_item callback then "
               "runs on them, concurrently when there are several threads); 0 = read in accel_loader_next"),
        Option("prefetch_depth", int, 2, "batches read ahead of the one in use", positive=True),
    ])

MODEL = Scope(
    "model", "accel_state_prepare_model", area="train", header="training_options.hpp", function="prepare_option_scope",
    note=("Model keys (accel_state_prepare_model; DDP's arguments): their meanings, and the errors they bring, "
         "in accel/model.h."),
    options=[
        Option("find_unused_parameters", bool, False,
               "a trainable parameter without a gradient is not an error (DDP's)"),
        Option("bucket_cap_mb", float, 25.0,
               "the size of each gradient bucket after the first, in MiB", positive=True),
        Option("first_bucket_mb", float, 1.0, "the size of the first gradient bucket, in MiB", positive=True),
        Option("broadcast_buffers", bool, True,
               "rank 0's buffers are sent to the others before a forward that follows a synchronising one"),
        Option("gradient_as_bucket_view", bool, False, "each averaged gradient is a view into its bucket"),
        Option("static_graph", bool, False,
               "parameters without a gradient are allowed when they are the same ones in every backward"),
        Option("convert_outputs_to_fp32", bool, True, "fp16/bf16 outputs of an autocast forward come back as fp32"),
        Option("grad_compression", str, "no",
               "DDP's fp16/bf16 compress hook: buckets all-reduced in 16 bits", choices=("no", "fp16", "bf16")),
        Option("zero_stage", int, 0,
               "DeepSpeed's ZeRO stage: 0 data parallel, 1 optimizer state split, 2 gradients too, 3 parameters too (models of the caller's tensors)"),
        Option("zero_param_dtype", str, "auto",
               "zero_stage 3's mixed precision (FSDP's MixedPrecision param_dtype): the dtype units are gathered in and"
               " their gradients handed over in, the shares staying in the parameters' dtype as the master weights the"
               " optimizer steps; auto = the parameters' own", choices=("auto", "fp32", "bf16", "fp16")),
        Option("zero_reduce_dtype", str, "auto",
               "zero_stage 3's gradient reduction dtype (FSDP's reduce_dtype): gradients are averaged in it, then"
               " added to the shares' gradients in the parameters' dtype; auto = zero_param_dtype's",
               choices=("auto", "fp32", "bf16", "fp16")),
        Option("zero_prefetch", bool, True,
               "zero_stage 3 on a TorchScript model: run a child at a time, the next child's gather starts as a child's"
               " forward and backward begin (FSDP's forward_prefetch and BACKWARD_PRE); gathered whole, every unit's"
               " gather starts before the first is waited for"),
        Option("zero_cpu_offload", bool, False,
               "ZeRO-Offload. zero_stage 3 (FSDP's CPUOffload(offload_params=True), DeepSpeed's offload_param): each"
               " process's shares of the parameters and their gradients, and so the optimizer's state and step, in host"
               " memory (pinned for a CUDA model), copied to the model's device for each gather and back after each"
               " reduction; on the CPU nothing moves. zero_stage 1 and 2 (DeepSpeed's offload_optimizer): the"
               " optimizer's state and step on host copies of the process's pieces and their averaged gradients,"
               " copied from the device before each step and back after it (also on the CPU, and on one process, which"
               " owns every element); zero_stage 0 refused"),
        Option("zero_hybrid_shard", bool, False,
               "zero_stage 1, 2 or 3 split over each node's ranks, every node holding the same (FSDP's HYBRID_SHARD"
               " under 3, HYBRID_SHARD_ZERO2 under 2): gathers and reduce-scatters stay within a node, and only each"
               " chunk's sum travels between the nodes; every node needs as many ranks, numbered consecutively"),
        Option("checkpoint_model", str, "auto",
               "how save_state writes the model: whole (one file by process 0; under zero_stage 3 streamed as its"
               " units are gathered) or sharded (each process its piece of every tensor, in parallel, without a"
               " collective: FSDP's SHARDED_STATE_DICT, DeepSpeed's ZeRO-3 checkpoints); auto = sharded when the"
               " parameters are (zero_stage 3 on several processes), whole otherwise; either loads on any number of processes and stage, and"
               " `accel checkpoint merge` joins the pieces", choices=("auto", "whole", "sharded")),
    ])

OPTIMIZER = Scope(
    "optimizer", "accel_optimizer_new", area="train", header="training_options.hpp", function="optimizer_option_scope",
    note="Optimizer keys (accel_optimizer_new; accel/optimizer.h).",
    options=[
        Option("lr", float, 0.001, "the learning rate"),
        Option("momentum", float, 0.0, "sgd's momentum"),
        Option("dampening", float, 0.0, "sgd's dampening"),
        Option("nesterov", bool, False, "sgd's Nesterov momentum"),
        Option("weight_decay", float, 0.0, "the weight decay (adamw's decoupled)"),
        Option("beta1", float, 0.9, "adam's and adamw's beta1"),
        Option("beta2", float, 0.999, "adam's and adamw's beta2"),
        Option("eps", float, 1e-08, "adam's and adamw's eps; reduce_on_plateau's smallest lr change", positive=True),
        Option("no_decay", str, "",
               "comma-separated glob patterns of parameter names (e.g. \"*bias,*norm*\") put in a second group with "
               "weight decay 0"),
    ])

SCHEDULER = Scope(
    "scheduler", "accel_scheduler_new", area="train", header="training_options.hpp", function="scheduler_option_scope",
    note=("Scheduler keys (accel_scheduler_new): which schedule reads which, and their defaults there, in "
         "accel/scheduler.h."),
    options=[
        Option("warmup_steps", int, 0),
        Option("total_steps", int, 0),
        Option("num_cycles", float, 0.5),
        Option("power", float, 1.0),
        Option("lr_end", float, 1e-07),
        Option("timescale", int, 0),
        Option("min_lr", float, 0.0),
        Option("min_lr_rate", float, 0.0),
        Option("num_stable_steps", int, 0),
        Option("num_decay_steps", int, 0),
        Option("min_lr_ratio", float, 0.0),
        Option("warmup_type", str, "linear", choices=("linear", "cosine", "1-sqrt")),
        Option("decay_type", str, "cosine", choices=("linear", "cosine", "1-sqrt")),
        Option("step_size", int, 1, positive=True),
        Option("gamma", float, 0.1),
        Option("milestones", str, ""),
        Option("max_lr", float, 0.0),
        Option("pct_start", float, 0.3),
        Option("anneal_strategy", str, "cos", choices=("cos", "linear")),
        Option("cycle_momentum", bool, True),
        Option("base_momentum", float, 0.85),
        Option("max_momentum", float, 0.95),
        Option("div_factor", float, 25.0, positive=True),
        Option("final_div_factor", float, 10000.0, positive=True),
        Option("three_phase", bool, False),
        Option("mode", str, "min", choices=("min", "max")),
        Option("factor", float, 0.1),
        Option("patience", int, 10),
        Option("threshold", float, 0.0001),
        Option("threshold_mode", str, "rel", choices=("rel", "abs")),
        Option("cooldown", int, 0),
        Option("eps", float, 1e-08, "adam's and adamw's eps; reduce_on_plateau's smallest lr change", positive=True),
        Option("split_batches", bool, False, "the schedule counts global batches (set it as on the loaders)"),
    ])

LOSS = Scope(
    "loss", "accel_loss_compute", area="train", header="training_options.hpp", function="loss_option_scope",
    note="Loss keys (accel_loss_compute; accel/loss.h).",
    options=[
        Option("reduction", str, "mean", "how the per-sample losses are reduced", choices=("mean", "sum", "none")),
        Option("label_smoothing", float, 0.0, "cross_entropy's label smoothing, in [0, 1]"),
        Option("ignore_index", int, -100, "the target class cross_entropy and nll ignore"),
    ])

TRAIN_STEP = Scope(
    "train step", "accel_train_step_new", area="train", header="training_options.hpp",
    function="train_step_option_scope", includes=("loss",),
    note="Train step keys (accel_train_step_new; accel/train_step.h), and the loss keys.",
    options=[
        Option("loss", str, "cross_entropy",
               "the loss the step computes (output: the model returns it)",
               choices=("cross_entropy", "nll", "mse", "l1", "bce_with_logits", "output")),
        Option("max_grad_norm", float, 0.0, "clip the gradients' total norm to this on sync steps; 0 = no clipping"),
        Option("norm_type", float, 2.0, "the norm max_grad_norm measures", positive=True),
        Option("cuda_graph", bool, False, "capture the step in a CUDA graph and replay it"),
        Option("cuda_graph_warmup", int, 3, "eager steps before the capture", positive=True),
    ])

TRACKERS = Scope(
    "trackers", "accel_state_init_trackers", area="tracking", header="trackers.hpp", function="trackers_option_scope",
    note="Tracker keys (accel_state_init_trackers; accel/tracking.h).",
    options=[
        Option("log_with", str, "jsonl,csv,tensorboard", "the trackers, comma-separated: jsonl, csv, tensorboard"),
        Option("overwrite", bool, False,
               "a run directory that holds records already is emptied first (else refused)"),
    ])

SCOPES = (STATE, LOADER, MODEL, OPTIMIZER, SCHEDULER, LOSS, TRAIN_STEP, TRACKERS)
