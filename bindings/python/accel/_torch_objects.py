"""What an Accelerator prepared of torch's own objects, and how it prepares them: nn.Modules
(accel.torch_model), optimizers and LR schedulers (accel._torch_optim), DataLoaders (accel._torch_loader).
Imported only once a torch object reaches the Accelerator, so numpy-only programs never load torch.

The state_dicts of torch optimizers and schedulers are checkpointed as objects any number of processes can
load (accel_state_register_parts_for_checkpointing) named as Accelerate names their files: "optimizer",
"optimizer_1", ..., "scheduler", ...; torch.save into rank<r>/custom_checkpoint_<name>.bin (an optimizer's
with the layout of what it steps: accel._torch_optim_state).
"""
import io

import torch

from . import _torch_loader, _torch_optim
from .torch_model import DataParallelModule, HostedModule, _low_precision_dtype, patch_forward_for_mixed_precision

TORCH_KINDS = ("torch_model", "torch_loader", "torch_optimizer", "torch_scheduler")


def _is_scheduler(value):
    lr_scheduler = torch.optim.lr_scheduler
    bases = tuple(getattr(lr_scheduler, name) for name in ("LRScheduler", "_LRScheduler", "ReduceLROnPlateau")
                  if hasattr(lr_scheduler, name))
    return isinstance(value, bases + (_torch_optim.AcceleratedScheduler,))


def materialize_meta_tensors(module, device, is_main_process, sharded=False):
    """Accelerate's cpu_ram_efficient_loading: processes other than the main one may build the module on the
    meta device (init_empty_weights: no weights read), since prepare gives every process the main process's
    parameters and buffers (a broadcast, FSDP's sync_module_states): their meta tensors are made anew,
    uninitialised, on the device, for it to fill (one Parameter per Parameter, so tied weights stay tied). With
    sharded (zero_stage 3 on several processes, or offloaded on one), whose prepare takes the trainable parameters' values a unit at
    a time from the main process and never reads the others', a trainable one becomes a single element
    expanded to its shape: no memory for the whole model. The main process's must hold values: ValueError
    naming them."""
    meta = [name for name, tensor in [*module.named_parameters(), *module.named_buffers()] if tensor.is_meta]
    if not meta:
        return
    if is_main_process:
        raise ValueError(f"prepare: the main process's module has tensors on the meta device ({', '.join(meta[:5])}"
                         f"{', ...' if len(meta) > 5 else ''}): every process starts from its values, so load its "
                         "weights there (the other processes may keep theirs on the meta device)")
    made = {}

    def anew(tensor):
        if id(tensor) not in made:
            is_parameter = isinstance(tensor, torch.nn.Parameter)
            if is_parameter and sharded and tensor.requires_grad:
                empty = torch.empty((), dtype=tensor.dtype, device=device).expand(tensor.shape)
            else:
                empty = torch.empty_like(tensor, device=device)
            made[id(tensor)] = torch.nn.Parameter(empty, tensor.requires_grad) if is_parameter else empty
        return made[id(tensor)]

    for sub in module.modules():
        for tensors in (sub._parameters, sub._buffers):
            for name, tensor in tensors.items():
                if tensor is not None and tensor.is_meta:
                    tensors[name] = anew(tensor)


def _to_device_but_trainable(module, device):
    """module.to(device) for its buffers and frozen parameters; the trainable parameters stay where they are."""
    with torch.no_grad():
        for sub in module.modules():
            for name, buffer in sub._buffers.items():
                if buffer is not None:
                    sub._buffers[name] = buffer.to(device)
            for parameter in sub._parameters.values():
                if parameter is not None and not parameter.requires_grad:
                    parameter.data = parameter.data.to(device)


def kind_of(value):
    """The torch kind of value ("torch_model", ...), "model" for a TorchScript module (run by accel
    itself), or None."""
    if isinstance(value, torch.jit.ScriptModule):
        return "model"
    if isinstance(value, torch.nn.Module):
        return "torch_model"
    if isinstance(value, torch.optim.Optimizer):
        return "torch_optimizer"
    if isinstance(value, torch.utils.data.DataLoader):
        return "torch_loader"
    if _is_scheduler(value):
        return "torch_scheduler"
    if isinstance(value, _torch_loader.PreparedLoader):
        return "torch_loader"
    return None


