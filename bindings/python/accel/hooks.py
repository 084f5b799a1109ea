"""accel.hooks: Accelerate's model hooks (accelerate.hooks), what runs a model whose layers sit on several
devices or are offloaded: a hook replaces a module's forward with one that first moves the inputs (and,
for offloaded layers, the weights) to the module's execution device, runs the module, then puts offloaded
weights back on the meta device and, for the outermost module, the outputs back where the inputs were.
dispatch_model, cpu_offload and disk_offload (accel.big_modeling) attach them."""
import functools

import torch

from .utils.module_tensors import get_non_persistent_buffers, named_module_tensors, set_module_tensor_to_device
from .utils.offload import PrefixedDataset
from .utils.operations import find_device, send_to_device

# Methods dispatch_model puts on a model instance (warnings on moving it), taken off with its hooks.
_DISPATCH_ATTRIBUTES = ("to", "cuda")


class ModelHook:
    """Callbacks around a module's forward, which unlike torch's hooks see the keyword arguments too.
    no_grad: the forward itself runs under torch.no_grad()."""

    no_grad = False

    def init_hook(self, module):
        """Runs when the hook is attached; returns the module."""
        return module

    def pre_forward(self, module, *args, **kwargs):
        """Runs before forward; returns the (args, kwargs) forward gets."""
        return args, kwargs

    def post_forward(self, module, output):
        """Runs after forward; returns the output the caller gets."""
        return output

    def detach_hook(self, module):
        """Runs when the hook is removed; returns the module."""
        return module


class SequentialHook(ModelHook):
    """Several hooks run in order at each event."""

    def __init__(self, *hooks):
        self.hooks = hooks

    def init_hook(self, module):
        for hook in self.hooks:
            module = hook.init_hook(module)
        return module

    def pre_forward(self, module, *args, **kwargs):
        for hook in self.hooks:
            args, kwargs = hook.pre_forward(module, *args, **kwargs)
        return args, kwargs

    def post_forward(self, module, output):
        for hook in self.hooks:
            output = hook.post_forward(module, output)
        return output

    def detach_hook(self, module):
        for hook in self.hooks:
            module = hook.detach_hook(module)
        return module


def _hooked_forward(module, *args, **kwargs):
    hook = module._hf_hook
    args, kwargs = hook.pre_forward(module, *args, **kwargs)
    if hook.no_grad:
        with torch.no_grad():
            output = module._old_forward(*args, **kwargs)
    else:
        output = module._old_forward(*args, **kwargs)
    return hook.post_forward(module, output)


def add_hook_to_module(module, hook, append=False):
    """Attaches hook to module (in place; the module is returned): its forward becomes the hook's pre_forward,
    the original forward, then post_forward. A hook already there is replaced, or with append kept and run
    first (a SequentialHook of both). remove_hook_from_module restores the original forward."""
    if append and getattr(module, "_hf_hook", None) is not None:
        previous = module._hf_hook
        remove_hook_from_module(module)
        hook = SequentialHook(previous, hook)
    if not (hasattr(module, "_hf_hook") and hasattr(module, "_old_forward")):
        module._old_forward = module.forward
    module = hook.init_hook(module)
    module._hf_hook = hook
    forward = functools.update_wrapper(functools.partial(_hooked_forward, module), module._old_forward)
    if "GraphModuleImpl" in str(type(module)):
        # An fx GraphModule's class forward is what it calls; an instance attribute would freeze its graph.
        type(module).forward = forward
    else:
        module.forward = forward
    return module


def remove_hook_from_module(module, recurse=False):
    """Detaches module's hook (running its detach_hook) and restores its forward; also takes off the
    move warnings dispatch_model added. recurse: the submodules' hooks too. Returns the module."""
    if hasattr(module, "_hf_hook"):
        module._hf_hook.detach_hook(module)
        del module._hf_hook
    if hasattr(module, "_old_forward"):
        if "GraphModuleImpl" in str(type(module)):
            type(module).forward = module._old_forward
        else:
            module.forward = module._old_forward
        del module._old_forward
    for attribute in _DISPATCH_ATTRIBUTES:
        module.__dict__.pop(attribute, None)
    if recurse:
        for child in module.children():
            remove_hook_from_module(child, recurse)
    return module


