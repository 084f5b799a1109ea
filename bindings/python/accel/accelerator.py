"""accel.Accelerator: Hugging Face Accelerate's Accelerator over the library's process state.

The same script runs on one process or, started by `accel launch`, on many: prepare() places the model
and gives each rank its batches, backward() averages gradients over the ranks on the steps that
synchronise, and the collectives combine tensors across the ranks.
"""
import os
import warnings

from . import state as state_module
from . import tracking
from ._accelerator_checkpointing import CheckpointingMixin
from ._accelerator_collectives import CollectivesMixin
from ._accelerator_prepare import PrepareMixin
from ._accelerator_process import ProcessMixin
from ._accelerator_tracking import TrackingMixin
from ._accelerator_training import TrainingMixin
from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .config import (DataLoaderConfiguration, DeepSpeedPlugin, DistributedDataParallelKwargs,  # noqa: F401
                     FullyShardedDataParallelPlugin, GradientAccumulationPlugin, GradScalerKwargs,
                     InitProcessGroupKwargs, ProjectConfiguration)
from .errors import UnsupportedError, check
from .kwargs_handlers import AutocastKwargs, ProfileKwargs
from .options import Options
from .utils.dataclasses import DistributedType  # noqa: F401 (accel.accelerator's name)


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


def _plugins_of(deepspeed_plugin, fsdp_plugin):
    """(DeepSpeedPlugin or None, FullyShardedDataParallelPlugin or None): those given (a dict is a plugin's
    fields), else those ACCELERATE_USE_DEEPSPEED / ACCELERATE_USE_FSDP ask for, as Accelerate reads them.
    Both at once: ValueError, as in Accelerate."""
    if deepspeed_plugin is None and os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        deepspeed_plugin = DeepSpeedPlugin()
    if fsdp_plugin is None and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        fsdp_plugin = FullyShardedDataParallelPlugin()
    if isinstance(deepspeed_plugin, dict):
        deepspeed_plugin = DeepSpeedPlugin(**deepspeed_plugin)
    if isinstance(fsdp_plugin, dict):
        fsdp_plugin = FullyShardedDataParallelPlugin(**fsdp_plugin)
    if deepspeed_plugin is not None and fsdp_plugin is not None:
        raise ValueError("give a deepspeed_plugin or an fsdp_plugin, not both (each sets how models are sharded)")
    return deepspeed_plugin, fsdp_plugin


def _unpickled_accelerator(arguments):
    """An Accelerator made again from a pickled one's arguments. The process's current Accelerator (if one
    lives) stays the one PartialState() answers for: the copy may go away sooner."""
    current = state_module._live_accelerator()
    accelerator = Accelerator(**arguments)
    if current is not None:
        state_module._register(current)
    return accelerator


