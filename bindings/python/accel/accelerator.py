"""accel.Accelerator: Hugging Face Accelerate's Accelerator over the library's process state.

The same script runs on one process or, started by `accel launch`, on many: prepare() places the model
and gives each rank its batches, backward() averages gradients over the ranks on the steps that
synchronise, and the collectives combine tensors across the ranks.
"""
import contextlib
import enum
import io
import itertools
import os
import pickle
import shutil
import sys
import warnings

import numpy as np

from . import _nested
from . import state as state_module
from . import tracking
from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .config import (DataLoaderConfiguration, DeepSpeedPlugin, DistributedDataParallelKwargs,  # noqa: F401
                     GradientAccumulationPlugin, GradScalerKwargs, InitProcessGroupKwargs, ProjectConfiguration)
from .data_loader import DataLoader
from .dataset import Dataset
from .errors import UnsupportedError, check, check_collective
from .kwargs_handlers import AutocastKwargs, ProfileKwargs
from .model import Model
from .optimizer import Optimizer
from .train_step import TrainStep
from .options import Options, resolved_value
from .scheduler import Scheduler
from .specs import DataLoaderSpec, OptimizerSpec, SchedulerSpec
from .tensor import Tensor, _is_torch_tensor, lent, lent_all, returned_like
from ._sizes import convert_file_size_to_int


def _size_in_bytes(size):
    """max_shard_size in bytes (accel._sizes), refusing 0."""
    try:
        value = convert_file_size_to_int(size)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"max_shard_size {size!r} is not a positive number of bytes: give an int or a string "
                         "with a unit, such as '10GB' or '500MiB'")
    return value


class Device(str):
    """A device name ("cpu", "cuda:1") that also reads as torch.device does (.type, .index), so Accelerate
    code such as `accelerator.device.type` or `x.to(accelerator.device)` runs unchanged without torch."""

    @property
    def type(self):
        return self.partition(":")[0]

    @property
    def index(self):
        _, _, index = self.partition(":")
        return int(index) if index else None


def _writable(value, what):
    """The collectives that write into the caller's array refuse a read-only one, saying so."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        raise ValueError(f"{what} writes into the array, and this one is read-only (as np.from_dlpack results "
                         "are): pass a copy")


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


_DISTRIBUTED_TYPES = {
    lib.ACCEL_DISTRIBUTED_NO: DistributedType.NO,
    lib.ACCEL_DISTRIBUTED_MULTI_CPU: DistributedType.MULTI_CPU,
    lib.ACCEL_DISTRIBUTED_MULTI_GPU: DistributedType.MULTI_GPU,
}

# prepare() builds in this order whatever the argument order: optimizers need their prepared model,
# schedulers their optimizer.
_PREPARE_ORDER = ("model", "torch_model", "loader", "torch_loader", "optimizer", "torch_optimizer", "scheduler",
                  "torch_scheduler")


def _kind_of(value):
    """What prepare makes of value: one of _PREPARE_ORDER, or None for what it gives back untouched."""
    if isinstance(value, (DataLoaderSpec, Dataset)):
        return "loader"
    if isinstance(value, OptimizerSpec):
        return "optimizer"
    if isinstance(value, SchedulerSpec):
        return "scheduler"
    if isinstance(value, (Model, str, bytes, bytearray, memoryview, os.PathLike)):
        return "model"
    if "torch" in sys.modules:
        from . import _torch_objects
        return _torch_objects.kind_of(value)
    return None


_KIND_WORDS = {"model": "a model", "torch_model": "a model", "loader": "a data loader", "torch_loader": "a data loader",
               "optimizer": "an optimizer", "torch_optimizer": "an optimizer", "scheduler": "a scheduler",
               "torch_scheduler": "a scheduler"}
# Where torch's public names for its classes live, to name a class as users write it (torch.optim.SGD).
_TORCH_NAMESPACES = ("torch.optim", "torch.optim.lr_scheduler", "torch.nn", "torch.utils.data")


def _public_name(cls):
    if cls.__module__.split(".")[0] == "torch":
        for namespace in _TORCH_NAMESPACES:
            if getattr(sys.modules.get(namespace), cls.__name__, None) is cls:
                return f"{namespace}.{cls.__name__}"
    if cls.__module__.split(".")[0] == "accel":
        return f"accel.{cls.__name__}"
    return cls.__qualname__


def describe_kind(value):
    """What value is, for messages: "torch.optim.SGD (an optimizer)", "accel.Model (a model)"."""
    kind = _kind_of(value)
    for cls, accel_kind in ((Optimizer, "optimizer"), (Scheduler, "scheduler"), (DataLoader, "loader")):
        if isinstance(value, cls):
            kind = accel_kind
    what = _KIND_WORDS.get(kind)
    return f"{_public_name(type(value))} ({what})" if what else f"a {_public_name(type(value))}"


def _with_deprecated_loader_flags(dataloader_config, **flags):
    """Accelerate's deprecated Accelerator arguments for the loaders, moved into a DataLoaderConfiguration."""
    given = {name: value for name, value in flags.items() if value is not None}
    if not given:
        return dataloader_config
    if dataloader_config is not None:
        raise ValueError(f"Passing {', '.join(given)} to the Accelerator beside a dataloader_config is not "
                         "supported: set them in the DataLoaderConfiguration")
    warnings.warn(f"Passing {', '.join(given)} to the Accelerator is deprecated: pass an "
                  "`accelerate.DataLoaderConfiguration` instead", FutureWarning)
    return DataLoaderConfiguration(**given)


def _unpickled_accelerator(arguments):
    """An Accelerator made again from a pickled one's arguments. The process's current Accelerator (if one
    lives) stays the one PartialState() answers for: the copy may go away sooner."""
    current = state_module._live_accelerator()
    accelerator = Accelerator(**arguments)
    if current is not None:
        state_module._register(current)
    return accelerator


