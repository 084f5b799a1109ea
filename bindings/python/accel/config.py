"""Accelerate's configuration objects, as far as the library implements them; each turns into library
options (None: not set, so the ACCEL_* environment or the library's default applies)."""
import dataclasses
import datetime
import functools
import os
import sys
import typing

from ._environment import str_to_bool
from ._library import lib
from .errors import UnsupportedError


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
    are split too (reduce-scattered); 3: the parameters too, each child of a torch module's root gathered
    around its forward and backward (accel._torch_sharded), the next unit's gather started as a unit's
    forward and backward begin (DeepSpeed prefetches by default too). Stages 1-3 step with accel's optimizer (an
    OptimizerSpec) or a torch optimizer over one prepared module, whose groups then hold this process's
    share of each parameter (accel._torch_zero; not with fp16 loss scaling); on one process they change
    nothing but offload. None reads ACCELERATE_DEEPSPEED_ZERO_STAGE, as Accelerate's, else DeepSpeed's default, 2.
    offload_param_device / offload_optimizer_device "cpu" (ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE,
    ..._OFFLOAD_OPTIMIZER_DEVICE; "none" by default) are the prepare option zero_cpu_offload. Under stage 3
    either keeps each process's shares of the parameters, their gradients and the optimizer state in host
    memory and steps them there (accel holds a parameter's share and its optimizer state together, so either
    offloads both); under stages 1 and 2 offload_optimizer_device keeps the optimizer's state in host memory and
    steps host copies of the process's elements there (ZeRO-Offload), the parameters staying whole on the
    device. offload_param_device under stages 1 and 2 (DeepSpeed's offload_param is stage 3's), either under
    stage 0, and "nvme": UnsupportedError."""

    zero_stage: int = None
    offload_optimizer_device: str = None  # Accelerate's order: the optimizer's device, then the parameters'
    offload_param_device: str = None

    def __post_init__(self):
        if self.zero_stage is None:  # what `accel launch` exports from a config file's deepspeed_config
            self.zero_stage = int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", 2))
        for field, variable in (("offload_param_device", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"),
                                ("offload_optimizer_device", "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE")):
            if getattr(self, field) is None:
                setattr(self, field, os.environ.get(variable, "none"))

    def options(self):
        offloaded = [field for field in ("offload_param_device", "offload_optimizer_device")
                     if str(getattr(self, field)).lower() != "none"]
        for field in offloaded:
            device = str(getattr(self, field)).lower()
            if device != "cpu":
                raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, f"DeepSpeedPlugin: {field} {device!r}: accel "
                                                                  "offloads to the CPU only")
            if self.zero_stage == 0 or (self.zero_stage < 3 and field == "offload_param_device"):
                raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
                    f"DeepSpeedPlugin: {field} 'cpu' with zero_stage {self.zero_stage}: the parameters are offloaded "
                    "under zero_stage 3, the optimizer under zero_stage 1, 2 and 3 (offload_optimizer_device)"))
        return {"zero_stage": self.zero_stage, "zero_cpu_offload": bool(offloaded)}


# FSDP's sharding strategies in torch's ShardingStrategy numbering (1-based), as Accelerate lists them.
FSDP_SHARDING_STRATEGY = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
# The strategies accel trains, and the ZeRO stage that gives each: NO_SHARD is data parallelism, SHARD_GRAD_OP
# shards gradients and optimizer state and keeps whole parameters, which is ZeRO-2; FULL_SHARD shards the
# parameters too, ZeRO-3.
_ZERO_STAGE_OF_STRATEGY = {"NO_SHARD": 0, "SHARD_GRAD_OP": 2, "FULL_SHARD": 3}
# The hybrid strategies shard as FULL_SHARD and SHARD_GRAD_OP do within each machine, and replicate between the
# machines (the prepare option zero_hybrid_shard).
_ZERO_STAGE_OF_HYBRID = {"HYBRID_SHARD": 3, "HYBRID_SHARD_ZERO2": 2}


FSDP_STATE_DICT_TYPE = ("FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT")
# torch's BackwardPrefetch in its numbering, and Accelerate's name for none.
FSDP_BACKWARD_PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH")


@dataclasses.dataclass
class CPUOffload:
    """torch.distributed.fsdp.CPUOffload's field, for FullyShardedDataParallelPlugin.cpu_offload where torch's own
    class cannot be had (no torch imported, or an FSDP that does not import)."""

    offload_params: bool = False


@functools.lru_cache(maxsize=None)
def _torch_cpu_offload():
    """torch's CPUOffload, or None: looked for only once torch is imported (the plugin does not need torch)."""
    if "torch" not in sys.modules:
        return None
    try:
        from torch.distributed.fsdp import CPUOffload as torch_cpu_offload
    except Exception:  # torch 1.13's FSDP fails to import on Python 3.11 (a ValueError from its dataclasses)
        return None
    return torch_cpu_offload


