"""accel.big_modeling: Accelerate's big-model inference (accelerate.big_modeling). A model too big to build in
memory is made on the meta device (init_empty_weights: shapes and dtypes, no data), given a device map
(infer_auto_device_map: its modules spread over the GPUs, the CPU and the disk within a memory budget), then
filled from a checkpoint straight onto those devices (load_checkpoint_and_dispatch). dispatch_model
attaches the hooks (accel.hooks) that run such a model: each block's inputs moved to its device, weights
offloaded to the CPU or disk brought to the execution device for the block's forward and dropped after
it. cpu_offload and disk_offload do that for a whole model."""
import contextlib
import functools
import os

import torch
import torch.nn as nn

from ._loggers import library_logger
from .hooks import (AlignDevicesHook, CpuOffload, UserCpuOffloadHook, add_hook_to_module, attach_align_device_hook,
                    attach_align_device_hook_on_blocks)
from .utils.device_map import get_balanced_memory, infer_auto_device_map
from .utils.modeling import load_checkpoint_in_model
from .utils.module_tensors import check_device_map, check_devices_exist, find_tied_parameters, retie_parameters
from .utils.offload import INDEX_FILE, OffloadedWeightsLoader, extract_submodules_state_dict, offload_state_dict

logger = library_logger(__name__)

# Accelerate's str_to_bool spellings, for ACCELERATE_INIT_INCLUDE_BUFFERS.
_TRUE_WORDS, _FALSE_WORDS = ("y", "yes", "t", "true", "on", "1"), ("n", "no", "f", "false", "off", "0")
_DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
_OFFLOAD_DEVICES = ("cpu", "disk")


def _include_buffers_default():
    """ACCELERATE_INIT_INCLUDE_BUFFERS as a bool (unset: False), the default of include_buffers."""
    value = os.environ.get("ACCELERATE_INIT_INCLUDE_BUFFERS", "false").lower()
    if value not in _TRUE_WORDS + _FALSE_WORDS:
        raise ValueError(f"If set, ACCELERATE_INIT_INCLUDE_BUFFERS must be yes or no, not {value!r}.")
    return value in _TRUE_WORDS


@contextlib.contextmanager
def init_empty_weights(include_buffers=None):
    """Within the block, modules are built with their parameters (and with include_buffers their buffers;
    default ACCELERATE_INIT_INCLUDE_BUFFERS, else False) on the meta device: shapes and dtypes without
    memory, so that a model of any size is built at once. Fill it with load_checkpoint_and_dispatch (with a
    device_map) or load_checkpoint_in_model."""
    with init_on_device(torch.device("meta"), include_buffers=include_buffers) as context:
        yield context


@contextlib.contextmanager
def init_on_device(device, include_buffers=None):
    """Within the block, modules are built with their parameters (and with include_buffers their buffers)
    on device. The parameters keep their class, requires_grad and attributes."""
    if include_buffers is None:
        include_buffers = _include_buffers_default()
    if include_buffers and hasattr(torch.device, "__enter__"):
        # torch >= 2.0: the device as a context sets the default device of every tensor made in the block.
        with torch.device(device):
            yield
        return
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer
    target = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)

    def register_parameter_on_device(module, name, param):
        register_parameter(module, name, param)
        # A parameter already there is kept as it is: assigning one module's parameter to another (tying
        # weights in __init__) keeps them one parameter.
        if param is not None and param.device != target:
            registered = module._parameters[name]
            moved = type(registered)(registered.to(device), requires_grad=registered.requires_grad)
            moved.__dict__.update(registered.__dict__)
            module._parameters[name] = moved

    def register_buffer_on_device(module, name, tensor, persistent=True):
        register_buffer(module, name, tensor, persistent=persistent)
        if tensor is not None:
            module._buffers[name] = module._buffers[name].to(device)

    def on_device(constructor):
        @functools.wraps(constructor)
        def construct(*args, **kwargs):
            kwargs["device"] = device
            return constructor(*args, **kwargs)
        return construct

    # Buffers made by a constructor and assigned as plain attributes never pass register_buffer: with
    # include_buffers the constructors themselves make them on device (what torch >= 2.0's device context does).
    constructors = {}
    if include_buffers:
        constructors = {name: getattr(torch, name) for name in ("empty", "zeros", "ones", "full")}
    try:
        nn.Module.register_parameter = register_parameter_on_device
        if include_buffers:
            nn.Module.register_buffer = register_buffer_on_device
        for name, constructor in constructors.items():
            setattr(torch, name, on_device(constructor))
        yield
    finally:
        nn.Module.register_parameter = register_parameter
        nn.Module.register_buffer = register_buffer
        for name, constructor in constructors.items():
            setattr(torch, name, constructor)