class TorchObjects:
    def __init__(self, accelerator):
        self._accelerator = accelerator
        self.hosted = []  # HostedModule, in preparation order
        # id(module) and id(its prepared wrapper) -> (that object, HostedModule). The object is kept, as
        # Accelerate's _models keeps the wrapper, so that its id is never another object's while it counts.
        self._hosted_by_id = {}
        self.given_back = {}  # id(accel Model of a hosted module) -> what prepare gave back for the module
        self._owner = {}  # id(parameter) -> HostedModule
        self.optimizers = []
        self.schedulers = []
        self.scaling = _torch_optim.GradScaling(accelerator)

    # --- modules ----------------------------------------------------------------------------------------

    def prepare_module(self, module):
        if self.hosted_of(module) is not None:  # prepared already: as Accelerate, given back as it is
            return module
        accelerator = self._accelerator
        device = torch.device(accelerator.device)
        sharded = accelerator._shards_parameters()
        materialize_meta_tensors(module, device, accelerator.is_main_process, sharded)
        if sharded:  # the trainable parameters go to the device a unit at a time, as prepare shards them
            _to_device_but_trainable(module, device)
        else:
            module.to(device)
        plugin = accelerator.state.fsdp_plugin
        if plugin is not None and plugin.activation_checkpointing:
            from ._torch_sharded import checkpoint_activations, wrap_policy
            checkpoint_activations(module, wrap_policy(plugin))
        if sharded:
            from ._torch_sharded import ShardedModule, wrap_policy
            wrap = wrap_policy(plugin, deepspeed=accelerator.state.deepspeed_plugin is not None)
            hosted = ShardedModule(module, accelerator._prepare_host_model, wrap, device,
                                   reshard_after_forward=plugin is None or plugin.reshard_after_forward,
                                   precision=(None, None, None) if plugin is None else plugin.precision(),
                                   forward_prefetch=plugin is None or plugin.forward_prefetch,
                                   backward_prefetch="BACKWARD_PRE" if plugin is None else plugin.backward_prefetch)
        else:
            hosted = HostedModule(module, accelerator._prepare_host_model, accelerator.num_processes > 1)
        dtype = _low_precision_dtype(accelerator.mixed_precision, device.type)
        if dtype is not None:
            to_fp32 = accelerator._model_settings.get("convert_outputs_to_fp32")
            patch_forward_for_mixed_precision(module, device.type, dtype, to_fp32 is None or to_fp32,
                                              accelerator.autocast_handler)
        prepared = module
        if accelerator.num_processes > 1:
            prepared = DataParallelModule(module, hosted, lambda: accelerator.no_sync(hosted.model))
        self.hosted.append(hosted)
        self._hosted_by_id[id(module)] = (module, hosted)
        self._hosted_by_id[id(prepared)] = (prepared, hosted)
        self.given_back[id(hosted.model)] = prepared
        for parameter in hosted.trainable.values():
            self._owner[id(parameter)] = hosted
        return prepared

    def hosted_of(self, value):
        """The HostedModule of a prepared module (or of its wrapper), or None."""
        prepared, hosted = self._hosted_by_id.get(id(value), (None, None))
        return hosted if prepared is value else None

    def owner_of(self, parameter):
        return self._owner.get(id(parameter))

    def unwrap(self, model):
        hosted = self.hosted_of(model)
        return hosted.module if hosted is not None else model

    # --- optimizers and schedulers ------------------------------------------------------------------------

    def prepare_optimizer(self, optimizer, zero_stage=0):
        """zero_stage 1, 2 or 3 (with several processes, or offloaded): the optimizer steps this process's share only
        (accel._torch_zero)."""
        if isinstance(optimizer, _torch_optim.AcceleratedOptimizer):
            return optimizer
        if any(parameter.is_meta for group in optimizer.param_groups for parameter in group["params"]):
            raise ValueError("prepare: the optimizer holds parameters on the meta device; a module built there is "
                             "given its tensors anew by prepare, so make the optimizer after prepare(model), from "
                             "the prepared module's parameters")
        prepared = _torch_optim.AcceleratedOptimizer(optimizer, self._accelerator, zero_stage=zero_stage)
        index = len(self.optimizers)
        # Loadable on any number of processes and at any stage (accel._torch_optim_state).
        self._accelerator._register_bytes_object("optimizer" if index == 0 else f"optimizer_{index}",
                                                 prepared.save_checkpoint_state, prepared.load_checkpoint_parts,
                                                 parts=True)
        self.optimizers.append(prepared)
        return prepared

    def prepare_scheduler(self, scheduler):
        if isinstance(scheduler, _torch_optim.AcceleratedScheduler):
            return scheduler
        inner = getattr(scheduler, "optimizer", None)
        matching = [optimizer for optimizer in self.optimizers if optimizer.optimizer is inner or optimizer is inner]
        accelerator = self._accelerator
        prepared = _torch_optim.AcceleratedScheduler(
            scheduler, matching or list(self.optimizers), accelerator,
            step_with_optimizer=accelerator._step_scheduler_with_optimizer,
            split_batches=bool(accelerator._loader_settings.get("split_batches")))
        self._register_state_dict(scheduler, "scheduler", len(self.schedulers))
        self.schedulers.append(prepared)
        return prepared

    def _register_state_dict(self, obj, kind, index):
        """obj's state_dict, the same on every process: a process loads its own rank's, or rank 0's where
        fewer processes saved (so it resumes on any number of processes)."""
        def save(file):
            torch.save(obj.state_dict(), file)

        def load(saved):
            rank = self._accelerator.process_index
            data = saved.read(rank if rank < saved.count() else 0)
            obj.load_state_dict(torch.load(io.BytesIO(data), map_location="cpu"))

        self._accelerator._register_bytes_object(kind if index == 0 else f"{kind}_{index}", save, load, parts=True)

    def optimizer_step_was_skipped(self):
        return any(optimizer.step_was_skipped for optimizer in self.optimizers)

    # --- lifetime -----------------------------------------------------------------------------------------

    def forget(self, gather_sharded=False):
        """free_memory (gather_sharded True) and close: the hooks come off the modules and nothing is held
        any more. gather_sharded: a module sharded by zero_stage 3 gets its whole parameters back first
        (collective: free_memory runs on every process, as the script around it); without it (close, which
        communicates nothing) such a module is left without values."""
        for hosted in self.hosted:
            if gather_sharded and hasattr(hosted, "gather_for_good"):
                hosted.gather_for_good()
            hosted.remove_hooks()
        self.hosted.clear()
        self._hosted_by_id.clear()
        self.given_back.clear()
        self._owner.clear()
        self.optimizers.clear()
        self.schedulers.clear()