def _cpu_offload(offload_params):
    """cpu_offload given as a flag, as Accelerate's plugin holds it: a CPUOffload (torch's where it can)."""
    return (_torch_cpu_offload() or CPUOffload)(offload_params=offload_params)


def _env_flag(name):
    """An FSDP_* flag as Accelerate reads it (str_to_bool; unset is False)."""
    return str_to_bool(os.environ.get(name, "False")) == 1


_DTYPE_NAMES = {"bf16": ("bf16", "bfloat16", "torch.bfloat16"),
                "fp16": ("fp16", "float16", "half", "torch.float16"),
                "fp32": ("fp32", "float32", "float", "torch.float32")}


def _dtype_name(value, what):
    """A torch dtype or its name as the option value: "bf16", "fp16", "fp32"; None for None."""
    if value is None:
        return None
    for name, spellings in _DTYPE_NAMES.items():
        if str(value) in spellings:
            return name
    raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, f"FullyShardedDataParallelPlugin: mixed_precision_policy's "
                                                      f"{what} {value!r} is not bf16, fp16 or fp32")


def _policy_dtypes(policy):
    """FSDP's MixedPrecision (an object with its fields, or a dict of them) as (param, reduce, buffer) dtype
    names, FSDP's defaults applied: reduce_dtype follows param_dtype when not given."""
    def field(name):
        return policy.get(name) if isinstance(policy, dict) else getattr(policy, name, None)

    param = _dtype_name(field("param_dtype"), "param_dtype")
    reduce = _dtype_name(field("reduce_dtype"), "reduce_dtype") or param
    return param, reduce, _dtype_name(field("buffer_dtype"), "buffer_dtype")


def _named(value, names, what):
    """An enum member (torch's, with .name), a 1-based index (int or digits) or a name, as the name."""
    if hasattr(value, "name"):
        value = value.name
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        index = int(value)
        if not 1 <= index <= len(names):
            raise ValueError(f"{what} {index} is not one of 1..{len(names)} ({', '.join(names)})")
        return names[index - 1]
    if not isinstance(value, str) or value.upper() not in names:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(names)}")
    return value.upper()


