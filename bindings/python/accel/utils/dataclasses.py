"""accel.utils.dataclasses: Accelerate's configuration classes and enums, as accel implements them (see
accel.config for what each carries to the library)."""
import enum

from ..config import (DataLoaderConfiguration, DeepSpeedPlugin, DistributedDataParallelKwargs,
                      FullyShardedDataParallelPlugin, GradientAccumulationPlugin, GradScalerKwargs,
                      InitProcessGroupKwargs, ProjectConfiguration)
from ..kwargs_handlers import (AutocastKwargs, DynamoBackend, FP8RecipeKwargs, KwargsHandler, ProfileKwargs,
                               TorchDynamoPlugin)


class DistributedType(str, enum.Enum):
    """Accelerate's kinds of distributed run. accel's own runs are NO, MULTI_CPU or MULTI_GPU; the others
    name what Accelerate runs on (other devices, DeepSpeed itself, FSDP, TPUs, Megatron-LM), for code that
    compares with them."""

    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    MULTI_GPU = "MULTI_GPU"
    MULTI_NPU = "MULTI_NPU"
    MULTI_MLU = "MULTI_MLU"
    MULTI_MUSA = "MULTI_MUSA"
    MULTI_XPU = "MULTI_XPU"
    DEEPSPEED = "DEEPSPEED"
    FSDP = "FSDP"
    XLA = "XLA"
    MEGATRON_LM = "MEGATRON_LM"


class RNGType(str, enum.Enum):
    """The generators a loader syncs from the main process each epoch (Accelerator(rng_types=...))."""
    TORCH = "torch"
    CUDA = "cuda"
    GENERATOR = "generator"


class PrecisionType(str, enum.Enum):
    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"


class _NamesMembers(enum.EnumMeta):
    """`"tensorboard" in LoggerType`: whether a value names a member (as Accelerate's enums answer), where
    a plain Enum refuses anything but a member."""

    def __contains__(cls, item):
        try:
            cls(item)
        except ValueError:
            return False
        return True


class LoggerType(str, enum.Enum, metaclass=_NamesMembers):
    """The trackers Accelerator(log_with=...) may name (accel.tracking): ALL (every one available here),
    TENSORBOARD and accel's own JSONL and CSV, whose files the library writes; Accelerate's others (AIM,
    WANDB, COMETML, MLFLOW, CLEARML, DVCLIVE) are refused with UnsupportedError."""

    ALL = "all"
    AIM = "aim"
    TENSORBOARD = "tensorboard"
    WANDB = "wandb"
    COMETML = "comet_ml"
    MLFLOW = "mlflow"
    CLEARML = "clearml"
    DVCLIVE = "dvclive"
    JSONL = "jsonl"
    CSV = "csv"

    def __str__(self):
        return self.value

    @classmethod
    def list(cls):
        """Every member's value."""
        return [str(member) for member in cls]


class DDPCommunicationHookType(str, enum.Enum):
    """DistributedDataParallelKwargs(comm_hook=...): the gradient all-reduce in 16 bits, or not."""
    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"


__all__ = ["DataLoaderConfiguration", "DDPCommunicationHookType", "DeepSpeedPlugin", "DistributedDataParallelKwargs",
           "DistributedType", "FullyShardedDataParallelPlugin",
           "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs", "LoggerType",
           "PrecisionType", "ProjectConfiguration", "RNGType", "AutocastKwargs", "DynamoBackend", "FP8RecipeKwargs",
           "KwargsHandler", "ProfileKwargs", "TorchDynamoPlugin"]
