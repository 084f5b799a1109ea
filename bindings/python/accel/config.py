"""Accelerate's configuration objects, as far as the library implements them; each turns into library
options (None: not set, so the ACCEL_* environment or the library's default applies)."""
import dataclasses
import datetime


@dataclasses.dataclass
class DataLoaderConfiguration:
    """How every loader the Accelerator prepares deals its batches (loader options of capi/accel/options.h).
    dispatch_batches None is "auto": dispatch for iterable datasets only. use_stateful_dataloader: save_state
    also holds each prepared torch DataLoader's place in its epoch, and load_state resumes there (every
    library loader can; Accelerate needs torchdata's StatefulDataLoader). Without it, as in Accelerate, a
    script resumes mid-epoch with skip_first_batches."""

    split_batches: bool = None
    dispatch_batches: bool = None
    even_batches: bool = None
    use_seedable_sampler: bool = None
    data_seed: int = None
    non_blocking: bool = None
    use_stateful_dataloader: bool = None

    def options(self):
        settings = dataclasses.asdict(self)
        # Not a library setting: the Accelerator decides which loaders its checkpoints hold.
        del settings["use_stateful_dataloader"]
        if self.dispatch_batches is not None:  # a string key: "auto", "true" or "false"
            settings["dispatch_batches"] = "true" if self.dispatch_batches else "false"
        return settings


@dataclasses.dataclass
class ProjectConfiguration:
    """Accelerate's ProjectConfiguration. project_dir: where numbered checkpoints go,
    project_dir/checkpoints/checkpoint_<iteration>; logging_dir: where file-writing trackers write
    (accel.tracking; default project_dir). automatic_checkpoint_naming: save_state() writes the next numbered
    checkpoint whatever folder it is given, as in Accelerate (without it, save_state() with no folder does
    the same, where Accelerate fails). total_limit: numbered checkpoints kept (None or 0: all), the oldest
    removed just before the new one moves into place, so that no process ever sees more. iteration: the
    number of the next numbered checkpoint, which the Accelerator keeps current (one more after each numbered
    save, the loaded one's + 1 after a load from a numbered folder). save_on_each_node: Accelerate's flag for
    node-local disks; accel writes each checkpoint once, into one folder every node must see."""

    project_dir: str = None
    logging_dir: str = None
    automatic_checkpoint_naming: bool = False
    total_limit: int = None
    iteration: int = 0
    save_on_each_node: bool = False

    def set_directories(self, project_dir=None):
        """Sets project_dir, and logging_dir to it unless logging_dir is set."""
        self.project_dir = project_dir
        if self.logging_dir is None:
            self.logging_dir = project_dir

    def __post_init__(self):
        self.set_directories(self.project_dir)

    def options(self):
        return {"project_dir": None if self.project_dir is None else str(self.project_dir),
                "total_limit": self.total_limit}


@dataclasses.dataclass
class GradientAccumulationPlugin:
    """num_steps: batches per optimizer step; sync_with_dataloader: the last batch of a loader always
    steps; sync_each_batch: all-reduce on every backward even while accumulating (saves memory)."""

    num_steps: int = None
    sync_with_dataloader: bool = None
    sync_each_batch: bool = None

    def options(self):
        return {"gradient_accumulation_steps": self.num_steps, "sync_with_dataloader": self.sync_with_dataloader,
                "sync_each_batch": self.sync_each_batch}


@dataclasses.dataclass
class DistributedDataParallelKwargs:
    """Options of every model the Accelerator prepares. first_bucket_mb is accel's (torch DDP's first
    bucket size, fixed there). gradient_as_bucket_view: the averaged gradients are views into the buckets
    (no copy back); static_graph: parameters without gradient are allowed while they are the same ones in
    every backward. comm_hook: "no", "fp16" or "bf16" (or Accelerate's DDPCommunicationHookType of those
    values), the model option grad_compression: buckets all-reduced in 16 bits."""

    find_unused_parameters: bool = None
    bucket_cap_mb: int = None
    first_bucket_mb: int = None
    broadcast_buffers: bool = None
    gradient_as_bucket_view: bool = None
    static_graph: bool = None
    comm_hook: str = None

    def options(self):
        options = dataclasses.asdict(self)
        hook = options.pop("comm_hook")
        options["grad_compression"] = getattr(hook, "value", hook)  # an enum gives its value
        return options


@dataclasses.dataclass
class DeepSpeedPlugin:
    """Accelerate's DeepSpeedPlugin as far as accel implements it: ZeRO's stage, the model option zero_stage
    of every model the Accelerator prepares. 0: data parallel; 1: each process keeps the optimizer state of
    and steps only its share of the parameters, then the updated parameters are gathered; 2: the gradients
    are split too (reduce-scattered). Stages 1 and 2 step with accel's optimizer (an OptimizerSpec) or a
    torch optimizer over one prepared module, whose groups then hold this process's share of each parameter
    (accel._torch_zero; not with fp16 loss scaling); on one process they change nothing. None is DeepSpeed's
    default, 2."""

    zero_stage: int = None

    def options(self):
        return {"zero_stage": 2 if self.zero_stage is None else self.zero_stage}


@dataclasses.dataclass
class InitProcessGroupKwargs:
    """backend: "gloo" or "nccl" (None: gloo on the CPU, nccl on CUDA); timeout of the rendezvous and of
    every collective."""

    backend: str = None
    timeout: datetime.timedelta = None

    def options(self):
        return {"backend": self.backend,
                "timeout_s": None if self.timeout is None else self.timeout.total_seconds()}


@dataclasses.dataclass
class GradScalerKwargs:
    """torch's GradScaler arguments for fp16 (state settings init_scale, growth_factor, backoff_factor,
    growth_interval, grad_scaler_enabled); enabled=False runs fp16 without loss scaling."""

    init_scale: float = None
    growth_factor: float = None
    backoff_factor: float = None
    growth_interval: int = None
    enabled: bool = None

    def options(self):
        return {"init_scale": self.init_scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "grad_scaler_enabled": self.enabled}
