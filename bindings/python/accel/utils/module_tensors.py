"""A torch module's tensors by name: listing them, sizing their dtypes, moving or replacing one (on the meta
device too), and finding and restoring tied parameters. Accelerate's helpers of the same names
(accelerate.utils.modeling), which device maps, checkpoint loading and the hooks are built on."""
import inspect
import re

import torch

from .._loggers import library_logger
from .._library import lib
from ..errors import UnsupportedError
from .._sizes import convert_file_size_to_int  # noqa: F401 - Accelerate's modeling module has it

logger = library_logger(__name__)

# The dtypes set_module_tensor_to_device and device-map sizing never convert: integer and bool tensors keep
# theirs whatever dtype a checkpoint is loaded in.
_KEPT_DTYPE_PREFIXES = ("torch.uint", "torch.int", "torch.bool")

def keeps_its_dtype(tensor):
    """Whether a dtype conversion of loaded weights leaves this tensor's dtype alone (integers, bool)."""
    return str(tensor.dtype).startswith(_KEPT_DTYPE_PREFIXES)


def dtype_byte_size(dtype):
    """Bytes one element of dtype takes, as Accelerate counts them: 1/8 for bool, else the bit width of the
    dtype's name / 8 (torch.float16 -> 2)."""
    if dtype == torch.bool:
        return 1 / 8
    bits = re.search(r"[^\d](\d+)$", str(dtype))
    if bits is None:
        raise ValueError(f"`dtype` is not a valid dtype: {dtype}.")
    return int(bits.group(1)) // 8


def get_non_persistent_buffers(module, recurse=False):
    """The names of module's buffers that are left out of its state_dict (register_buffer(...,
    persistent=False)); with recurse, its submodules' too, by their full names."""
    modules = module.named_modules() if recurse else [("", module)]
    return {f"{prefix}.{name}" if prefix else name
            for prefix, submodule in modules for name in submodule._non_persistent_buffers_set}


def named_module_tensors(module, include_buffers=True, recurse=False, remove_non_persistent=False):
    """(name, tensor) of module's parameters, then of its buffers (include_buffers), its own only or with
    its submodules' (recurse); remove_non_persistent leaves out the buffers no state_dict holds."""
    yield from module.named_parameters(recurse=recurse)
    if include_buffers:
        left_out = get_non_persistent_buffers(module, recurse=recurse) if remove_non_persistent else set()
        for name, buffer in module.named_buffers(recurse=recurse):
            if name not in left_out:
                yield name, buffer


def _owner_of(module, tensor_name):
    """(the submodule holding tensor_name, the tensor's own name in it), for a dotted name."""
    *path, name = tensor_name.split(".")
    for part in path:
        child = getattr(module, part, None)
        if child is None:
            raise ValueError(f"{module} has no attribute {part}.")
        module = child
    return module, name


def _torch_device(device):
    """Accelerate's device spellings as torch's: an int is that CUDA device, "disk" has no torch device."""
    return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)


def set_module_tensor_to_device(module, tensor_name, device, value=None, dtype=None, fp16_statistics=None,
                                tied_params_map=None):
    """Puts the parameter or buffer tensor_name (dotted: "layer.0.weight") of module on device, in place of
    the old tensor (a parameter stays a parameter of the same class, with its requires_grad). value, when
    given, becomes its contents (its shape must be the old one's: ValueError otherwise), converted to dtype,
    or without dtype to the old tensor's dtype; integer and bool values keep theirs. Without value the
    tensor moves, which a tensor on the meta device cannot (ValueError: it has no data).

    tied_params_map ({data_ptr: {device: tensor}}) lets tied weights share one copy per device: a tensor
    whose old or new data is already placed on device takes that copy, and the first placement is recorded.
    fp16_statistics belongs to bitsandbytes' 8-bit weights, which accel does not support: it must be None."""
    if fp16_statistics is not None:
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                               "fp16_statistics: bitsandbytes' 8-bit weights are not supported by accel")
    module, name = _owner_of(module, tensor_name)
    if name not in module._parameters and name not in module._buffers:
        raise ValueError(f"{module} does not have a parameter or a buffer named {name}.")
    is_buffer = name in module._buffers
    old = getattr(module, name)

    if tied_params_map is not None:
        for pointer in ([value.data_ptr()] if value is not None else []) + [old.data_ptr()]:
            if device in tied_params_map.get(pointer, {}):
                module._parameters[name] = tied_params_map[pointer][device]
                return

    target = _torch_device(device)
    if old.device.type == "meta" and target.type != "meta" and value is None:
        raise ValueError(f"{name} is on the meta device, we need a `value` to put in on {device}.")
    if value is not None:
        if old.shape != value.shape:
            raise ValueError(f'Trying to set a tensor of shape {value.shape} in "{name}" (which has shape '
                             f"{old.shape}), this looks incorrect.")
        if dtype is None:
            # As torch's load_state_dict: the checkpoint's values take the model's dtype.
            value = value.to(old.dtype)
        elif not keeps_its_dtype(value):
            value = value.to(dtype)

    with torch.no_grad():
        if value is None:
            new = old.to(target)
            if dtype is not None and target.type == "meta" and not keeps_its_dtype(old):
                new = new.to(dtype)
        else:
            new = value.to(target)
        if is_buffer:
            module._buffers[name] = new
        elif value is not None or new is not old or new.dtype != old.dtype:
            new = type(module._parameters[name])(new, requires_grad=old.requires_grad)
            module._parameters[name] = new
        placed = getattr(module, name)

    if tied_params_map is not None:
        for pointer in [old.data_ptr()] + ([value.data_ptr()] if value is not None else []):
            if pointer in tied_params_map and device not in tied_params_map[pointer]:
                tied_params_map[pointer][device] = placed
                break


