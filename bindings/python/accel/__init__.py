"""accel: Hugging Face Accelerate's training loop on the accel C library (libaccel), through cffi.

    from accel import Accelerator, DataLoaderSpec, Dataset, OptimizerSpec, SchedulerSpec, compute_loss

or, as a drop-in for Hugging Face Accelerate on torch objects (nn.Module, torch optimizers, LR schedulers and
DataLoaders), the same module layout: accel.Accelerator, accel.PartialState, accel.state, accel.data_loader,
accel.utils (accel.utils.operations, accel.utils.dataclasses).

See bindings/python/README.md for the API and what differs from Accelerate.
"""
from .accelerator import Accelerator, DistributedType
from .config import (DataLoaderConfiguration, DeepSpeedPlugin, DistributedDataParallelKwargs,
                     GradientAccumulationPlugin, GradScalerKwargs, InitProcessGroupKwargs, ProjectConfiguration)
from .data_loader import DataLoader
from .dataset import Dataset
from .errors import (AccelEnvironmentError, AccelError, AccelIOError, AccelTimeoutError, BadOptionValueError,
                     CallbackError, DtypeError, InternalError, InvalidArgumentError, InvalidStateError,
                     NullArgumentError, OutOfMemoryError, OutOfRangeError, PeerFailedError, ShapeMismatchError,
                     TorchError, UnknownOptionError, UnsupportedError)
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

__version__ = version()

__all__ = [
    "Accelerator", "DistributedType", "DataLoaderConfiguration", "DeepSpeedPlugin", "DistributedDataParallelKwargs",
    "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs", "DataLoader", "Dataset",
    "AccelEnvironmentError",
    "AccelError", "AccelIOError", "AccelTimeoutError", "BadOptionValueError", "CallbackError", "DtypeError",
    "InternalError", "InvalidArgumentError", "InvalidStateError", "NullArgumentError", "OutOfMemoryError",
    "OutOfRangeError", "PeerFailedError", "ShapeMismatchError", "TorchError", "UnknownOptionError",
    "UnsupportedError", "compute_loss", "Model", "Optimizer", "Options", "ProgressBar", "Scheduler", "DataLoaderSpec",
    "OptimizerSpec", "SchedulerSpec", "Tensor", "TrainStep", "features", "has_feature", "torch_version", "version",
    "__version__", "PartialState", "AcceleratorState", "GradientState",
]