def remove_hook_from_submodules(module):
    """remove_hook_from_module on module and every module under it."""
    remove_hook_from_module(module, recurse=True)


class AlignDevicesHook(ModelHook):
    """Runs a module on execution_device: moves its inputs there (not the kwargs named in skip_keys) and,
    unless offload, its weights once when attached. offload: the weights live in weights_map (a mapping of
    the module's tensor names; by default a CPU copy of them) and the module holds meta tensors, filled on
    the execution device for each forward and emptied after it; offload_buffers offloads the buffers too
    (otherwise they stay on the execution device). io_same_device: outputs go back to the inputs' device.
    place_submodules: the submodules' tensors are handled with the module's own. tied_params_map
    ({data_ptr: {device: tensor}}) lets tied weights share one copy per execution device."""

    def __init__(self, execution_device=None, offload=False, io_same_device=False, weights_map=None,
                 offload_buffers=False, place_submodules=False, skip_keys=None, tied_params_map=None):
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.tied_params_map = tied_params_map
        self.input_device = None
        self.original_devices = {}
        # Names of offloaded tensors that are tied weights: their copies on the execution device are shared
        # (tied_params_map) and released after each forward.
        self.tied_params_names = set()
        self.tied_pointers_to_remove = set()

    def __repr__(self):
        return (f"AlignDevicesHook(execution_device={self.execution_device}, offload={self.offload}, "
                f"io_same_device={self.io_same_device}, offload_buffers={self.offload_buffers}, "
                f"place_submodules={self.place_submodules}, skip_keys={repr(self.skip_keys)})")

    def _offloaded_tensors(self, module):
        # Non-persistent buffers are in no state dict, so never in weights_map: they stay where they are.
        return named_module_tensors(module, include_buffers=self.offload_buffers, recurse=self.place_submodules,
                                    remove_non_persistent=True)

    def init_hook(self, module):
        if self.execution_device in ("meta", torch.device("meta")):
            # Every meta tensor has data_ptr 0: pointers cannot tell tied weights apart there.
            self.tied_params_map = None
        if not self.offload:
            if self.execution_device is not None:
                for name, _ in named_module_tensors(module, recurse=self.place_submodules):
                    set_module_tensor_to_device(module, name, self.execution_device,
                                                tied_params_map=self.tied_params_map)
            return module
        self.original_devices = {name: tensor.device
                                 for name, tensor in named_module_tensors(module, recurse=self.place_submodules)}
        if self.weights_map is None:
            self.weights_map = {name: tensor.to("cpu") for name, tensor in named_module_tensors(
                module, include_buffers=self.offload_buffers, recurse=self.place_submodules)}
        for name, tensor in list(self._offloaded_tensors(module)):
            if self.tied_params_map is not None and tensor.data_ptr() in self.tied_params_map:
                self.tied_params_names.add(name)
            set_module_tensor_to_device(module, name, "meta")
        if self.execution_device is not None:
            staying = (get_non_persistent_buffers(module, recurse=self.place_submodules) if self.offload_buffers
                       else [name for name, _ in module.named_buffers(recurse=self.place_submodules)])
            for name in staying:
                set_module_tensor_to_device(module, name, self.execution_device, tied_params_map=self.tied_params_map)
        return module

    def pre_forward(self, module, *args, **kwargs):
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            self.tied_pointers_to_remove = set()
            for name, _ in list(self._offloaded_tensors(module)):
                value = self.weights_map[name]
                if self.tied_params_map is not None:
                    # A tied weight read from weights_map has its own pointer: registering it lets the other names
                    # of the weight reuse this copy; it is released after the forward.
                    pointer = value.data_ptr()
                    if name in self.tied_params_names:
                        self.tied_params_map.setdefault(pointer, {})
                    if pointer in self.tied_params_map and self.execution_device not in self.tied_params_map[pointer]:
                        self.tied_pointers_to_remove.add((pointer, self.execution_device))
                set_module_tensor_to_device(module, name, self.execution_device, value=value,
                                            tied_params_map=self.tied_params_map)
        return (send_to_device(args, self.execution_device),
                send_to_device(kwargs, self.execution_device, skip_keys=self.skip_keys))

    def post_forward(self, module, output):
        if self.offload:
            for name, _ in list(self._offloaded_tensors(module)):
                set_module_tensor_to_device(module, name, "meta")
            # The shared copies made for this forward go, so that their memory is freed.
            for pointer, device in self.tied_pointers_to_remove:
                self.tied_params_map[pointer].pop(device, None)
            self.tied_pointers_to_remove = set()
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output

    def detach_hook(self, module):
        if self.offload:
            for name, device in self.original_devices.items():
                if device != torch.device("meta"):
                    set_module_tensor_to_device(module, name, device, value=self.weights_map.get(name, None))
        return module


