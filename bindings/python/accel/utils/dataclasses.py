"""accel.utils.dataclasses: Accelerate's configuration classes and enums, as accel implements them (see
accel.config for what each carries to the library)."""
import enum

from ..accelerator import DistributedType
from ..config import (DataLoaderConfiguration, DistributedDataParallelKwargs, GradientAccumulationPlugin,
                      GradScalerKwargs, InitProcessGroupKwargs, ProjectConfiguration)


class RNGType(str, enum.Enum):
    """The generators a loader syncs from the main process each epoch (Accelerator(rng_types=...))."""
    TORCH = "torch"
    CUDA = "cuda"
    GENERATOR = "generator"


class PrecisionType(str, enum.Enum):
    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"


class DDPCommunicationHookType(str, enum.Enum):
    """DistributedDataParallelKwargs(comm_hook=...): the gradient all-reduce in 16 bits, or not."""
    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"


__all__ = ["DataLoaderConfiguration", "DDPCommunicationHookType", "DistributedDataParallelKwargs", "DistributedType",
           "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs", "PrecisionType",
           "ProjectConfiguration", "RNGType"]