class Accelerator(Handle):
    _free = lib.accel_state_free

    def __init__(self, device_placement=None, split_batches=None, mixed_precision=None,
                 gradient_accumulation_steps=None, cpu=None, dataloader_config=None, deepspeed_plugin=None,
                 fsdp_plugin=None, megatron_lm_plugin=None, rng_types=None, log_with=None, project_dir=None,
                 project_config=None, gradient_accumulation_plugin=None, dispatch_batches=None, even_batches=None,
                 use_seedable_sampler=None, step_scheduler_with_optimizer=None, kwargs_handlers=None,
                 dynamo_backend=None, *, device=None):
        """Joins (or creates) the process state: reads how the process was launched and, with several
        processes, meets the others. None leaves a setting to the ACCEL_* environment, then the default.

        mixed_precision: "no", "fp16" or "bf16". cpu: use the CPU even when CUDA is present. device: an
        explicit device ("cpu", "cuda:1"). dataloader_config: a DataLoaderConfiguration for every prepared
        loader. gradient_accumulation_plugin: a GradientAccumulationPlugin, instead of
        gradient_accumulation_steps. kwargs_handlers: DistributedDataParallelKwargs (for prepared models)
        and InitProcessGroupKwargs (backend, timeout). project_config: a ProjectConfiguration (numbered
        checkpoints); project_dir, when given, overrides its project_dir. step_scheduler_with_optimizer
        False: every scheduler.step() is one step, whatever the optimizer did (default True: after each
        real optimizer step, once per process unless split_batches). device_placement False: batches
        stay where the dataset made them (models always go to the device). rng_types: the generators
        every process takes from the main one when a loader starts an epoch, among "generator" (the
        loader's shuffling generator, the default), "torch" and "cuda" (torch's default ones).
        dynamo_backend: only "no" (LibTorch has no TorchDynamo; anything else is UnsupportedError).
        deepspeed_plugin: a DeepSpeedPlugin (or a dict of its fields), whose zero_stage every prepared model
        takes (ZeRO stages 1 and 2; refused for a model trained by torch's own optimizer).
        kwargs_handlers also takes GradScalerKwargs. log_with: the trackers init_trackers starts
        (accel.tracking: "tensorboard", "jsonl", "csv", "all", LoggerType values, GeneralTracker objects or a
        list of them; None: none), writing under logging_dir (project_config's, else project_dir).

        Accelerate's order of arguments; its deprecated split_batches, dispatch_batches, even_batches and
        use_seedable_sampler go into the DataLoaderConfiguration (a FutureWarning; a ValueError beside a
        dataloader_config). fsdp_plugin and megatron_lm_plugin: UnsupportedError (this library has no FSDP
        or Megatron-LM yet). device (accel's, keyword only): an explicit device.

        A process has one state: while one lives, another Accelerator must ask for the same settings
        (InvalidStateError otherwise); after end_training() or AcceleratorState._reset_state() a new one may
        change them."""
        # What unpickling makes an Accelerator again from (see __reduce__).
        self._arguments = {name: value for name, value in locals().items() if name not in ("self", "__class__")}
        for name, plugin in (("fsdp_plugin", fsdp_plugin), ("megatron_lm_plugin", megatron_lm_plugin)):
            if plugin is not None:
                raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                                       f"{name}: this library has no {name[:-7].replace('_', '-').upper()} "
                                       "engine; DeepSpeedPlugin(zero_stage=1|2) shards optimizer state and "
                                       "gradients")
        dataloader_config = _with_deprecated_loader_flags(dataloader_config, split_batches=split_batches,
                                                          dispatch_batches=dispatch_batches, even_batches=even_batches,
                                                          use_seedable_sampler=use_seedable_sampler)
        kwargs_handlers = kwargs_handlers or ()
        settings = {"mixed_precision": mixed_precision, "use_cpu": cpu, "device": device,
                    "gradient_accumulation_steps": gradient_accumulation_steps,
                    "step_scheduler_with_optimizer": step_scheduler_with_optimizer, "dynamo_backend": dynamo_backend,
                    "rng_types": rng_types if rng_types is None or isinstance(rng_types, str) else ",".join(rng_types)}
        if gradient_accumulation_plugin is not None:
            if gradient_accumulation_steps is not None:
                raise ValueError("give gradient_accumulation_steps or gradient_accumulation_plugin, not both")
            settings.update(gradient_accumulation_plugin.options())
        # As Accelerate: project_dir names the project when project_config does not.
        self.project_configuration = project_config if project_config is not None else ProjectConfiguration()
        if project_dir is not None and self.project_configuration.project_dir is None:
            self.project_configuration.set_directories(project_dir)
        settings.update(self.project_configuration.options())
        self._model_settings = {}
        self.autocast_handler = self.profile_handler = None  # for torch code: autocast() and profile()
        for handler in kwargs_handlers:
            if isinstance(handler, (InitProcessGroupKwargs, GradScalerKwargs)):
                settings.update(handler.options())
            elif isinstance(handler, DistributedDataParallelKwargs):
                self._model_settings.update(handler.options())
            elif isinstance(handler, (AutocastKwargs, ProfileKwargs)):
                slot = "autocast_handler" if isinstance(handler, AutocastKwargs) else "profile_handler"
                if getattr(self, slot) is not None:
                    raise ValueError(f"You can only pass one `{type(handler).__name__}` in `kwargs_handler`.")
                setattr(self, slot, handler)
            else:
                raise TypeError(f"unsupported kwargs handler {type(handler).__name__}")
        if deepspeed_plugin is not None:
            if isinstance(deepspeed_plugin, dict):
                deepspeed_plugin = DeepSpeedPlugin(**deepspeed_plugin)
            self._model_settings.update(deepspeed_plugin.options())
        self._logging_dir = tracking.logging_dir_of(project_config, project_dir)
        self.log_with, self.trackers = tracking.filter_trackers(log_with, self._logging_dir), []
        # Kept: the settings the library has no getter for (step_scheduler_with_optimizer, rng_types, ...)
        # are read back from what these options resolve to.
        self._state_options = Options(state_module._join_live_state(settings))
        out = ffi.new("accel_state_t **")
        check(lib.accel_state_new(out, self._state_options.pointer))
        super().__init__(out[0])
        self._loader_settings = {**(dataloader_config or DataLoaderConfiguration()).options(),
                                 "device_placement": device_placement}
        self._models, self._loaders, self._optimizers, self._schedulers = [], [], [], []
        self._dataloaders = []  # what prepare gave for each data loader, in order (Accelerate's list)
        self._custom_objects = []  # register_for_checkpointing's, in registration order
        self._save_state_pre_hooks, self._load_state_pre_hooks = {}, {}  # handle id -> hook, in registration order
        self._trigger = False  # set_trigger's flag until check_trigger reads it
        self._state_was_reset = False  # set by AcceleratorState._reset_state()
        self._checkpoint_callbacks = Callbacks()  # their save and load callbacks, alive as long as self
        self._torch_objects = None  # accel._torch_objects.TorchObjects, once a torch object is prepared
        self._active_loaders = []  # prepared torch DataLoaders in an epoch, innermost last
        state_module._register(self)
        self.dataloader_config = dataloader_config or DataLoaderConfiguration()

    # --- the process ------------------------------------------------------------------------------------

    @property
    def num_processes(self):
        return lib.accel_state_num_processes(self.pointer)

    @property
    def process_index(self):
        return lib.accel_state_process_index(self.pointer)

    @property
    def local_process_index(self):
        return lib.accel_state_local_process_index(self.pointer)

    @property
    def num_local_processes(self):
        """Processes on this machine."""
        return lib.accel_state_num_local_processes(self.pointer)

    @property
    def is_main_process(self):
        return bool(lib.accel_state_is_main_process(self.pointer))

    @property
    def is_local_main_process(self):
        return bool(lib.accel_state_is_local_main_process(self.pointer))

    @property
    def is_last_process(self):
        return bool(lib.accel_state_is_last_process(self.pointer))

    @property
    def distributed_type(self):
        return _DISTRIBUTED_TYPES[lib.accel_state_distributed_type(self.pointer)]

    @property
    def device(self):
        """"cpu" or "cuda:<n>": a string (torch is not needed to use the library) with torch.device's .type
        and .index."""
        return Device(ffi.string(lib.accel_state_device(self.pointer)).decode())

    @property
    def mixed_precision(self):
        """"no", "fp16" or "bf16"."""
        return ffi.string(lib.accel_state_mixed_precision(self.pointer)).decode()

    @property
    def backend(self):
        """"gloo", "nccl", or "" with one process; "gloo+shm" when all-reduces go through shared memory,
        "gloo+hier-shm" when through each node's and then between the nodes' leaders."""
        return ffi.string(lib.accel_state_backend(self.pointer)).decode()

    @property
    def is_broken(self):
        """True once a collective timed out or lost a peer: later collectives fail at once."""
        return bool(lib.accel_state_is_broken(self.pointer))

    @property
    def gradient_accumulation_steps(self):
        return int(lib.accel_state_gradient_accumulation_steps(self.pointer))

    @property
    def state(self):
        """Accelerate's AcceleratorState (accel.state): the process and the Accelerator's settings."""
        return state_module.AcceleratorState()

    @property
    def gradient_state(self):
        return state_module.GradientState()

    @property
    def use_distributed(self):
        return self.num_processes > 1

    @property
    def split_batches(self):
        return bool(self.dataloader_config.split_batches)

    @property
    def even_batches(self):
        return self.dataloader_config.even_batches is not False

    @property
    def _step_scheduler_with_optimizer(self):
        return resolved_value(self._state_options, "state", "step_scheduler_with_optimizer") == "true"

    @property
    def _loss_scaling(self):
        """Whether losses are scaled (fp16 with the grad scaler on)."""
        return (self.mixed_precision == "fp16"
                and resolved_value(self._state_options, "state", "grad_scaler_enabled") == "true")

    def __repr__(self):
        if self.closed:
            return "accel.Accelerator(closed)"
        kind = ffi.string(lib.accel_state_distributed_type_name(self.pointer)).decode()
        return (f"accel.Accelerator({kind}, process {self.process_index} of {self.num_processes}, "
                f"device={self.device}, mixed_precision={self.mixed_precision})")

    def wait_for_everyone(self):
        """A barrier across every process."""
        check(lib.accel_state_wait_for_everyone(self.pointer))

    def set_seed(self, seed, device_specific=False):
        """Accelerate's set_seed: torch's default CPU (and CUDA) generators of this process, seeded with
        seed, plus the process index when device_specific. Python's random and numpy are not seeded."""
        check(lib.accel_state_set_seed(self.pointer, seed, int(bool(device_specific))))

    @contextlib.contextmanager
    def _goes_first(self, begin, end):
        check(begin(self.pointer))
        try:
            yield
        finally:
            # Even when the block failed: the other ranks wait for the first one in their begin.
            check(end(self.pointer))

    def main_process_first(self):
        """`with accelerator.main_process_first():` the main process runs the block, then the others."""
        return self._goes_first(lib.accel_state_main_process_first_begin, lib.accel_state_main_process_first_end)

    def local_main_process_first(self):
        """The same with the main process of each machine going first."""
        return self._goes_first(lib.accel_state_local_main_process_first_begin,
                                lib.accel_state_local_main_process_first_end)

    @contextlib.contextmanager
    def split_between_processes(self, inputs, apply_padding=False):
        """`with accelerator.split_between_processes(inputs) as mine:` this process's contiguous share of a
        list, tuple, string, numpy array, torch tensor or dict of those (every value split alike), the first
        len % num_processes ranks getting one more; apply_padding repeats the last item so every rank has as
        many."""
        yield self._split(inputs, apply_padding)

    def _split(self, inputs, apply_padding):
        if isinstance(inputs, dict):
            lengths = {len(value) for value in inputs.values()}
            if len(lengths) > 1:
                raise ValueError("split_between_processes: every value of the dict needs the same length")
            return {key: self._split(value, apply_padding) for key, value in inputs.items()}
        if isinstance(inputs, (np.ndarray, Tensor)) or _is_torch_tensor(inputs):
            out = ffi.new("accel_tensor_t **")
            with lent(inputs) as tensor:
                check(lib.accel_state_split_tensor(self.pointer, tensor.pointer, int(bool(apply_padding)), out))
            return returned_like(Tensor(out[0]), inputs)
        first, count, padded = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        check(lib.accel_state_split_range(self.pointer, len(inputs), first, count, padded))
        share = inputs[first[0]:first[0] + count[0]]
        if apply_padding and count[0] < padded[0] and len(inputs) > 0:
            share = share + inputs[-1:] * (padded[0] - count[0])
        return share

    def send_to_device(self, tensor, non_blocking=False):
        """The tensor (numpy array or torch tensor) on this process's device: the same memory when it is
        already there (Accelerate's send_to_device)."""
        out = ffi.new("accel_tensor_t **")
        with lent(tensor) as lent_tensor:
            check(lib.accel_state_send_to_device(self.pointer, lent_tensor.pointer, int(bool(non_blocking)), out))
        return returned_like(Tensor(out[0]), tensor)

    def print(self, *args, **kwargs):
        """print() on the main process of each machine only (Accelerate's PartialState.print), above the
        progress bar when one is drawn."""
        text = io.StringIO()
        print(*args, file=text, **kwargs)
        check(lib.accel_state_print(self.pointer, text.getvalue().rstrip("\n").encode()))

    # Accelerate's decorators: the function runs only on the processes named, returning None elsewhere.
    def on_main_process(self, function):
        return state_module.PartialState().on_main_process(function)

    def on_local_main_process(self, function):
        return state_module.PartialState().on_local_main_process(function)

    def on_last_process(self, function):
        return state_module.PartialState().on_last_process(function)

    def on_process(self, function=None, process_index=None):
        return state_module.PartialState().on_process(function, process_index)

    def on_local_process(self, function=None, local_process_index=None):
        return state_module.PartialState().on_local_process(function, local_process_index)

    # --- trackers ---------------------------------------------------------------------------------------

    @property
    def logging_dir(self):
        """Where the trackers that write files write (in logging_dir/project_name): the ProjectConfiguration's
        logging_dir, which defaults to its project_dir, else project_dir."""
        return self._logging_dir

    def init_trackers(self, project_name, config=None, init_kwargs={}):
        """Starts every tracker log_with chose (accel.tracking): the library's files (tensorboard, jsonl,
        csv) in logging_dir/project_name, on the main process; config (a dict) goes to each tracker's
        store_init_configuration (the library writes config.json); init_kwargs[name]: keywords for the
        tracker called name (the library's take overwrite=True: remove what an earlier run logged there,
        instead of resuming after its last step)."""
        self.trackers = tracking.start_trackers(self, project_name, config, init_kwargs)

    def get_tracker(self, name, unwrap=False):
        """The tracker called name (its .tracker when unwrap; for the library's trackers, the run that writes
        their files); ValueError if there is none of that name. Off the main process, where there are no
        trackers, a GeneralTracker that does nothing."""
        return tracking.find_tracker(self.trackers, name, unwrap)

    def log(self, values, step=None, log_kwargs={}):
        """Logs values (a dict of name to number) at step to every tracker, on the main process;
        log_kwargs[name]: keywords for the log of the tracker called name."""
        if self.is_main_process:
            for tracker in self.trackers:
                tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))

    def end_training(self):
        """Finishes every tracker, then the collective shutdown: waits for every process and tears the process
        group down. Afterwards collectives fail with InvalidStateError, and a new Accelerator may choose
        other settings."""
        tracking.end_trackers(self)
        check(lib.accel_state_shutdown(self.pointer))

    def close(self):
        """Frees every object this Accelerator prepared, then its own handle (nothing is communicated)."""
        if self._torch_objects is not None:
            self._torch_objects.forget()
        for prepared in (self._schedulers, self._optimizers, self._loaders, self._models):
            while prepared:
                prepared.pop().close()
        self._dataloaders.clear()
        self._state_options.close()
        super().close()

    def __reduce__(self):
        """Pickling, as Accelerate's Accelerator allows: unpickled, it is an Accelerator made with the same
        arguments (joining the process's state, so the settings must agree with it, as for any second
        Accelerator), carrying the pickled loaders this one prepared (_dataloaders; the library's own
        DataLoaders do not pickle). The models, optimizers and schedulers stay with this one."""
        return _unpickled_accelerator, (self._arguments,), {"_dataloaders": list(self._dataloaders)}

    def __del__(self):
        # Only the state handle: prepared objects may well outlive the Accelerator object.
        Handle.close(self)

    # --- prepare ----------------------------------------------------------------------------------------

    def prepare(self, *objects, device_placement=None):
        """Returns, in the same order (whatever the order, as Accelerate):
        - for a torch.nn.Module, the module prepared (accel.torch_model: on the device, rank 0's weights,
          gradients averaged over the processes by accel; with several processes wrapped as DDP would be);
        - for a torch.optim.Optimizer, an AcceleratedOptimizer; for a torch LR scheduler, an
          AcceleratedScheduler; for a torch.utils.data.DataLoader, a loader dealing this process's batches as
          Accelerate would (accel.data_loader.DataLoaderShard / DataLoaderDispatcher);
        - a prepared accel Model for each TorchScript path, bytes, torch.jit.ScriptModule or Model; a
          DataLoader for each DataLoaderSpec or Dataset (batch size 1); an Optimizer for each OptimizerSpec
          and a Scheduler for each SchedulerSpec;
        - anything else as it is. One object gives one result, several a tuple. device_placement is
          accepted for Accelerate's signature: models always go to the device."""
        state_module._check_not_reset(self)
        results = list(objects)
        kinds = [_kind_of(value) for value in objects]
        for kind in _PREPARE_ORDER:
            for index, value in enumerate(objects):
                if kinds[index] == kind:
                    results[index] = getattr(self, f"_prepare_{kind}")(value, objects, results)
        return results[0] if len(results) == 1 else tuple(results)

    def _prepare_model(self, source, _objects, _results):
        model = source if isinstance(source, Model) else Model.load(source)
        self._prepare_host_model(model)
        return model

    def _prepare_host_model(self, model):
        with Options(self._model_settings) as options:
            check(lib.accel_state_prepare_model(self.pointer, model.pointer, options.pointer))
        self._models.append(model)

    @property
    def _torch(self):
        if self._torch_objects is None:
            from ._torch_objects import TorchObjects
            self._torch_objects = TorchObjects(self)
        return self._torch_objects

    def _prepare_torch_model(self, module, _objects, _results):
        return self._torch.prepare_module(module)

    def _prepare_torch_optimizer(self, optimizer, _objects, _results):
        stage = self._model_settings.get("zero_stage", 0)
        if stage and self.num_processes > 1:
            # Said here rather than by the library at the first backward, in this package's terms.
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
                f"prepare: under zero_stage {stage} (DeepSpeedPlugin) each process steps only its share of the "
                f"parameters, which a {type(optimizer).__name__} would not: give accel.OptimizerSpec(kind, ...) "
                "(kind 'sgd', 'adam' or 'adamw', with its settings) instead, or zero_stage 0"))
        return self._torch.prepare_optimizer(optimizer)

    def _prepare_torch_scheduler(self, scheduler, _objects, _results):
        return self._torch.prepare_scheduler(scheduler)

    def _prepare_torch_loader(self, loader, _objects, _results):
        from . import _torch_loader
        if isinstance(loader, _torch_loader.PreparedLoader):
            return loader
        prepared = _torch_loader.prepare(self, loader)
        # As in Accelerate, checkpoints hold a DataLoader's place only with use_stateful_dataloader: a script
        # that resumes mid-epoch otherwise calls skip_first_batches itself, which would then skip twice. A
        # loader planned in Python gets a library loader per epoch: its state_dict() goes into checkpoints as
        # a registered object, under the name of Accelerate's file for it.
        if self.dataloader_config.use_stateful_dataloader and not prepared._python_plan:
            self._loaders.append(prepared.accel_loader)
        elif self.dataloader_config.use_stateful_dataloader:
            index = len(self._dataloaders)
            self._register_bytes_object("dl_state_dict" if index == 0 else f"dl_state_dict_{index}",
                                        prepared.state_dict, prepared.load_state_dict)
        self._dataloaders.append(prepared)
        return prepared

    def prepare_model(self, model, device_placement=None, evaluation_mode=False):
        """prepare() of one model (Accelerate's prepare_model)."""
        return self.prepare(model)

    def prepare_optimizer(self, optimizer, device_placement=None):
        return self.prepare(optimizer)

    def prepare_scheduler(self, scheduler):
        return self.prepare(scheduler)

    def prepare_data_loader(self, data_loader, device_placement=None, slice_fn_for_dispatch=None):
        return self.prepare(data_loader)

    def _hosted_owning(self, parameter):
        """The prepared torch module a parameter belongs to (accel.torch_model.HostedModule), or None."""
        return None if self._torch_objects is None else self._torch_objects.owner_of(parameter)

    def _accel_model(self, model, what):
        """The accel Model behind a model argument: an accel.Model, or a prepared torch module (or its
        wrapper). TypeError naming both kinds otherwise."""
        if isinstance(model, Model):
            return model
        hosted = None if self._torch_objects is None else self._torch_objects.hosted_of(model)
        if hosted is not None:
            return hosted.model
        if _kind_of(model) == "torch_model":
            raise ValueError(f"{what}: this {type(model).__name__} was not prepared by this Accelerator "
                             "(accelerator.prepare(model) first)")
        raise TypeError(f"{what} takes a model (a prepared torch.nn.Module or accel.Model), not "
                        f"{describe_kind(model)}")

    def prepare_train_step(self, model, optimizer, **settings):
        """A TrainStep: the whole step (forward, loss, backward, clipping, optimizer step, zero_grad) as one
        call, step(*inputs, target=y) -> loss. Settings (capi/accel/train_step.h): loss ("cross_entropy",
        "nll", "mse", "l1", "bce_with_logits", or "output" for a model whose forward returns the loss),
        reduction, label_smoothing, ignore_index, max_grad_norm, norm_type, and cuda_graph=True to capture the
        step as one CUDA graph on a GPU (Accelerate's nearest: dynamo_backend with torch.compile's
        "reduce-overhead" mode) after cuda_graph_warmup eager steps."""
        with Options(settings) as options:
            return TrainStep(model, optimizer, options)

    def _prepare_loader(self, spec, _objects, _results):
        if isinstance(spec, Dataset):
            spec = DataLoaderSpec(spec)
        with Options({**self._loader_settings, **spec.options()}) as options:
            loader = DataLoader(self.pointer, spec.dataset, options, spec.batches)
        self._loaders.append(loader)
        self._dataloaders.append(loader)
        return loader

    def _prepare_optimizer(self, spec, objects, results):
        model = self._resolve(spec.model, self._models, "model", objects, results)
        with Options(spec.settings) as options:
            optimizer = Optimizer(model, spec.kind, options)
        self._optimizers.append(optimizer)
        return optimizer

    def _prepare_scheduler(self, spec, objects, results):
        optimizer = self._resolve(spec.optimizer, self._optimizers, "optimizer", objects, results)
        if callable(spec.schedule) and spec.settings:
            raise ValueError("a schedule given as a function takes no options")
        settings = dict(spec.settings)
        if self._loader_settings["split_batches"] and not callable(spec.schedule):
            settings.setdefault("split_batches", True)  # the schedule then counts global batches
        with Options(settings) as options:
            scheduler = Scheduler(optimizer, spec.schedule, options)
        self._schedulers.append(scheduler)
        return scheduler

    @staticmethod
    def _resolve(named, prepared, what, objects, results):
        """The object a spec refers to: one prepared in the same call (by the argument given to prepare),
        a prepared one, or, when the spec names none, the only one this Accelerator prepared."""
        for value, result in zip(objects, results):
            if named is not None and value is named:
                return result
        if named is not None:
            return named
        if len(prepared) != 1:
            raise ValueError(f"the spec names no {what}, and this Accelerator has prepared {len(prepared)} "
                             f"{what}s: pass {what}=...")
        return prepared[0]

    def unwrap_model(self, model, keep_fp32_wrapper=True, keep_torch_compile=True):
        """The model without what prepare put around it: an accel Model's plain module, or a torch
        module's own object (not the DDP-like wrapper of several processes); keep_fp32_wrapper False also
        gives the module its forward from before the mixed-precision patch back."""
        if isinstance(model, Model):
            return model.unwrap()
        if self._torch_objects is None or self._torch_objects.hosted_of(model) is None:
            return model
        module = self._torch_objects.unwrap(model)
        if not keep_fp32_wrapper:
            from .torch_model import restore_forward
            restore_forward(module)
        return module

    def get_state_dict(self, model, unwrap=True):
        """The model's state_dict: of the unwrapped model (no "module." prefix) unless unwrap is False."""
        return (self.unwrap_model(model) if unwrap else model).state_dict()

    def save(self, obj, f, safe_serialization=False):
        """torch.save(obj, f) on the main process only (Accelerate's save; safetensors is save_model's)."""
        if safe_serialization:
            raise ValueError("save writes torch.save's format only: use save_model for safetensors")
        if self.is_main_process:
            import torch
            torch.save(obj, f)

    def skip_first_batches(self, dataloader, num_batches=0):
        """The next epoch of dataloader skips its first num_batches batches (in place; returned for
        Accelerate's `dataloader = accelerator.skip_first_batches(dataloader, n)`)."""
        if not hasattr(dataloader, "skip_first_batches"):
            raise TypeError(f"skip_first_batches takes a prepared data loader, not {describe_kind(dataloader)}")
        dataloader.skip_first_batches(num_batches)
        return dataloader

    # --- the training step ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def accumulate(self, *models):
        """`with accelerator.accumulate(model):` around each step: decides whether this step synchronises
        gradients (every gradient_accumulation_steps batches, and at the end of the loader). The state knows
        its models: the arguments are accepted so that Accelerate code runs unchanged."""
        check(lib.accel_state_accumulate(self.pointer))
        yield

    @property
    def sync_gradients(self):
        """True when the current step synchronises gradients and steps the optimizer."""
        return bool(lib.accel_state_sync_gradients(self.pointer))

    def backward(self, loss, num_items_in_batch=None, **kwargs):
        """Backward of loss / gradient_accumulation_steps (scaled under fp16); on a synchronising step the
        gradients are then averaged over the processes. loss is a torch tensor (of prepared torch
        modules; kwargs go to its backward), or an accel.Tensor computed by a prepared accel Model or
        accel.compute_loss.

        num_items_in_batch: for a loss summed over this micro-batch's items (compute_loss with
        reduction="sum"), the number of items in the whole accumulated global batch (every micro-batch of
        the optimizer step, on every process: sum the local counts with reduce(..., "sum")). The gradient
        is then that of the mean over the full batch, however unevenly the items fall."""
        if _is_torch_tensor(loss):
            self._torch_backward(loss, num_items_in_batch, kwargs)
            return
        if not isinstance(loss, Tensor):
            raise TypeError(f"backward takes a loss (a torch tensor, or an accel.Tensor from a prepared accel "
                            f"Model or accel.compute_loss), not {describe_kind(loss)}")
        if kwargs:
            raise TypeError(f"backward of an accel.Tensor takes no {', '.join(kwargs)}")
        if num_items_in_batch is None:
            check(lib.accel_state_backward(self.pointer, loss.pointer))
        else:
            check(lib.accel_state_backward_with_items(self.pointer, loss.pointer, int(num_items_in_batch)))

    def _torch_backward(self, loss, num_items_in_batch, kwargs):
        """Accelerate's backward on a torch loss: divided by the accumulation steps (or, with
        num_items_in_batch, normalised as accel_state_backward_with_items does), multiplied by the fp16 loss
        scale, then torch's backward, whose hooks synchronise the prepared modules' gradients."""
        if num_items_in_batch is not None:
            if int(num_items_in_batch) <= 0:
                raise ValueError("backward: num_items_in_batch must be > 0")
            loss = loss * (self.num_processes / int(num_items_in_batch))
        elif self.gradient_accumulation_steps != 1:
            loss = loss / self.gradient_accumulation_steps
        if self._loss_scaling:
            loss = self._torch.scaling.scale(loss)
        loss.backward(**kwargs)

    @property
    def optimizer_step_was_skipped(self):
        """True when a prepared optimizer skipped its last step (an fp16 overflow)."""
        accel_skipped = any(optimizer.step_was_skipped for optimizer in self._optimizers)
        return accel_skipped or (self._torch_objects is not None and self._torch_objects.optimizer_step_was_skipped())

    @contextlib.contextmanager
    def autocast(self, cache_enabled=False, autocast_handler=None):
        """Prepared models always run forward under the state's mixed precision, with or without this
        block. The block adds the same for code outside forward: the library's own operations in it (a loss
        from compute_loss), and torch code when torch is loaded: autocast to bf16 (CPU or CUDA) or fp16
        (CUDA). fp16 on the CPU is the loss scaler alone (LibTorch 1.13 has no fp16 CPU autocast): nothing
        then.

        autocast_handler: an AutocastKwargs for this block (default: the one given in kwargs_handlers), whose
        enabled and cache_enabled go to torch.autocast. enabled=False runs the block's torch code in float32,
        inside an outer autocast too; the library's operations in it then stay as the enclosing block has
        them (the library's scope cannot be switched off inside another). cache_enabled=True is
        Accelerate's deprecated spelling of AutocastKwargs(cache_enabled=True) (a FutureWarning)."""
        if cache_enabled:
            warnings.warn("Passing `cache_enabled=True` to `accelerator.autocast` is deprecated and will be removed "
                          "in v0.23.0. Please use the `AutocastKwargs` class instead and pass it to the `Accelerator` "
                          "as a `kwarg_handler`.", FutureWarning)
            if self.autocast_handler is None:
                self.autocast_handler = AutocastKwargs()
            self.autocast_handler.cache_enabled = True
        handler = self.autocast_handler if autocast_handler is None else autocast_handler
        enabled = handler is None or handler.enabled
        if enabled:
            check(lib.accel_state_autocast_begin(self.pointer))
        try:
            torch = sys.modules.get("torch")
            device_type = self.device.split(":")[0]
            dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(self.mixed_precision)
            if torch is None or dtype is None or (device_type == "cpu" and dtype != "bfloat16"):
                yield
            else:
                with torch.autocast(device_type=device_type, dtype=getattr(torch, dtype), enabled=enabled,
                                    cache_enabled=None if handler is None else handler.cache_enabled):
                    yield
        finally:
            if enabled:
                check(lib.accel_state_autocast_end(self.pointer))

    @contextlib.contextmanager
    def profile(self, profile_handler=None):
        """Accelerate's profile: the block runs under torch.profiler, and the torch.profiler.profile is what
        the with statement gives (call its step() per iteration when a schedule is set). profile_handler: a
        ProfileKwargs (default: the one given in kwargs_handlers, else ProfileKwargs()). With its
        output_trace_dir, each process then writes its Chrome trace there as profile_<process index>.json,
        and waits for the others."""
        handler = profile_handler or self.profile_handler or ProfileKwargs()
        with handler.build() as profiler:
            yield profiler
        if handler.output_trace_dir is None:
            return
        os.makedirs(handler.output_trace_dir, exist_ok=True)
        profiler.export_chrome_trace(os.path.join(handler.output_trace_dir, f"profile_{self.process_index}.json"))
        self.wait_for_everyone()

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model):
        """Accelerate's trigger_sync_in_backward: the next backward of model (a prepared torch module)
        synchronises its gradients, averaging over the processes what it and the backwards under no_sync
        accumulated, although model's forward ran under no_sync. Use it around that backward, outside
        no_sync. With one process it does nothing. An accel Model decides at its own forward: it is refused
        (InvalidStateError) with several processes."""
        if self.num_processes > 1:
            # As a new forward would: outside no_sync, the coming backward synchronises.
            self._accel_model(model, "trigger_sync_in_backward").begin_forward(True)
        yield

    @contextlib.contextmanager
    def no_sync(self, model):
        """`with accelerator.no_sync(model):` backwards of forwards run in the block only accumulate
        gradients on this process (no all-reduce); the next synchronising backward averages the sum."""
        handle = self._accel_model(model, "no_sync")
        check(lib.accel_state_no_sync_begin(self.pointer, handle.pointer))
        try:
            yield
        finally:
            check(lib.accel_state_no_sync_end(self.pointer, handle.pointer))

    @contextlib.contextmanager
    def join_uneven_inputs(self, joinables, even_batches=None):
        """Accelerate's join_uneven_inputs, as Accelerate runs it on this kind of state. One process: nothing.
        CPU processes (MULTI_CPU): a UserWarning that joining is only supported for multi-GPU training, and
        nothing else, as Accelerate's does there. Several GPUs: Accelerate overrides the prepared loaders'
        even_batches and runs torch's Join, in which a process out of batches shadows the others' gradient
        all-reduces; the library has neither, so that is UnsupportedError, except where Accelerate's does
        nothing either (even_batches None or True, and the Accelerator's even_batches True)."""
        if self.distributed_type == DistributedType.MULTI_GPU:
            if not (self.even_batches and even_batches in (None, True)):
                raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                                       "join_uneven_inputs with even_batches=False: the library cannot join uneven "
                                       "inputs (no process shadows the gradient all-reduces of the others once out "
                                       "of batches); keep even_batches=True, which gives every process as many "
                                       "batches")
        elif self.distributed_type != DistributedType.NO:
            warnings.warn("Joining uneven inputs is only supported for multi-GPU training, as a result "
                          "`join_uneven_inputs` will have no effect.")
        yield

    def free_memory(self, *objects):
        """Accelerate's free_memory: forgets the objects this Accelerator prepared and those registered for
        checkpointing (they are freed once nothing else refers to them), restarts the accumulation counter,
        stops tracking loaders in an epoch and returns CUDA's cached blocks, so that objects made afresh,
        prepared and registered again resume from a checkpoint (load_state) as the first ones would. Returns
        a None for each object given, to assign back."""
        if self._torch_objects is not None:
            self._torch_objects.forget()
        for prepared in (self._schedulers, self._optimizers, self._loaders, self._models, self._custom_objects,
                         self._dataloaders):
            prepared.clear()
        check(lib.accel_state_free_memory(self.pointer))
        return [None] * len(objects)

    def clear(self, *objects):
        """Accelerate's clear: the same as free_memory."""
        return self.free_memory(*objects)

    def grad_scale(self):
        """The fp16 loss scale as an accel.Tensor (0-d float32 on the device, updated in place; 1 without
        fp16 loss scaling): what a loss is multiplied by before a backward the library does not run."""
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_state_grad_scale(self.pointer, out))
        return Tensor(out[0])

    def unscale_model_gradients(self, model):
        """Divides a prepared model's gradients by the loss scale; True when one holds inf or NaN. Once
        per optimizer step, before clipping; nothing without fp16 loss scaling."""
        found_inf = ffi.new("int *")
        check(lib.accel_state_unscale_gradients(self.pointer, model.pointer, found_inf))
        return bool(found_inf[0])

    def update_grad_scale(self, found_inf):
        """GradScaler.update after an optimizer step taken (found_inf False) or skipped (True)."""
        check(lib.accel_state_update_grad_scale(self.pointer, int(bool(found_inf))))

    def clip_grad_norm_(self, parameters, max_norm, norm_type=2.0):
        """Unscales fp16 gradients, then clips the gradients to a total norm of max_norm; returns the norm
        before clipping. parameters: torch parameters (model.parameters(), as Accelerate) or a prepared
        torch module, giving a torch tensor; or an accel Model, giving a float. A prepared torch module's
        whole set of trainable parameters is clipped by the library (torch's arithmetic), others by
        torch.nn.utils.clip_grad_norm_."""
        if isinstance(parameters, Model):
            total = ffi.new("double *")
            check(lib.accel_state_clip_grad_norm(self.pointer, parameters.pointer, max_norm, norm_type, total))
            return total[0]
        import torch
        listed, hosted = self._torch_parameters(parameters, "clip_grad_norm_")
        if hosted is None:
            return torch.nn.utils.clip_grad_norm_(listed, max_norm, norm_type)
        total = ffi.new("double *")
        check(lib.accel_state_clip_grad_norm(self.pointer, hosted.model.pointer, max_norm, norm_type, total))
        dtype = next(iter(hosted.grads.values())).dtype if hosted.grads else torch.float32
        return torch.tensor(total[0], dtype=dtype, device=self.device)

    def clip_grad_value_(self, parameters, clip_value):
        """Unscales fp16 gradients, then clamps every gradient to [-clip_value, clip_value] (parameters as
        clip_grad_norm_'s)."""
        if isinstance(parameters, Model):
            check(lib.accel_state_clip_grad_value(self.pointer, parameters.pointer, clip_value))
            return
        import torch
        listed, hosted = self._torch_parameters(parameters, "clip_grad_value_")
        if hosted is None:
            torch.nn.utils.clip_grad_value_(listed, clip_value)
        else:
            check(lib.accel_state_clip_grad_value(self.pointer, hosted.model.pointer, clip_value))

    def _torch_parameters(self, parameters, what):
        """(the parameters as a list, unscaled for this step under fp16; the prepared module whose trainable
        parameters they are exactly, or None)."""
        import torch
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        elif isinstance(parameters, torch.nn.Module):
            parameters = parameters.parameters()
        elif not hasattr(parameters, "__iter__"):
            raise TypeError(f"{what} takes parameters (model.parameters()) or a prepared model, not "
                            f"{describe_kind(parameters)}")
        listed = list(parameters)
        if self._torch_objects is None:
            return listed, None
        self._torch_objects.scaling.unscale(listed)
        trainable = [p for p in listed if p.requires_grad]
        owners = {id(self._hosted_owning(p)) for p in trainable}
        hosted = self._hosted_owning(trainable[0]) if trainable and len(owners) == 1 else None
        if hosted is None or {id(p) for p in trainable} != {id(p) for p in hosted.trainable.values()}:
            return listed, None
        return listed, hosted

    def save_model(self, model, save_directory, max_shard_size="10GB", safe_serialization=True):
        """Accelerate's save_model: the unwrapped model's weights as safetensors in save_directory, from the
        main process (collective: the others wait for it). Up to max_shard_size (bytes, or a string such as
        "10GB", "500MB", "2GiB") they go into model.safetensors; above it into model-0000i-of-0000N shards
        with model.safetensors.index.json. Tied weights are stored once. Model.load_weights reads them back."""
        if not safe_serialization:
            raise ValueError("save_model writes safetensors only (safe_serialization=False is not supported)")
        handle = self._accel_model(model, "save_model")
        check(lib.accel_state_save_model(self.pointer, handle.pointer, str(save_directory).encode(),
                                         _size_in_bytes(max_shard_size)))

    # --- checkpoints: every object prepared by this accelerator, in preparation order -------------------

    def _prepared_arrays(self, models=None):
        """The prepared objects as the C arrays accel_state_save_state and load_state take, with counts;
        models: the accel Models to carry when not all (a pre-hook took some out)."""
        arguments = []
        models = self._models if models is None else models
        for objects, array_type in ((models, "accel_model_t *[]"), (self._optimizers, "accel_optimizer_t *[]"),
                                    (self._schedulers, "accel_scheduler_t *[]"), (self._loaders, "accel_loader_t *[]")):
            arguments += [ffi.new(array_type, [prepared.pointer for prepared in objects]), len(objects)]
        return arguments

    def save_state(self, output_dir=None, safe_serialization=True, **save_model_func_kwargs):
        """Accelerate's save_state: every prepared model, optimizer, scheduler and data loader, the grad
        scaler, each rank's random generators and the accumulation step, into output_dir (collective;
        written to a temporary folder, then moved into place); returns the folder. The next numbered
        checkpoint of the project, project_dir/checkpoints/checkpoint_<project_configuration.iteration>,
        when project_configuration.automatic_checkpoint_naming is on (output_dir is then ignored, as in
        Accelerate) or output_dir is None, keeping at most total_limit of them. Call it on every process:
        under `if accelerator.is_main_process:` it fails on every rank within seconds ("collectives out of
        step") rather than hanging until the timeout. Models are always stored as safetensors, whatever
        safe_serialization says (the checkpoint's format is the library's); save_model_func_kwargs are
        DeepSpeed's and FSDP's savers' and are refused (TypeError)."""
        if save_model_func_kwargs:
            raise TypeError(f"save_state() got unexpected keyword arguments {sorted(save_model_func_kwargs)} "
                            "(they go to DeepSpeed's or FSDP's own savers, which accel does not use)")
        numbered = output_dir is None or self.project_configuration.automatic_checkpoint_naming
        directory = self._numbered_checkpoint() if numbered else str(output_dir)
        if not self._save_state_pre_hooks:
            self._checkpoint_call(lib.accel_state_save_state, None if numbered else directory)
            return directory
        hook_files = _HookFiles(self, directory)
        models = self._models_after_save_hooks(hook_files.directory)
        with hook_files:
            self._checkpoint_call(lib.accel_state_save_state, None if numbered else directory, models)
        return directory

    def _numbered_checkpoint(self):
        """The folder of the next numbered checkpoint, after giving the library project_configuration's
        iteration (which a user may have set)."""
        if not self.project_configuration.project_dir:
            raise ValueError("save_state() without a folder (or with automatic_checkpoint_naming) writes the "
                             "project's next numbered checkpoint, and this Accelerator has no project_dir: give "
                             "Accelerator(project_dir=...) or a ProjectConfiguration with one")
        check(lib.accel_state_set_checkpoint_iteration(self.pointer, int(self.project_configuration.iteration)))
        return os.path.join(self.project_configuration.project_dir, "checkpoints",
                            f"checkpoint_{self.project_configuration.iteration}")

    def _checkpoint_call(self, function, directory, models=None):
        """A save or load of the prepared objects (folder None: the library's numbered one), then
        project_configuration.iteration brought level with the library's."""
        try:
            check(function(self.pointer, ffi.NULL if directory is None else str(directory).encode(),
                           *self._prepared_arrays(models)), self._checkpoint_callbacks)
        finally:
            self.project_configuration.iteration = lib.accel_state_checkpoint_iteration(self.pointer)

    @property
    def project_dir(self):
        return self.project_configuration.project_dir

    @property
    def logging_dir(self):
        return self.project_configuration.logging_dir

    @property
    def save_iteration(self):
        return self.project_configuration.iteration

    def save_state_async(self, output_dir=None):
        """save_state in the background: the objects are captured before it returns (the models' tensors
        copied to host memory, about one checkpoint's size), then a thread writes them and moves the
        checkpoint into place once every rank's part is written, while training goes on. A save already in
        flight is waited for first. A failure in the background is raised once, by the next save_state,
        save_state_async, load_state or wait_for_save (which wait for it), or by backward or an optimizer
        step, which then do nothing else; the previous checkpoint stays."""
        if self._save_state_pre_hooks:
            raise ValueError("save_state pre-hooks run with save_state only: the files they write join a "
                             "checkpoint once it is in place, which save_state_async does later")
        numbered = output_dir is None or self.project_configuration.automatic_checkpoint_naming
        directory = self._numbered_checkpoint() if numbered else str(output_dir)
        self._checkpoint_call(lib.accel_state_save_state_async, None if numbered else directory)
        return directory

    def wait_for_save(self):
        """Waits for the background save in flight, if any; raises its failure if nothing reported it."""
        check(lib.accel_state_wait_for_save(self.pointer))

    def load_state(self, input_dir=None, **load_model_func_kwargs):
        """Restores what save_state wrote (without input_dir: project_dir's highest-numbered checkpoint)
        into the objects prepared in the same order; everything is checked first, so on an error nothing
        has changed. project_configuration.iteration then follows the loaded numbered checkpoint (its number
        + 1), where Accelerate leaves it. load_model_func_kwargs: Accelerate's map_location (None, "cpu" or
        "on_device") changes nothing, as tensors go where the prepared objects are; anything else is
        refused (TypeError)."""
        map_location = load_model_func_kwargs.pop("map_location", None)
        if map_location not in (None, "cpu", "on_device"):
            raise TypeError(f"Unsupported optimizer map location passed, please choose one of `None`, "
                            f"`'cpu'`, or `'on_device'`. Got {map_location!r}")
        if load_model_func_kwargs:
            raise TypeError(f"load_state() got unexpected keyword arguments {sorted(load_model_func_kwargs)} "
                            "(they go to DeepSpeed's or FSDP's own loaders, which accel does not use)")
        models = self._models_after_load_hooks(input_dir)
        self._checkpoint_call(lib.accel_state_load_state, input_dir, models)

    def register_save_state_pre_hook(self, hook):
        """Accelerate's register_save_state_pre_hook: save_state first calls hook(models, weights,
        output_dir), models being the prepared models in preparation order (a torch module as the user made
        it, or an accel.Model) and weights their state_dicts. A model whose entry the hook removes from
        weights (weights.pop(), when it saves the model its own way) is left out of the checkpoint, as
        Accelerate leaves it out; load it back with a load_state pre-hook that removes it from models.
        Editing a state_dict in place changes nothing saved: the model's tensors are. output_dir is a folder
        beside the checkpoint ("<folder>.hook_files"): what the hooks write there is moved into the
        checkpoint once it is in place (the checkpoint itself goes into place whole, so it cannot be written
        into before); a name that clashes with a checkpoint file is a ValueError. The hooks do not run with
        save_state_async (ValueError). Returns a handle whose remove() unregisters the hook."""
        return _HookHandle(self._save_state_pre_hooks, hook)

    def register_load_state_pre_hook(self, hook):
        """Accelerate's register_load_state_pre_hook: load_state first calls hook(models, input_dir); a model
        the hook removes from models (models.pop(), when it loads the model its own way) is not restored from
        the checkpoint. Needs an input_dir, as the save hooks. Returns a handle whose remove() unregisters it."""
        return _HookHandle(self._load_state_pre_hooks, hook)

    def _user_models(self):
        """The prepared models as the user knows them (a torch module for a prepared nn.Module)."""
        hosted = {id(h.model): h.module for h in (self._torch_objects.hosted if self._torch_objects else [])}
        return [hosted.get(id(model), model) for model in self._models]

    def _kept_models(self, models, remaining, what):
        """The accel Models whose entries (by identity) are still in remaining, in preparation order."""
        kept = {id(entry) for entry in remaining}
        if len(kept) != len(remaining) or not kept <= {id(entry) for entry in models}:
            raise ValueError(f"a {what} pre-hook may remove entries, not add or replace them")
        return [model for model, entry in zip(self._models, models) if id(entry) in kept]

    def _models_after_save_hooks(self, output_dir):
        models = self._user_models()
        weights = [model.state_dict() for model in models]
        originals = list(weights)
        for hook in list(self._save_state_pre_hooks.values()):
            hook(models, weights, str(output_dir))
        return self._kept_models(originals, weights, "save_state")

    def _models_after_load_hooks(self, input_dir):
        if not self._load_state_pre_hooks:
            return self._models
        if input_dir is None:
            raise ValueError("load_state pre-hooks need an input_dir: accel finds the numbered folder itself")
        models = self._user_models()
        originals = list(models)
        for hook in list(self._load_state_pre_hooks.values()):
            hook(models, str(input_dir))
        return self._kept_models(originals, models, "load_state")

    def register_for_checkpointing(self, *objects):
        """Accelerate's register_for_checkpointing: objects with state_dict() and load_state_dict(state)
        that every later save_state saves and load_state restores, in registration order. Each is stored
        as the pickle of its state_dict() (Accelerate uses torch.save, a pickle too), in each rank's own
        folder: rank<r>/custom_checkpoint_<i>.bin, i counting this accelerator's registrations from 0.
        Unpickling runs arbitrary code: load only checkpoints you trust. A checkpoint must hold exactly the
        registered objects (InvalidArgumentError naming the missing or extra one). An exception raised by
        state_dict() or load_state_dict() comes out of save_state / load_state. The objects are kept
        alive as long as the accelerator, until free_memory() forgets them."""
        invalid = [i for i, obj in enumerate(objects)
                   if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)))]
        if invalid:
            # Accelerate's wording, which its tests (and so users' checks) read: the index among the invalid ones.
            raise ValueError("All `objects` must include a `state_dict` and `load_state_dict` function to be stored. "
                             "The following inputs are invalid:" +
                             "".join(f"\n\t- Item at index {index}, `{type(objects[i]).__name__}`"
                                     for index, i in enumerate(invalid)))
        for obj in objects:
            self._register_bytes_object(str(len(self._custom_objects)), lambda obj=obj: pickle.dumps(obj.state_dict()),
                                        lambda data, obj=obj: obj.load_state_dict(pickle.loads(data)))
            self._custom_objects.append(obj)

    def _register_bytes_object(self, name, save, load):
        """Registers, under name, an object every save_state and load_state carries: save() gives its
        bytes, load(bytes) restores it."""
        def save_callback(sink, _payload):
            data = save()
            check(lib.accel_sink_write(sink, data, len(data)))

        def load_callback(data, size, _payload):
            load(ffi.buffer(data, size)[:])

        check(lib.accel_state_register_for_checkpointing(
            self.pointer, name.encode(), self._checkpoint_callbacks.make("accel_save_object_fn", save_callback),
            self._checkpoint_callbacks.make("accel_load_object_fn", load_callback), ffi.NULL))

    # --- collectives: tensors in nested lists, tuples and dicts; results of the inputs' kind --------------

    def _each_tensor(self, data, operation, call):
        def one(value):
            out = ffi.new("accel_tensor_t **")
            with lent(value) as tensor:
                check_collective(call(tensor.pointer, out))
            return returned_like(Tensor(out[0]), value)

        return _nested.apply(one, data, operation)

    def gather(self, tensor):
        """Every process's tensor concatenated along dim 0, in rank order (0-d tensors count as [1]). The
        row counts may differ between processes (no pad_across_processes needed); other sizes may not."""
        return self._each_tensor(tensor, "gather", lambda t, out: lib.accel_state_gather(self.pointer, t, out))

    def gather_for_metrics(self, input_data, use_gather_object=False):
        """gather, then, on the last batch of a loader, without the samples that padded the last global
        batch: every sample of the dataset counted once. Data that is not made of tensors (or
        use_gather_object) goes through gather_object, trimmed alike for a prepared torch DataLoader."""
        try:
            all_tensors = not use_gather_object and bool(_nested.leaves(input_data, "gather_for_metrics"))
        except TypeError:
            all_tensors = False
        loader = self._active_torch_loader()
        if not all_tensors:
            data = self.gather_object(input_data)
            if loader is not None and loader.end_of_dataloader and loader.remainder > 0:
                return data[:loader.remainder]
            return data
        gathered = self._each_tensor(input_data, "gather_for_metrics",
                                     lambda t, out: lib.accel_state_gather_for_metrics(self.pointer, t, out))
        if loader is not None and loader._python_plan and loader.end_of_dataloader and loader.remainder > 0:
            # The library deals such a loader's batches as a plain list and trims nothing: as Accelerate,
            # keep the dataset's samples of the last global batch only.
            return _nested.apply(lambda t: t[:loader.remainder], gathered, "gather_for_metrics")
        return gathered

    # --- loaders of torch DataLoaders being iterated (Accelerate's GradientState.active_dataloader) ---------

    def _loader_began(self, loader):
        self._active_loaders.append(loader)

    def _loader_ended(self, loader):
        if loader in self._active_loaders:
            self._active_loaders.remove(loader)

    def _active_torch_loader(self):
        return self._active_loaders[-1] if self._active_loaders else None

    def _broadcast_object(self, obj, from_process=0):
        """obj as from_process has it, on every process."""
        data = self.gather_object([obj]) if self.num_processes > 1 else [obj]
        return data[from_process]

    @property
    def _rng_types(self):
        return [name for name in resolved_value(self._state_options, "state", "rng_types").split(",") if name]

    def set_trigger(self):
        """Accelerate's set_trigger: raises this process's flag, which the next check_trigger on every
        process sees (a breakpoint for all processes when one of them meets a condition)."""
        self._trigger = True

    def check_trigger(self):
        """Accelerate's check_trigger (collective): True on every process when any process called
        set_trigger since the last check, and then every flag is lowered; False otherwise."""
        raised = self._on_any_process(self._trigger)
        if raised:
            self._trigger = False
        return raised

    def _on_any_process(self, flag):
        """Whether flag is true on any process (collective)."""
        return int(self.reduce(np.asarray(int(bool(flag)), dtype=np.int64), "sum")) > 0

    def reduce(self, tensor, reduction="sum", scale=1.0):
        """Element-wise "sum", "mean" or "max" over the processes (any other reduction is an error). Nested
        lists, tuples and dicts are reduced in one call: one exchange of every leaf's path, shape and dtype,
        then one all-reduce per dtype."""
        leaves = _nested.leaves(tensor, "reduce")
        if len(leaves) == 1 and leaves[0][0] == "":
            return self._each_tensor(tensor, "reduce",
                                     lambda t, out: lib.accel_state_reduce(self.pointer, t, reduction.encode(), out))
        names = [ffi.new("char[]", path.encode()) for path, _ in leaves]
        outputs = ffi.new("accel_tensor_t *[]", max(1, len(leaves)))
        with lent_all([leaf for _, leaf in leaves]) as tensors:
            check_collective(lib.accel_state_reduce_named(self.pointer, ffi.new("const char *[]", names),
                                                          ffi.new("accel_tensor_t *[]", [t.pointer for t in tensors]),
                                                          len(leaves), reduction.encode(), outputs))
        results = iter([returned_like(Tensor(outputs[i]), leaf) for i, (_, leaf) in enumerate(leaves)])
        return _nested.apply(lambda _: next(results), tensor, "reduce")

    def pad_across_processes(self, tensor, dim=0, pad_index=0, pad_first=False):
        """Pads dim to the largest size any process has there, with pad_index, at the end (or start). A
        torch nested tensor is left as it is, with a CannotPadNestedTensorWarning (as Accelerate does)."""
        def one(value):
            if getattr(value, "is_nested", False):
                from .utils.operations import CannotPadNestedTensorWarning
                warnings.warn("Cannot pad nested tensors without more information. Leaving unprocessed.",
                              CannotPadNestedTensorWarning)
                return value
            return self._each_tensor(value, "pad_across_processes",
                                     lambda t, out: lib.accel_state_pad_across_processes(
                                         self.pointer, t, dim, pad_index, int(bool(pad_first)), out))

        return _nested.apply(one, tensor, "pad_across_processes")

    def broadcast(self, tensor, from_process=0):
        """Overwrites the tensors, on every process, with those of from_process, in place; returns them."""
        def one(value):
            _writable(value, "broadcast")
            with lent(value) as handle:
                check_collective(lib.accel_state_broadcast(self.pointer, handle.pointer, from_process))
            return value

        return _nested.apply(one, tensor, "broadcast")

    def reduce_scatter(self, tensor, output, reduction="sum"):
        """Writes into output, in place, this process's share of the element-wise "sum" or "mean" of every
        process's tensor (PyTorch's reduce_scatter_tensor): with n elements in output, elements
        [index * n, (index + 1) * n) of the reduction. output has tensor's dtype and 1/num_processes of its
        elements; returns output."""
        _writable(output, "reduce_scatter")
        with lent(tensor) as handle, lent(output) as out:
            check(lib.accel_state_reduce_scatter(self.pointer, handle.pointer, reduction.encode(), out.pointer))
        return output

    def all_gather(self, tensor, output):
        """Writes into output, in place, every process's tensor in process order (PyTorch's
        all_gather_into_tensor): output has tensor's dtype and num_processes times its elements; returns it."""
        _writable(output, "all_gather")
        with lent(tensor) as handle, lent(output) as out:
            check(lib.accel_state_all_gather(self.pointer, handle.pointer, out.pointer))
        return output

    def gather_object(self, obj):
        """Any picklable object from every process: with several processes, each passes a list and gets the
        lists' items in rank order; with one, the object comes back (as Accelerate does)."""
        data = pickle.dumps(obj)
        out = ffi.new("accel_bytes_list_t **")
        check(lib.accel_state_gather_bytes(self.pointer, data, len(data), out))
        try:
            gathered = []
            for index in range(lib.accel_bytes_list_count(out[0])):
                item, size = ffi.new("void **"), ffi.new("size_t *")
                check(lib.accel_bytes_list_get(out[0], index, item, size))
                gathered.append(pickle.loads(ffi.buffer(item[0], size[0])))
        finally:
            lib.accel_bytes_list_free(out[0])
        return gathered[0] if len(gathered) == 1 else [item for items in gathered for item in items]