def attach_execution_device_hook(module, execution_device, skip_keys=None, preload_module_classes=None,
                                 tied_params_map=None):
    """An AlignDevicesHook for execution_device on module and every module under it that has tensors and no
    hook yet (so that inputs reach each one's device), stopping below modules of preload_module_classes."""
    if not hasattr(module, "_hf_hook") and len(module.state_dict()) > 0:
        add_hook_to_module(module, AlignDevicesHook(execution_device, skip_keys=skip_keys,
                                                    tied_params_map=tied_params_map))
    if preload_module_classes is not None and type(module).__name__ in preload_module_classes:
        return
    for child in module.children():
        attach_execution_device_hook(child, execution_device, skip_keys=skip_keys,
                                     preload_module_classes=preload_module_classes, tied_params_map=tied_params_map)


def attach_align_device_hook(module, execution_device=None, offload=False, weights_map=None, offload_buffers=False,
                             module_name="", skip_keys=None, preload_module_classes=None, tied_params_map=None):
    """An AlignDevicesHook on module and every module under it that holds tensors of its own. weights_map
    holds the whole model's offloaded weights by full name; each hook sees its module's part. A module of
    preload_module_classes (offloading) gets one hook for its whole subtree, which loads all its weights
    before its forward: for modules that use their submodules' weights without calling them."""
    preloads_subtree = offload and type(module).__name__ in (preload_module_classes or ())
    if any(True for _ in named_module_tensors(module)) or preloads_subtree:
        prefix = f"{module_name}." if module_name else ""
        hook = AlignDevicesHook(execution_device=execution_device, offload=offload,
                                weights_map=None if weights_map is None else PrefixedDataset(weights_map, prefix),
                                offload_buffers=offload_buffers, place_submodules=preloads_subtree,
                                skip_keys=skip_keys, tied_params_map=tied_params_map)
        add_hook_to_module(module, hook, append=True)
    if preloads_subtree:
        return
    for child_name, child in module.named_children():
        attach_align_device_hook(child, execution_device=execution_device, offload=offload, weights_map=weights_map,
                                 offload_buffers=offload_buffers, module_name=_join(module_name, child_name),
                                 skip_keys=skip_keys, preload_module_classes=preload_module_classes,
                                 tied_params_map=tied_params_map)


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def attach_align_device_hook_on_blocks(module, execution_device=None, offload=False, weights_map=None,
                                       offload_buffers=False, module_name="", skip_keys=None,
                                       preload_module_classes=None, tied_params_map=None):
    """The hooks dispatch_model needs, block by block: execution_device and offload are one value for the
    whole module or dicts by module name (a device map's blocks). A block that is not offloaded moves to its
    device once and gets its inputs moved there; an offloaded block gets attach_align_device_hook's
    per-module hooks; the whole model (module_name "") returns its outputs to the inputs' device."""
    if not isinstance(execution_device, dict) and not isinstance(offload, dict):
        if offload:
            attach_align_device_hook(module, execution_device=execution_device, offload=True, weights_map=weights_map,
                                     offload_buffers=offload_buffers, module_name=module_name, skip_keys=skip_keys,
                                     tied_params_map=tied_params_map)
        else:
            add_hook_to_module(module, AlignDevicesHook(execution_device=execution_device, io_same_device=True,
                                                        skip_keys=skip_keys, place_submodules=True,
                                                        tied_params_map=tied_params_map))
        return
    if not isinstance(execution_device, dict):
        execution_device = {name: execution_device for name in offload}
    if not isinstance(offload, dict):
        offload = {name: offload for name in execution_device}

    is_block = module_name in execution_device and module_name in offload
    if is_block and not offload[module_name]:
        add_hook_to_module(module, AlignDevicesHook(execution_device=execution_device[module_name],
                                                    offload_buffers=offload_buffers, io_same_device=(module_name == ""),
                                                    place_submodules=True, skip_keys=skip_keys,
                                                    tied_params_map=tied_params_map))
        attach_execution_device_hook(module, execution_device[module_name], tied_params_map=tied_params_map)
    elif is_block:
        attach_align_device_hook(module, execution_device=execution_device[module_name], offload=True,
                                 weights_map=weights_map, offload_buffers=offload_buffers, module_name=module_name,
                                 skip_keys=skip_keys, preload_module_classes=preload_module_classes,
                                 tied_params_map=tied_params_map)
        if not hasattr(module, "_hf_hook"):
            add_hook_to_module(module, AlignDevicesHook(execution_device=execution_device[module_name],
                                                        io_same_device=(module_name == ""), skip_keys=skip_keys,
                                                        tied_params_map=tied_params_map))
        attach_execution_device_hook(module, execution_device[module_name],
                                     preload_module_classes=preload_module_classes, skip_keys=skip_keys,
                                     tied_params_map=tied_params_map)
    elif module_name == "":
        add_hook_to_module(module, AlignDevicesHook(execution_device=execution_device.get(""), io_same_device=True,
                                                    skip_keys=skip_keys, tied_params_map=tied_params_map))
    for child_name, child in module.named_children():
        attach_align_device_hook_on_blocks(child, execution_device=execution_device, offload=offload,
                                           weights_map=weights_map, offload_buffers=offload_buffers,
                                           module_name=_join(module_name, child_name), skip_keys=skip_keys,
                                           preload_module_classes=preload_module_classes,
                                           tied_params_map=tied_params_map)


def _default_execution_device():
    """Accelerate's PartialState().default_device, without starting a state: CUDA when there is one."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


class CpuOffload(ModelHook):
    """Keeps a model on the CPU until its forward, which moves it to execution_device (default: CUDA when
    available, else the CPU) and leaves it there; prev_module_hook (a UserCpuOffloadHook) is offloaded
    first, so that a pipeline holds one model at a time on the device."""

    def __init__(self, execution_device=None, prev_module_hook=None):
        self.prev_module_hook = prev_module_hook
        self.execution_device = execution_device if execution_device is not None else _default_execution_device()

    def init_hook(self, module):
        return module.to("cpu")

    def pre_forward(self, module, *args, **kwargs):
        if self.prev_module_hook is not None:
            self.prev_module_hook.offload()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        module.to(self.execution_device)
        return send_to_device(args, self.execution_device), send_to_device(kwargs, self.execution_device)


class UserCpuOffloadHook:
    """A model and its CpuOffload hook: offload() puts the model back on the CPU, remove() takes the hook off."""

    def __init__(self, model, hook):
        self.model = model
        self.hook = hook

    def offload(self):
        self.hook.init_hook(self.model)

    def remove(self):
        remove_hook_from_module(self.model)