def _first_parameter_device(model):
    return next(iter(model.parameters())).device


def cpu_offload(model, execution_device=None, offload_buffers=False, state_dict=None, preload_module_classes=None):
    """Keeps model's weights in one state dict on the CPU (state_dict, by default a CPU copy of model's) and
    runs each module on execution_device (default: where the first parameter is) with its weights brought
    there for its forward only. offload_buffers: buffers too. preload_module_classes: class names of modules
    whose whole subtree's weights are loaded before their forward (for modules that use submodules'
    weights without calling them). Returns model, hooked in place."""
    if execution_device is None:
        execution_device = _first_parameter_device(model)
    if state_dict is None:
        state_dict = {name: tensor.to("cpu") for name, tensor in model.state_dict().items()}
    add_hook_to_module(model, AlignDevicesHook(io_same_device=True), append=True)
    attach_align_device_hook(model, execution_device=execution_device, offload=True, offload_buffers=offload_buffers,
                             weights_map=state_dict, preload_module_classes=preload_module_classes)
    return model


def cpu_offload_with_hook(model, execution_device=None, prev_module_hook=None):
    """Keeps model on the CPU until it runs; its forward moves it to execution_device (default CUDA when
    available, else the CPU), where it stays until the returned hook's offload() (or the next model's
    forward, given this hook as prev_module_hook). Returns (model, hook)."""
    hook = CpuOffload(execution_device=execution_device, prev_module_hook=prev_module_hook)
    add_hook_to_module(model, hook, append=True)
    return model, UserCpuOffloadHook(model, hook)


def disk_offload(model, offload_dir, execution_device=None, offload_buffers=False, preload_module_classes=None):
    """cpu_offload with the weights in files in offload_dir (written there from model unless the folder
    already holds an offload index), read for each module's forward."""
    if not os.path.isfile(os.path.join(offload_dir, INDEX_FILE)):
        offload_state_dict(offload_dir, model.state_dict())
    if execution_device is None:
        execution_device = _first_parameter_device(model)
    add_hook_to_module(model, AlignDevicesHook(io_same_device=True), append=True)
    attach_align_device_hook(model, execution_device=execution_device, offload=True, offload_buffers=offload_buffers,
                             weights_map=OffloadedWeightsLoader(save_folder=offload_dir),
                             preload_module_classes=preload_module_classes)
    return model


def _warn_on_move(method, model):
    """model.to / model.cuda of a dispatched model: a warning (the hooks place the weights), and
    RuntimeError when some weights are offloaded (on the meta device), which moving would lose."""
    @functools.wraps(method)
    def moving(*args, **kwargs):
        if method.__name__ != "to" or torch._C._nn._parse_to(*args, **kwargs)[0] is not None:
            logger.warning("You shouldn't move a model that is dispatched using accelerate hooks.")
        if any(param.device == torch.device("meta") for param in model.parameters()):
            raise RuntimeError("You can't move a model that has some modules offloaded to cpu or disk.")
        return method(*args, **kwargs)
    return moving