class _HookHandle:
    """What register_*_pre_hook return: remove() unregisters the hook (again: nothing), as torch's
    RemovableHandle; also a context manager that removes it on exit."""

    _next_id = itertools.count()

    def __init__(self, hooks, hook):
        if not callable(hook):
            raise TypeError(f"a hook must be callable, not {type(hook).__name__}")
        self._hooks, self.id = hooks, next(self._next_id)
        hooks[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.remove()


class _HookFiles:
    """The folder save_state's pre-hooks write into ("<output_dir>.hook_files", made afresh by the main
    process), and, around the save (`with`), its entries moved into the checkpoint once it is in place (the
    folder removed, also when the save failed; kept, with a ValueError, when a name clashes)."""

    def __init__(self, accelerator, output_dir):
        self._accelerator, self._target = accelerator, str(output_dir).rstrip("/")
        self.directory = self._target + ".hook_files"
        failure = None
        if accelerator.is_main_process:
            try:
                shutil.rmtree(self.directory, ignore_errors=True)
                os.makedirs(self.directory)
            except OSError as error:
                failure = error
        # Every rank learns whether the folder is there (a barrier would leave the others waiting).
        if accelerator._on_any_process(failure is not None):
            raise failure or OSError(f"the main process could not make {self.directory} for the pre-hooks")

    def __enter__(self):
        return self

    def __exit__(self, failure, *_):
        if failure is not None:  # every rank failed the save (it is all or none): no barrier to meet
            if self._accelerator.is_main_process:
                shutil.rmtree(self.directory, ignore_errors=True)
            return
        self._accelerator.wait_for_everyone()
        clashes = self._move_in() if self._accelerator.is_main_process else []
        self._accelerator.wait_for_everyone()
        if clashes:
            raise ValueError(f"save_state pre-hooks wrote {clashes} in {self.directory}, names the checkpoint "
                             f"{self._target} already has: they were left there, not moved into it")

    def _move_in(self):
        """Moves the hooks' files into the checkpoint and removes the folder; with a clash, moves nothing,
        keeps the folder and returns the clashing names."""
        names = sorted(os.listdir(self.directory))
        clashes = [name for name in names if os.path.exists(os.path.join(self._target, name))]
        if clashes:
            return clashes
        for name in names:
            os.rename(os.path.join(self.directory, name), os.path.join(self._target, name))
        os.rmdir(self.directory)
        return []