def _all_named_parameters(model):
    """(name, parameter) of every parameter under every name it has: a parameter shared by two modules (or a
    module used twice) comes once per name, which torch 1.13's named_parameters cannot give."""
    def walk(module, prefix):
        for name, parameter in module._parameters.items():
            if parameter is not None:
                yield prefix + name, parameter
        for name, child in module._modules.items():
            if child is not None:
                yield from walk(child, f"{prefix}{name}.")
    return walk(model, "")


def find_tied_parameters(model, **kwargs):
    """The groups of names that are one parameter (tied weights: an embedding and an output layer holding
    one matrix), each group's names sorted, the groups in the model's order: [["linear1.weight",
    "linear2.weight"]]. kwargs: accepted for Accelerate's signature, unused."""
    groups = {}
    for name, parameter in _all_named_parameters(model):
        groups.setdefault(id(parameter), []).append(name)
    return [sorted(names) for names in groups.values() if len(names) > 1]


def retie_parameters(model, tied_params):
    """Ties again each group of tied_params (find_tied_parameters' lists): every name becomes the group's
    first parameter that is not on the meta device (a group all on meta is left as it is)."""
    for group in tied_params:
        owners = [_owner_of(model, name) for name in group]
        kept = next((getattr(module, name) for module, name in owners
                     if getattr(module, name).device.type != "meta"), None)
        if kept is not None:
            for module, name in owners:
                setattr(module, name, kept)


def check_tied_parameters_in_config(model):
    """Whether a transformers model's configuration says weights should be tied (tie_word_embeddings with
    output embeddings, tie_encoder_decoder, or a module with _tie_weights); False for any other model."""
    if "PreTrainedModel" not in [cls.__name__ for cls in inspect.getmro(type(model))]:
        return False
    config = getattr(model, "config", None)
    return bool((getattr(config, "tie_word_embeddings", False) and model.get_output_embeddings())
                or (getattr(config, "is_encoder_decoder", False) and getattr(config, "tie_encoder_decoder", False))
                or any(hasattr(module, "_tie_weights") for module in model.modules()))


def warn_if_untied(model, tied_params):
    """Accelerate's warning for a transformers model that should have tied weights but has none."""
    if not tied_params and check_tied_parameters_in_config(model):
        logger.warning("The model weights are not tied. Please use the `tie_weights` method before using the "
                       "`infer_auto_device` function.")


def device_of(name, device_map):
    """The device device_map gives a tensor or module name: that of its longest prefix in the map (the
    whole model's, "", last). KeyError when nothing covers it."""
    while name not in device_map:
        if name == "":
            raise KeyError(name)
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return device_map[name]


def check_tied_parameters_on_same_device(tied_params, device_map):
    """Warns when a device map puts the names of one tied group on different devices."""
    for group in tied_params:
        devices = {name: device_of(name, device_map) for name in group}
        if len(set(devices.values())) > 1:
            logger.warning(f"Tied parameters are on different devices: {devices}. Please modify your custom device "
                           "map or set `device_map='auto'`. ")


def check_device_map(model, device_map):
    """ValueError naming every tensor of model's state_dict that device_map gives no device."""
    uncovered = [name for name in model.state_dict() if not _covered(name, device_map)]
    if uncovered:
        raise ValueError("The device_map provided does not give any device for the following parameters: "
                         + ", ".join(uncovered))


def check_devices_exist(device_map):
    """ValueError naming the first entry of device_map whose CUDA device this machine does not have."""
    for name, device in device_map.items():
        if device in ("cpu", "disk"):
            continue
        device = _torch_device(device)
        if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
            raise ValueError(f"the device map puts {name or 'the model'!r} on {device}, but torch sees "
                             f"{torch.cuda.device_count()} CUDA device(s) here")


def _covered(name, device_map):
    try:
        device_of(name, device_map)
        return True
    except KeyError:
        return False

