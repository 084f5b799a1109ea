"""Accelerator.prepare: what each object becomes, and the models, loaders, optimizers and schedulers made."""
import contextlib
import os
import sys

from . import state as state_module
from ._library import lib
from ._library_loader import DataLoader
from .dataset import Dataset
from .errors import UnsupportedError, check
from .model import Model
from .optimizer import Optimizer
from .options import Options
from .scheduler import Scheduler
from .specs import DataLoaderSpec, OptimizerSpec, SchedulerSpec
from .train_step import TrainStep


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


def _mark_prepared(prepared):
    """Accelerate's mark on what prepare made, which code checks to avoid preparing twice."""
    try:
        prepared._is_accelerate_prepared = True
    except AttributeError:  # a class with __slots__ of its own: nothing to mark it with
        pass


class PrepareMixin:
    """Accelerator.prepare and the prepare_* methods, and the way back from a prepared object."""

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
                    _mark_prepared(results[index])
        return results[0] if len(results) == 1 else tuple(results)

    def _prepare_model(self, source, _objects, _results):
        model = source if isinstance(source, Model) else Model.load(source)
        self._prepare_host_model(model)
        return model

    def _prepare_host_model(self, model):
        with Options(self._model_settings) as options:
            check(lib.accel_state_prepare_model(self.pointer, model.pointer, options.pointer))
        self._accel_models.append(model)

    @property
    def _torch(self):
        if self._torch_objects is None:
            from ._torch_objects import TorchObjects
            self._torch_objects = TorchObjects(self)
        return self._torch_objects

    def _prepare_torch_model(self, module, _objects, _results):
        return self._torch.prepare_module(module)

    def _zero_applies(self):
        """Whether zero_stage changes anything: on several processes, and on one offloaded, where ZeRO splits
        nothing but the library's host copies (under stage 3 its units) hold what the optimizer steps (as the
        library decides for its models)."""
        return self.num_processes > 1 or self._model_settings.get("zero_cpu_offload", False)

    def _shards_parameters(self):
        """Whether prepare shards a module's trainable parameters (zero_stage 3, where it applies)."""
        return self._model_settings.get("zero_stage") == 3 and self._zero_applies()

    def _prepare_torch_optimizer(self, optimizer, _objects, _results):
        stage = self._model_settings.get("zero_stage", 0)
        return self._torch.prepare_optimizer(optimizer, stage if self._zero_applies() else 0)

    def _prepare_torch_scheduler(self, scheduler, _objects, _results):
        return self._torch.prepare_scheduler(scheduler)

    def _prepare_torch_loader(self, loader, _objects, _results):
        from . import _torch_loader, _torch_prepare
        if isinstance(loader, _torch_loader.PreparedLoader):
            return loader
        prepared = _torch_prepare.prepare(self, loader)
        # As in Accelerate, checkpoints hold a DataLoader's place only with use_stateful_dataloader: a script
        # that resumes mid-epoch otherwise calls skip_first_batches itself, which would then skip twice. A
        # loader planned in Python gets a library loader per epoch: its state_dict() goes into checkpoints as
        # a registered object, under the name of Accelerate's file for it.
        if self.dataloader_config.use_stateful_dataloader and not prepared._python_plan:
            self._loaders.append(prepared.accel_loader)
        elif self.dataloader_config.use_stateful_dataloader:
            index = len(self._dataloaders)
            self._register_bytes_object("dl_state_dict" if index == 0 else f"dl_state_dict_{index}",
                                        lambda file: file.write(prepared.state_dict()), prepared.load_state_dict)
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
        model = self._resolve(spec.model, self._accel_models, "model", objects, results)
        with Options(spec.settings) as options:
            optimizer = Optimizer(model, spec.kind, options)
        sharded = [hosted for hosted in self._torch.hosted if hosted.model is model and hasattr(hosted, "release_gathered")]
        if sharded:
            optimizer._after_step = sharded[0].release_gathered
        self._accel_optimizers.append(optimizer)
        return optimizer

    def _prepare_scheduler(self, spec, objects, results):
        optimizer = self._resolve(spec.optimizer, self._accel_optimizers, "optimizer", objects, results)
        if callable(spec.schedule) and spec.settings:
            raise ValueError("a schedule given as a function takes no options")
        settings = dict(spec.settings)
        if self._loader_settings["split_batches"] and not callable(spec.schedule):
            settings.setdefault("split_batches", True)  # the schedule then counts global batches
        with Options(settings) as options:
            scheduler = Scheduler(optimizer, spec.schedule, options)
        self._accel_schedulers.append(scheduler)
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

    def verify_device_map(self, model):
        """Accelerate's verify_device_map: True when model (or a module in it) was loaded with a device map
        spanning more than one device (load_checkpoint_and_dispatch's hf_device_map), which training across
        processes cannot take."""
        modules = model.modules() if hasattr(model, "modules") else (model,)
        return any(len(getattr(module, "hf_device_map", None) or {}) > 1 for module in modules)

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
        """The model's state_dict: of the unwrapped model (no "module." prefix) unless unwrap is False. Under
        zero_stage 3 (FSDP's FULL_SHARD) its units are gathered one at a time into copies on the main process,
        the others getting an empty dict, as Accelerate's FSDP gives its full state dict to rank 0 only
        (collective: every process calls it)."""
        hosted = None if self._torch_objects is None else self._torch_objects.hosted_of(model)
        if isinstance(model, Model) and model.num_units():
            hosted = model  # a TorchScript model the library shards: gathered by the library
        if not hasattr(hosted, "whole_state_dict"):
            return (self.unwrap_model(model) if unwrap else model).state_dict()
        whole = hosted.whole_state_dict(keep=self.is_main_process)
        return whole if unwrap or not whole else type(whole)((f"module.{name}", value) for name, value in whole.items())

    def summon_full_params(self, model, writeback=True, rank0_only=False, offload_to_cpu=False, with_grads=False):
        """FSDP's summon_full_params as a method of the Accelerator (torch's FSDP.summon_full_params finds no FSDP
        module in what accel prepares, and does nothing): `with accelerator.summon_full_params(model):` the
        module's parameters hold their whole values; under zero_stage 3 (FSDP's FULL_SHARD) every unit is
        gathered (collective: every process enters the block) and, with writeback, what the block changed is
        written into each process's shares as it leaves (accel._torch_sharded_state_dict). Elsewhere the
        parameters are whole already and the block runs as it is. rank0_only with writeback is a ValueError,
        as in FSDP (otherwise every process gathers); offload_to_cpu holds the whole parameters in host memory
        for the block, gathered on the device a unit at a time (FSDP's; nothing more on the CPU); with_grads
        gives each parameter its averaged gradient as .grad for the block; a TorchScript Model the library
        shards is UnsupportedError (get_state_dict gathers it)."""
        if rank0_only and writeback:
            raise ValueError("summon_full_params: rank0_only=True with writeback=True is not supported (as in FSDP)")
        if isinstance(model, Model) and model.num_units():
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, "summon_full_params: a TorchScript Model's parameters "
                                   "live in the library; get_state_dict(model) gathers them")
        hosted = None if self._torch_objects is None else self._torch_objects.hosted_of(model)
        if not hasattr(hosted, "summoned"):
            return contextlib.nullcontext()
        from ._torch_sharded_state_dict import summon_full_params
        return summon_full_params(hosted, writeback, offload_to_cpu, with_grads)

    def skip_first_batches(self, dataloader, num_batches=0):
        """The next epoch of dataloader skips its first num_batches batches (in place; returned for
        Accelerate's `dataloader = accelerator.skip_first_batches(dataloader, n)`)."""
        if not hasattr(dataloader, "skip_first_batches"):
            raise TypeError(f"skip_first_batches takes a prepared data loader, not {describe_kind(dataloader)}")
        dataloader.skip_first_batches(num_batches)
        return dataloader
