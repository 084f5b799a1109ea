"""accel: Hugging Face Accelerate's training loop on the accel C library (libaccel), through cffi.

    from accel import Accelerator, DataLoaderSpec, Dataset, OptimizerSpec, SchedulerSpec, compute_loss

or, as a drop-in for Hugging Face Accelerate on torch objects (nn.Module, torch optimizers, LR schedulers and
DataLoaders), the same module layout: accel.Accelerator, accel.PartialState, accel.state, accel.data_loader,
accel.utils (accel.utils.operations, accel.utils.dataclasses).

See bindings/python/README.md for the API and what differs from Accelerate.
"""
from .accelerator import Accelerator, DistributedType
from .config import (DataLoaderConfiguration, DeepSpeedPlugin, DistributedDataParallelKwargs,
                     FullyShardedDataParallelPlugin, GradientAccumulationPlugin, GradScalerKwargs,
                     InitProcessGroupKwargs, ProjectConfiguration)
from .data_loader import DataLoader
from .dataset import Dataset
from .errors import (AccelEnvironmentError, AccelError, AccelIOError, AccelTimeoutError, BadOptionValueError,
                     CallbackError, DtypeError, InternalError, InvalidArgumentError, InvalidStateError,
                     NullArgumentError, OutOfMemoryError, OutOfRangeError, PeerFailedError, ShapeMismatchError,
                     TorchError, UnknownOptionError, UnsupportedError)
from .launchers import debug_launcher, notebook_launcher
from .losses import compute_loss
from .model import Model
from .optimizer import Optimizer
from .options import Options
from .progress import ProgressBar
from .scheduler import Scheduler
from .specs import DataLoaderSpec, OptimizerSpec, SchedulerSpec
from .state import AcceleratorState, GradientState, PartialState
from .tensor import Tensor
from .train_step import TrainStep
from .version import features, has_feature, torch_version, version
# Accelerate's top-level names from its utils and data_loader modules.
from .data_loader import skip_first_batches
from .kwargs_handlers import AutocastKwargs, ProfileKwargs
from .utils import DDPCommunicationHookType, find_executable_batch_size, is_rich_available, synchronize_rng_states

__version__ = version()

# Big-model loading needs torch: imported when first asked for, so that numpy-only programs never import torch.
_BIG_MODELING_NAMES = {
    **dict.fromkeys(["cpu_offload", "cpu_offload_with_hook", "disk_offload", "dispatch_model", "init_empty_weights",
                     "init_on_device", "load_checkpoint_and_dispatch"], "big_modeling"),
    **dict.fromkeys(["infer_auto_device_map", "load_checkpoint_in_model"], "utils.modeling"),
}


def __getattr__(name):
    if name in _BIG_MODELING_NAMES:
        import importlib
        return getattr(importlib.import_module(f".{_BIG_MODELING_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Accelerator", "DistributedType", "DataLoaderConfiguration", "DeepSpeedPlugin", "DistributedDataParallelKwargs",
    "FullyShardedDataParallelPlugin",
    "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs", "DataLoader", "Dataset",
    "AccelEnvironmentError",
    "AccelError", "AccelIOError", "AccelTimeoutError", "BadOptionValueError", "CallbackError", "DtypeError",
    "InternalError", "InvalidArgumentError", "InvalidStateError", "NullArgumentError", "OutOfMemoryError",
    "OutOfRangeError", "PeerFailedError", "ShapeMismatchError", "TorchError", "UnknownOptionError",
    "UnsupportedError", "compute_loss", "Model", "Optimizer", "Options", "ProgressBar", "Scheduler", "DataLoaderSpec",
    "OptimizerSpec", "SchedulerSpec", "Tensor", "TrainStep", "features", "has_feature", "torch_version", "version",
    "__version__", "PartialState", "AcceleratorState", "GradientState",
    "debug_launcher", "notebook_launcher",
    "skip_first_batches", "AutocastKwargs", "ProfileKwargs", "DDPCommunicationHookType", "find_executable_batch_size",
    "is_rich_available", "synchronize_rng_states",
    *_BIG_MODELING_NAMES,
]