class Accelerator(ProcessMixin, PrepareMixin, TrainingMixin, CheckpointingMixin, CollectivesMixin,
                  TrackingMixin, Handle):
    _free = lib.accel_state_free

    @property
    def pointer(self):
        """The state handle; StateResetError (an AttributeError, as Accelerate's) once
        AcceleratorState._reset_state() retired the state, so every property and method says so."""
        state_module._check_not_reset(self)
        return Handle.pointer.fget(self)

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
        takes (ZeRO stages 1 and 2, with accel's optimizer or torch's, which then steps this process's share).
        kwargs_handlers also takes GradScalerKwargs. log_with: the trackers init_trackers starts
        (accel.tracking: "tensorboard", "jsonl", "csv", "all", LoggerType values, GeneralTracker objects or a
        list of them; None: none), writing under logging_dir (project_config's, else project_dir).

        Accelerate's order of arguments; its deprecated split_batches, dispatch_batches, even_batches and
        use_seedable_sampler go into the DataLoaderConfiguration (a FutureWarning; a ValueError beside a
        dataloader_config). fsdp_plugin: a FullyShardedDataParallelPlugin (accel.config: SHARD_GRAD_OP trains as
        ZeRO stage 2, NO_SHARD as data parallelism; strategies that shard parameters are UnsupportedError).
        Without plugins, ACCELERATE_USE_DEEPSPEED / ACCELERATE_USE_FSDP ("true", which `accel launch` exports
        from a config file's distributed_type) make them from the environment, as in Accelerate.
        megatron_lm_plugin: UnsupportedError. device (accel's, keyword only): an explicit device.

        A process has one state: while one lives, another Accelerator must ask for the same settings
        (InvalidStateError otherwise); after end_training() or AcceleratorState._reset_state() a new one may
        change them."""
        # What unpickling makes an Accelerator again from (see __reduce__).
        self._arguments = {name: value for name, value in locals().items() if name not in ("self", "__class__")}
        if megatron_lm_plugin is not None:
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                                   "megatron_lm_plugin: this library has no Megatron-LM engine (tensor and pipeline "
                                   "parallelism); it is data parallel, with ZeRO stages 1 and 2 (DeepSpeedPlugin, or "
                                   "FullyShardedDataParallelPlugin with SHARD_GRAD_OP)")
        deepspeed_plugin, fsdp_plugin = _plugins_of(deepspeed_plugin, fsdp_plugin)
        dataloader_config = _with_deprecated_loader_flags(dataloader_config, split_batches=split_batches,
                                                          dispatch_batches=dispatch_batches, even_batches=even_batches,
                                                          use_seedable_sampler=use_seedable_sampler)
        kwargs_handlers = kwargs_handlers or ()
        # Accelerate's ACCELERATE_TORCH_DEVICE chooses the device where nothing else does (the library's
        # ACCEL_DEVICE, read by the library itself, is an explicit setting and wins).
        if device is None and "ACCEL_DEVICE" not in os.environ:
            device = os.environ.get("ACCELERATE_TORCH_DEVICE") or None
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
        self._deepspeed_plugin, self._fsdp_plugin = deepspeed_plugin, fsdp_plugin
        for plugin in (deepspeed_plugin, fsdp_plugin):
            if plugin is not None:
                self._model_settings.update(plugin.options())
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
        self._accel_models, self._loaders, self._accel_optimizers, self._accel_schedulers = [], [], [], []
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

    @property
    def _models(self):
        """Accelerate's record of the prepared models, as prepare gave them back: a torch module (its
        wrapper with several processes) or an accel Model."""
        given_back = self._torch_objects.given_back if self._torch_objects is not None else {}
        return [given_back.get(id(model), model) for model in self._accel_models]

    @property
    def _optimizers(self):
        """Accelerate's record of the prepared optimizers (accel's, then the torch ones' wrappers)."""
        return self._accel_optimizers + (self._torch_objects.optimizers if self._torch_objects is not None else [])

    @property
    def _schedulers(self):
        return self._accel_schedulers + (self._torch_objects.schedulers if self._torch_objects is not None else [])

    def __repr__(self):
        if self.closed:
            return "accel.Accelerator(closed)"
        if self._state_was_reset:
            return "accel.Accelerator(reset)"
        kind = ffi.string(lib.accel_state_distributed_type_name(self.pointer)).decode()
        return (f"accel.Accelerator({kind}, process {self.process_index} of {self.num_processes}, "
                f"device={self.device}, mixed_precision={self.mixed_precision})")

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
        for prepared in (self._accel_schedulers, self._accel_optimizers, self._loaders, self._accel_models):
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

    def free_memory(self, *objects):
        """Accelerate's free_memory: forgets the objects this Accelerator prepared and those registered for
        checkpointing (they are freed once nothing else refers to them), restarts the accumulation counter,
        stops tracking loaders in an epoch and returns CUDA's cached blocks, so that objects made afresh,
        prepared and registered again resume from a checkpoint (load_state) as the first ones would. A torch
        module sharded by zero_stage 3 gets its whole parameters back (collective then, as Accelerate's
        scripts call it on every process). Returns a None for each object given, to assign back."""
        if self._torch_objects is not None:
            self._torch_objects.forget(gather_sharded=True)
        for prepared in (self._accel_schedulers, self._accel_optimizers, self._loaders, self._accel_models, self._custom_objects,
                         self._dataloaders):
            prepared.clear()
        if not self._state_was_reset:  # a reset state holds nothing more to free
            check(lib.accel_state_free_memory(self.pointer))
        return [None] * len(objects)

    def clear(self, *objects):
        """Accelerate's clear: the same as free_memory."""
        return self.free_memory(*objects)


# PartialState() makes an Accelerator when none lives; accel.state, below this module, is told the class.
state_module._install_accelerator_class(Accelerator)