@dataclasses.dataclass
class FullyShardedDataParallelPlugin:
    """Accelerate's FullyShardedDataParallelPlugin, with its fields and its FSDP_* environment (what `accel
    launch` exports from a config file's fsdp_config, as `accelerate launch` does). accel trains FULL_SHARD
    (FSDP's default) as ZeRO stage 3: parameters, gradients and optimizer state sharded, each unit of the
    wrap policy (auto_wrap_policy TRANSFORMER_BASED_WRAP with transformer_cls_names_to_wrap, SIZE_BASED_WRAP
    with min_num_params, a callable of torch's signature, NO_WRAP) gathered around its forward and backward
    (accel._torch_sharded), or with reshard_after_forward False kept from its forward to its backward (one
    gather a step, the whole model gathered at the end of forward); SHARD_GRAD_OP as ZeRO stage 2 (gradients and optimizer state sharded) and
    NO_SHARD as data parallelism; all with accel's optimizer or a torch one, giving DDP's weights bit for
    bit. HYBRID_SHARD and HYBRID_SHARD_ZERO2 shard as FULL_SHARD and SHARD_GRAD_OP within each machine and
    replicate between machines (every machine with as many processes), the gathers and reduce-scatters staying
    within a machine and only each shard's gradient sum crossing between them; on one machine they are
    FULL_SHARD and SHARD_GRAD_OP. mixed_precision_policy (FSDP's MixedPrecision, or a dict of its fields)
    under FULL_SHARD or HYBRID_SHARD: each unit
    gathered and computed in param_dtype, its gradients averaged in reduce_dtype (param_dtype's when not
    given), the fp32 shares the master weights; buffer_dtype casts the floating buffers for good (but
    BatchNorm's, as FSDP), get_state_dict giving them back in their former dtype. state_dict_type (FSDP2's
    default SHARDED_STATE_DICT, FSDP1's FULL_STATE_DICT, set_state_dict_type changing it for the next
    save_state): save_state writes each model whole (FULL_STATE_DICT) or as each process's piece of every
    tensor, in parallel (SHARDED_STATE_DICT, LOCAL_STATE_DICT), loaded by any number of processes either way;
    save_model and get_state_dict write the weights whole under any. cpu_offload (True, or FSDP's CPUOffload
    with offload_params): the prepare option zero_cpu_offload; under FULL_SHARD and HYBRID_SHARD each process's
    shares of the parameters, their gradients and the optimizer state held in host memory, where the optimizer
    steps them; under SHARD_GRAD_OP and HYBRID_SHARD_ZERO2 (ZeRO stage 2, whose parameters stay whole on the
    device) the optimizer's state, stepping host copies of the process's elements (NO_SHARD: UnsupportedError).
    activation_checkpointing recomputes
    in backward the activations of each module auto_wrap_policy wraps (torch.utils.checkpoint, non-reentrant, as
    Accelerate applies it), under every strategy. fsdp_version (Accelerate 1.x's; FSDP_VERSION) 1 and 2 train
    alike; under 1 a reshard_after_forward naming a sharding strategy (Accelerate 1.x's config files) is the
    strategy unless one is given. Under FULL_SHARD, forward_prefetch starts, as a unit's forward begins, the
    gather of the unit that came next in the previous forward, and backward_prefetch (BACKWARD_PRE,
    BACKWARD_POST; NO_PREFETCH, Accelerate's default, for none) the gather of the unit whose backward comes
    next, as a unit's backward begins or ends; one unit ahead at most, which is what limit_all_gathers asks
    (kept with no other effect). Parameters are always rank 0's after prepare (sync_module_states)."""

    sharding_strategy: typing.Any = None
    backward_prefetch: typing.Any = None
    mixed_precision_policy: typing.Any = None
    auto_wrap_policy: typing.Any = None
    cpu_offload: typing.Any = None
    ignored_modules: typing.Any = None
    state_dict_type: typing.Any = None
    state_dict_config: typing.Any = None
    optim_state_dict_config: typing.Any = None
    limit_all_gathers: bool = True
    use_orig_params: bool = None
    param_init_fn: typing.Any = None
    sync_module_states: bool = None
    forward_prefetch: bool = None
    activation_checkpointing: bool = None
    cpu_ram_efficient_loading: bool = None
    transformer_cls_names_to_wrap: typing.Any = None
    min_num_params: int = None
    reshard_after_forward: bool = None
    fsdp_version: int = None

    def __post_init__(self):
        if self.fsdp_version is None:  # Accelerate 1.x's field; FSDP_VERSION is what its launcher exports
            self.fsdp_version = int(os.environ.get("FSDP_VERSION", "1"))
        if self.fsdp_version not in (1, 2):
            raise ValueError(f"fsdp_version must be 1 or 2, not {self.fsdp_version!r}")
        strategy_given = self.sharding_strategy is not None or "FSDP_SHARDING_STRATEGY" in os.environ
        if self.sharding_strategy is None:
            self.sharding_strategy = os.environ.get("FSDP_SHARDING_STRATEGY", "FULL_SHARD")
        self.sharding_strategy = _named(self.sharding_strategy, FSDP_SHARDING_STRATEGY, "sharding_strategy")
        if self.cpu_offload is None:
            self.cpu_offload = _env_flag("FSDP_OFFLOAD_PARAMS")
        if isinstance(self.cpu_offload, bool):
            self.cpu_offload = _cpu_offload(self.cpu_offload)
        self.set_state_dict_type(self.state_dict_type)
        if self.backward_prefetch is None:
            self.backward_prefetch = os.environ.get("FSDP_BACKWARD_PREFETCH", "NO_PREFETCH")
        self.backward_prefetch = _named(self.backward_prefetch, FSDP_BACKWARD_PREFETCH, "backward_prefetch")
        if self.backward_prefetch == "NO_PREFETCH":
            self.backward_prefetch = None
        if self.auto_wrap_policy is None:
            self.auto_wrap_policy = os.environ.get("FSDP_AUTO_WRAP_POLICY", "NO_WRAP")
        if self.transformer_cls_names_to_wrap is None and "FSDP_TRANSFORMER_CLS_TO_WRAP" in os.environ:
            self.transformer_cls_names_to_wrap = os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"]
        if isinstance(self.transformer_cls_names_to_wrap, str):
            self.transformer_cls_names_to_wrap = self.transformer_cls_names_to_wrap.split(",")
        if self.min_num_params is None and "FSDP_MIN_NUM_PARAMS" in os.environ:
            self.min_num_params = int(os.environ["FSDP_MIN_NUM_PARAMS"])
        for field, variable in (("use_orig_params", "FSDP_USE_ORIG_PARAMS"),
                                ("sync_module_states", "FSDP_SYNC_MODULE_STATES"),
                                ("forward_prefetch", "FSDP_FORWARD_PREFETCH"),
                                ("activation_checkpointing", "FSDP_ACTIVATION_CHECKPOINTING"),
                                ("cpu_ram_efficient_loading", "FSDP_CPU_RAM_EFFICIENT_LOADING")):
            if getattr(self, field) is None:
                setattr(self, field, _env_flag(variable))
        if self.reshard_after_forward is None:  # Accelerate 1.x's field, true unless said otherwise
            self.reshard_after_forward = os.environ.get("FSDP_RESHARD_AFTER_FORWARD", "true")
        self._read_reshard_after_forward(strategy_given)

    def _read_reshard_after_forward(self, strategy_given):
        """Accelerate 1.x's reshard_after_forward: a bool (FSDP2's, and text like "false"), or under fsdp_version
        1 a sharding strategy (its name, number or torch's member), which then is the strategy unless one was
        given, the unit resharded after its forward as that strategy does."""
        value = self.reshard_after_forward
        if isinstance(value, bool):
            return
        name = str(getattr(value, "name", value)).upper()
        if self.fsdp_version == 1 and (name in FSDP_SHARDING_STRATEGY or name.isdigit()):
            if not strategy_given:
                self.sharding_strategy = _named(value, FSDP_SHARDING_STRATEGY, "reshard_after_forward")
            self.reshard_after_forward = True
            return
        self.reshard_after_forward = str_to_bool(name.lower()) == 1
    def zero_stage(self):
        """The ZeRO stage that trains this plugin's strategy; UnsupportedError, naming the setting, for
        what accel does not train (see the class)."""
        def refuse(what):
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, f"FullyShardedDataParallelPlugin: {what}")

        if self.offloads() and self.sharding_strategy == "NO_SHARD":
            refuse("cpu_offload with sharding_strategy NO_SHARD: accel offloads each process's share of the model, "
                   "and NO_SHARD splits nothing (SHARD_GRAD_OP offloads the optimizer, FULL_SHARD the parameters too)")
        if self.activation_checkpointing and (self.auto_wrap_policy in (None, "NO_WRAP")):
            refuse("activation_checkpointing recomputes the modules auto_wrap_policy wraps, and NO_WRAP wraps none: "
                   "give TRANSFORMER_BASED_WRAP (transformer_cls_names_to_wrap), SIZE_BASED_WRAP or a callable")
        if self.mixed_precision_policy is not None and self.sharding_strategy not in ("FULL_SHARD", "HYBRID_SHARD"):
            refuse(f"mixed_precision_policy with sharding_strategy {self.sharding_strategy}: it is built for "
                   "FULL_SHARD (units gathered in param_dtype); here the Accelerator's mixed_precision applies")
        return {**_ZERO_STAGE_OF_STRATEGY, **_ZERO_STAGE_OF_HYBRID}[self.sharding_strategy]

    def offloads(self):
        """Whether cpu_offload asks for the parameters (and so the optimizer step) on the CPU."""
        return bool(getattr(self.cpu_offload, "offload_params", self.cpu_offload))

    def precision(self):
        """mixed_precision_policy's (param, reduce, buffer) dtype names ("bf16", "fp16", "fp32" or None)."""
        return (None, None, None) if self.mixed_precision_policy is None else _policy_dtypes(self.mixed_precision_policy)

    def options(self):
        """The prepare options of this plugin (FSDP1 and FSDP2, fsdp_version, train alike)."""
        param, reduce, _ = self.precision()
        return {"zero_stage": self.zero_stage(), "zero_param_dtype": param or "auto",
                "zero_reduce_dtype": reduce or "auto",
                "zero_hybrid_shard": self.sharding_strategy in _ZERO_STAGE_OF_HYBRID,
                "zero_cpu_offload": self.offloads(), "checkpoint_model": self.checkpoint_model()}

    def checkpoint_model(self):
        """How save_state writes a model under state_dict_type: FULL_STATE_DICT one whole file (process 0),
        SHARDED_STATE_DICT and LOCAL_STATE_DICT each process's piece of every tensor, written in parallel
        (under FULL_SHARD its shares: nothing is gathered), either loaded by any number of processes."""
        return "whole" if self.state_dict_type == "FULL_STATE_DICT" else "sharded"

    def set_state_dict_type(self, state_dict_type=None):
        """Accelerate 1.x's: state_dict_type from now on (None: FSDP_STATE_DICT_TYPE, else fsdp_version's
        default: Accelerate 1.x's, FSDP2's being SHARDED_STATE_DICT), read by the next save_state; save_model and get_state_dict write the weights whole under any."""
        if state_dict_type is None:
            state_dict_type = os.environ.get("FSDP_STATE_DICT_TYPE",
                                             "FULL_STATE_DICT" if self.fsdp_version == 1 else "SHARDED_STATE_DICT")
        state_dict_type = _named(state_dict_type, FSDP_STATE_DICT_TYPE, "state_dict_type")
        if self.fsdp_version == 2 and state_dict_type == "LOCAL_STATE_DICT":
            raise ValueError("FSDP2 has no LOCAL_STATE_DICT: give state_dict_type SHARDED_STATE_DICT or FULL_STATE_DICT")
        self.state_dict_type = state_dict_type


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