def dispatch_model(model, device_map, main_device=None, state_dict=None, offload_dir=None, offload_index=None,
                   offload_buffers=False, skip_keys=None, preload_module_classes=None, force_hooks=False):
    """Places model as device_map says ({module name: GPU index, "cpu", "disk" or device}; it must cover every
    tensor) and makes it run there: with one device the model simply moves to it (unless force_hooks); with
    several, hooks move each block's inputs to its device, and blocks on "cpu" (when a GPU is the main
    device) or "disk" are offloaded: their weights stay in state_dict / offload_dir (written there if the
    folder holds no index) and come to main_device (default: the first GPU of the map, else the CPU) for
    their forward. The outputs come back to the inputs' device. skip_keys: keyword inputs left where they
    are. Sets model.hf_device_map; returns model."""
    check_device_map(model, device_map)
    check_devices_exist(device_map)
    devices = set(device_map.values())
    if len(devices) == 1 and not force_hooks:
        device = next(iter(devices))
        if device == "disk":
            raise ValueError("You are trying to offload the whole model to the disk. Please use the `disk_offload` "
                             "function instead.")
        model.to(device)
        model.hf_device_map = dict(device_map)
        return model

    if main_device is None:
        main_device = next((device for device in device_map.values() if device not in _OFFLOAD_DEVICES), "cpu")
    if main_device != "cpu" and state_dict is None:
        cpu_modules = [name for name, device in device_map.items() if device == "cpu"]
        if cpu_modules:
            state_dict = extract_submodules_state_dict(model.state_dict(), cpu_modules)
    disk_modules = [name for name, device in device_map.items() if device == "disk"]
    if disk_modules and offload_dir is None and offload_index is None:
        raise ValueError("We need an `offload_dir` to dispatch this model according to this `device_map`, the "
                         f"following submodules need to be offloaded: {', '.join(disk_modules)}.")
    if disk_modules and offload_index is None and not os.path.isfile(os.path.join(offload_dir, INDEX_FILE)):
        offload_state_dict(offload_dir, extract_submodules_state_dict(model.state_dict(), disk_modules))

    execution_device = {name: main_device if device in _OFFLOAD_DEVICES else device
                        for name, device in device_map.items()}
    execution_device[""] = main_device
    # With the CPU as the main device, CPU blocks simply run there; only the disk is offloaded.
    offloaded = ("disk",) if main_device == "cpu" else _OFFLOAD_DEVICES
    offload = {name: device in offloaded for name, device in device_map.items()}
    save_folder = offload_dir if disk_modules else None
    weights_map = None
    if state_dict is not None or save_folder is not None or offload_index is not None:
        weights_map = OffloadedWeightsLoader(state_dict=state_dict, save_folder=save_folder, index=offload_index,
                                             device=main_device if offload_index is not None else None)
    tied_groups = find_tied_parameters(model)
    # One copy of each tied weight per device: the hooks share it through its original data pointer.
    tied_params_map = {_tensor(model, name).data_ptr(): {} for group in tied_groups for name in group}
    attach_align_device_hook_on_blocks(model, execution_device=execution_device, offload=offload,
                                       offload_buffers=offload_buffers, weights_map=weights_map, skip_keys=skip_keys,
                                       preload_module_classes=preload_module_classes, tied_params_map=tied_params_map)
    offloaded_to = " and ".join(device for device in devices if device in _OFFLOAD_DEVICES)
    if offloaded_to:
        logger.warning(f"Some parameters are on the meta device because they were offloaded to the {offloaded_to}.")
    # Attaching the hooks replaced parameters, which may have untied them.
    retie_parameters(model, tied_groups)
    model.to = _warn_on_move(model.to, model)
    model.cuda = _warn_on_move(model.cuda, model)
    model.hf_device_map = dict(device_map)
    return model


def _tensor(model, name):
    module_name, _, tensor_name = name.rpartition(".")
    return getattr(model.get_submodule(module_name) if module_name else model, tensor_name)


def load_checkpoint_and_dispatch(model, checkpoint, device_map=None, max_memory=None, no_split_module_classes=None,
                                 offload_folder=None, offload_buffers=False, dtype=None, offload_state_dict=None,
                                 skip_keys=None, preload_module_classes=None, force_hooks=False, strict=False):
    """load_checkpoint_in_model, then dispatch_model: the checkpoint loaded straight onto the devices of
    device_map, and the model made to run there. device_map may be a strategy: "auto" or "balanced" (the
    model spread evenly over the GPUs: get_balanced_memory), "balanced_low_0" (GPU 0 kept as free as
    possible), "sequential" (GPUs filled in order), all within max_memory, no_split_module_classes kept
    whole (infer_auto_device_map). Without device_map the checkpoint is loaded and nothing is dispatched.
    offload_state_dict defaults to True when the map offloads to disk. Returns model."""
    if isinstance(device_map, str):
        if device_map not in _DEVICE_MAP_STRATEGIES:
            raise ValueError("If passing a string for `device_map`, please choose 'auto', 'balanced', "
                             "'balanced_low_0' or 'sequential'.")
        if device_map != "sequential":
            max_memory = get_balanced_memory(model, max_memory=max_memory,
                                             no_split_module_classes=no_split_module_classes, dtype=dtype,
                                             low_zero=(device_map == "balanced_low_0"))
        device_map = infer_auto_device_map(model, max_memory=max_memory,
                                           no_split_module_classes=no_split_module_classes, dtype=dtype,
                                           offload_buffers=offload_buffers)
    if offload_state_dict is None and device_map is not None and "disk" in device_map.values():
        offload_state_dict = True
    load_checkpoint_in_model(model, checkpoint, device_map=device_map, offload_folder=offload_folder, dtype=dtype,
                             offload_state_dict=bool(offload_state_dict), offload_buffers=offload_buffers,
                             strict=strict)
    if device_map is None:
        return model
    return dispatch_model(model, device_map=device_map, offload_dir=offload_folder, offload_buffers=offload_buffers,
                          skip_keys=skip_keys, preload_module_classes=preload_module_classes, force_hooks=force_hooks)
