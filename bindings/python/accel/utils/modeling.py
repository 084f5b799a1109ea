"""accel.utils.modeling: Accelerate's accelerate.utils.modeling, for big models. This module loads
checkpoints into models (load_checkpoint_in_model, also into a model made under init_empty_weights, whose
tensors are on the meta device) and reads offloaded weights back; it also gives, under Accelerate's names,
the module-tensor helpers (accel.utils.module_tensors), device maps (accel.utils.device_map) and checkpoint
files (accel.utils.checkpoint_files) it is built on."""
import contextlib
import gc
import os
import shutil
import tempfile

import torch

from .._loggers import library_logger
from .._library import lib
from ..errors import UnsupportedError
from ..hooks import AlignDevicesHook
from .checkpoint_files import (SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME,
                               CheckpointContents, CheckpointFiles, load_state_dict)
from .device_map import (calculate_maximum_sizes, clean_device_map, compute_module_sizes,
                         compute_module_total_buffer_size, get_balanced_memory, get_max_layer_size, get_max_memory,
                         infer_auto_device_map)
from .module_tensors import (check_device_map, check_devices_exist, check_tied_parameters_in_config,
                             check_tied_parameters_on_same_device, convert_file_size_to_int, device_of,
                             dtype_byte_size, find_tied_parameters, get_non_persistent_buffers, keeps_its_dtype,
                             named_module_tensors, retie_parameters, set_module_tensor_to_device, warn_if_untied)
from .offload import load_offloaded_weight, offload_weight, save_offload_index

logger = library_logger(__name__)

__all__ = ["SAFE_WEIGHTS_INDEX_NAME", "SAFE_WEIGHTS_NAME", "WEIGHTS_INDEX_NAME", "WEIGHTS_NAME",
           "calculate_maximum_sizes", "check_device_map", "check_tied_parameters_in_config",
           "check_tied_parameters_on_same_device", "clean_device_map", "compute_module_sizes",
           "compute_module_total_buffer_size", "convert_file_size_to_int", "dtype_byte_size", "find_tied_parameters",
           "get_balanced_memory", "get_max_layer_size", "get_max_memory", "get_non_persistent_buffers",
           "get_state_dict_from_offload", "get_state_dict_offloaded_model", "infer_auto_device_map",
           "load_checkpoint_in_model", "load_offloaded_weights", "load_state_dict", "named_module_tensors",
           "retie_parameters", "set_module_tensor_to_device"]


def load_offloaded_weights(model, index, offload_folder):
    """Puts on the CPU, into model, every tensor index names, read from offload_folder (offload_weight's
    files)."""
    for name, info in (index or {}).items():
        weight = load_offloaded_weight(os.path.join(offload_folder, f"{name}.dat"), info)
        set_module_tensor_to_device(model, name, "cpu", value=weight)


def _as_dtype(dtype):
    return getattr(torch, dtype.replace("torch.", "")) if isinstance(dtype, str) else dtype


def _in_fp32_module(name, keep_in_fp32_modules):
    """Whether the tensor name lies in a module keep_in_fp32_modules names (a name of a module anywhere in the
    model, "wo" for every "...wo.weight"; or the tensor's full name)."""
    return any(key == name or f".{key}." in f".{name}" for key in keep_in_fp32_modules or ())


def _quoted(names):
    return ", ".join('"' + name + '"' for name in names)


class _CheckpointLoader:
    """One load_checkpoint_in_model call: the checks made before any tensor of the model changes, then each
    tensor placed as the device map says."""

    def __init__(self, model, checkpoint, device_map, offload_folder, dtype, offload_state_dict, offload_buffers,
                 keep_in_fp32_modules, strict):
        self.model, self.checkpoint, self.device_map = model, checkpoint, device_map
        self.offload_folder, self.dtype, self.offload_buffers = offload_folder, _as_dtype(dtype), offload_buffers
        self.keep_in_fp32_modules, self.strict = keep_in_fp32_modules, strict
        self.files = CheckpointFiles.resolve(checkpoint)
        self.contents = CheckpointContents(self.files)
        self.model_tensors = model.state_dict(keep_vars=True)
        self.buffer_names = {name for name, _ in model.named_buffers()}
        self.offload_index = {}
        self.state_dict_folder = tempfile.mkdtemp() if offload_state_dict else None
        self.state_dict_index = {}

    def targets(self):
        """{checkpoint name: [model names it fills]}: its own name, and the tied names left out of the file
        that it stands for."""
        targets = {name: [name] for name in self.model_tensors if name in self.contents.names}
        for left_out, stored in self.contents.aliases.items():
            if left_out in self.model_tensors:
                targets.setdefault(stored, []).append(left_out)
        return targets

    def check(self, tied_groups):
        """Everything that can be known before loading, so that a bad checkpoint changes nothing: missing and
        unexpected names (with strict), shapes, and a device for every tensor."""
        filled = {name for names in self.targets().values() for name in names}
        for group in tied_groups:
            if filled.intersection(group):
                filled.update(group)
        self.missing = [name for name in self.model_tensors if name not in filled]
        self.unexpected = sorted(self.contents.names - set(self.model_tensors))
        if self.strict and (self.missing or self.unexpected):
            # torch's load_state_dict message, naming the checkpoint too.
            problems = [f"{kind} key(s) in state_dict: {_quoted(names)}."
                        for kind, names in (("Missing", self.missing), ("Unexpected", self.unexpected)) if names]
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self.model).__name__} from {self.checkpoint}:"
                               "\n\t" + "\n\t".join(problems))
        mismatched = [f"{target}: checkpoint {list(self.contents.shapes[stored])}, model "
                      f"{list(self.model_tensors[target].shape)}"
                      for stored, targets in self.targets().items() if stored in self.contents.shapes
                      for target in targets if tuple(self.model_tensors[target].shape) != self.contents.shapes[stored]]
        if mismatched:
            raise ValueError(f"the checkpoint {self.checkpoint} does not fit the model: shapes differ for "
                             + "; ".join(mismatched))
        if self.device_map is not None:
            homeless = [name for names in self.targets().values() for name in names if not self._has_device(name)]
            if homeless:
                raise ValueError(f"{homeless[0]} doesn't have any device set." if len(homeless) == 1 else
                                 f"{', '.join(homeless)} don't have any device set.")

    def _has_device(self, name):
        try:
            device_of(name, self.device_map)
            return True
        except KeyError:
            return False

    def load(self):
        targets = self.targets()
        for path in self.files.files:
            tensors = self.contents.preloaded.pop(path, None)
            if tensors is None:
                tensors = load_state_dict(path, device_map=self.device_map)
            for stored, value in tensors.items():
                for target in targets.get(stored, ()):
                    self.place(target, value)
            del tensors
            gc.collect()  # the shard's memory goes before the next one is read
        save_offload_index(self.offload_index, self.offload_folder)
        if self.state_dict_folder is not None:
            load_offloaded_weights(self.model, self.state_dict_index, self.state_dict_folder)

    def _loaded_dtype(self, name, value):
        """The dtype a tensor is loaded in (None: the model's own)."""
        if self.dtype is None or not value.is_floating_point():
            return None
        if self.dtype == torch.float16 and _in_fp32_module(name, self.keep_in_fp32_modules):
            return torch.float32
        return self.dtype

    def place(self, name, value):
        current = self.model_tensors[name]
        dtype = self._loaded_dtype(name, value)
        if self.device_map is None:
            self._fill_in_place(name, current, value, dtype)
            return
        device = device_of(name, self.device_map)
        kept_in_memory = name in self.buffer_names and not self.offload_buffers
        if device == "disk" and not kept_in_memory:
            self._offload(name, current, value, dtype, self.offload_folder, self.offload_index)
        elif device == "disk" or (device == "cpu" and self.state_dict_folder is None):
            # A buffer of a disk-offloaded module stays with the model, on the CPU (the hooks move it to the
            # execution device): its values are the checkpoint's.
            set_module_tensor_to_device(self.model, name, "cpu", value=value, dtype=dtype)
        elif device == "cpu":
            self._offload(name, current, value, dtype, self.state_dict_folder, self.state_dict_index)
        else:
            set_module_tensor_to_device(self.model, name, device, value=value, dtype=dtype)

    def _fill_in_place(self, name, current, value, dtype):
        """Without a device map, torch's load_state_dict: the values copied into the model's tensors (which
        stay the same objects, on their devices, in their dtypes); a tensor on the meta device, which has
        no memory to copy into, is made on the CPU."""
        if current.device.type == "meta":
            set_module_tensor_to_device(self.model, name, "cpu", value=value, dtype=dtype)
            return
        if current.shape != value.shape:
            raise ValueError(f'Trying to set a tensor of shape {value.shape} in "{name}" (which has shape '
                             f"{current.shape}), this looks incorrect.")
        with torch.no_grad():
            current.copy_(value)

    def _offload(self, name, current, value, dtype, folder, index):
        """The tensor written to folder, in the dtype it is loaded in; the model keeps a meta tensor of it."""
        if dtype is None and not keeps_its_dtype(value):
            dtype = current.dtype
        loaded = value if dtype is None else value.to(dtype)
        set_module_tensor_to_device(self.model, name, "meta", dtype=loaded.dtype)
        offload_weight(loaded, name, folder, index=index)

    def report(self):
        if self.unexpected and not self.strict:
            logger.warning(f"Some weights of the model checkpoint at {self.checkpoint} were not used when initializing "
                           f"{type(self.model).__name__}: {self.unexpected}. This may or may not be an issue - make "
                           "sure that the checkpoint does not have unnecessary parameters, or that the model "
                           "definition correctly corresponds to the checkpoint.")
        tensors = self.model.state_dict(keep_vars=True)
        empty = [name for name in self.missing if tensors[name].device.type == "meta"]
        if empty:
            logger.warning(f"Some weights of {type(self.model).__name__} are not in the checkpoint at "
                           f"{self.checkpoint} and are still on the meta device (they have no values): {empty}")

    def close(self):
        if self.state_dict_folder is not None:
            shutil.rmtree(self.state_dict_folder, ignore_errors=True)


def load_checkpoint_in_model(model, checkpoint, device_map=None, offload_folder=None, dtype=None,
                             offload_state_dict=False, offload_buffers=False, keep_in_fp32_modules=None,
                             offload_8bit_bnb=False, strict=False):
    """Loads checkpoint into model: a file holding a whole state dict (.safetensors, or torch.save's .bin /
    .pt), an index (.json) of shards, or a folder holding pytorch_model.bin, model.safetensors or one
    *.index.json with its shards (what accel's save_model and transformers' save_pretrained write).

    device_map ({module name: GPU index, "cpu", "disk" or a device}): each tensor is made on its module's
    device (the model may be on the meta device, from init_empty_weights); "disk" tensors are written to
    offload_folder and left on the meta device (their module's buffers too with offload_buffers), for
    dispatch_model's hooks. Without device_map the values are copied into the model's tensors as torch's
    load_state_dict does, and tensors on the meta device are made on the CPU. dtype: floating weights are
    loaded in it (those under keep_in_fp32_modules stay float32 when it is float16). offload_state_dict:
    the CPU weights wait on disk until every shard is read, which bounds memory to one shard. strict: names
    missing from the checkpoint or unknown to the model raise RuntimeError; otherwise unknown names are
    skipped with a warning. Tied weights stay tied, and a tied weight the checkpoint stores once (as
    save_model does) fills every name of it.

    Before any tensor of the model changes, the checkpoint is checked: strict's names, the shapes in
    safetensors headers against the model's, a device for every tensor, the shards an index names
    (ValueError, naming what is wrong). offload_8bit_bnb (bitsandbytes) is not supported: UnsupportedError."""
    if offload_8bit_bnb:
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                               "offload_8bit_bnb: bitsandbytes' 8-bit weights are not supported by accel")
    tied_groups = find_tied_parameters(model)
    warn_if_untied(model, tied_groups)
    if device_map is not None:
        check_devices_exist(device_map)
        check_tied_parameters_on_same_device(tied_groups, device_map)
        if "disk" in device_map.values():
            if offload_folder is None:
                raise ValueError("At least one of the model submodule will be offloaded to disk, please pass along an "
                                 "`offload_folder`.")
            os.makedirs(offload_folder, exist_ok=True)
    loader = _CheckpointLoader(model, checkpoint, device_map, offload_folder, dtype, offload_state_dict,
                               offload_buffers, keep_in_fp32_modules, strict)
    try:
        loader.check(tied_groups)
        loader.load()
    finally:
        loader.close()
    retie_parameters(model, tied_groups)
    loader.report()


def offloads(module):
    """Whether an AlignDevicesHook keeps module's weights off it (on the meta device between forwards)."""
    hook = getattr(module, "_hf_hook", None)
    return isinstance(hook, AlignDevicesHook) and hook.offload


@contextlib.contextmanager
def _onloaded(module, device):
    """Within the block, the weights module's offloading hook keeps elsewhere are on device (module as it is
    when no hook offloads it)."""
    if not offloads(module):
        yield
        return
    hook = module._hf_hook
    execution_device, hook.execution_device = hook.execution_device, device
    try:
        hook.pre_forward(module)
        try:
            yield
        finally:
            hook.post_forward(module, torch.tensor([]))
    finally:
        hook.execution_device = execution_device


def get_state_dict_from_offload(module, module_name, state_dict, device_to_put_offload="cpu"):
    """Fills state_dict's entries for module (called module_name's parent; module_name ends with a tensor's
    name) with its tensors, on device_to_put_offload when its hook offloads them. Returns state_dict."""
    root = module_name[:module_name.rfind(".")]
    with _onloaded(module, device_to_put_offload):
        for name, tensor in module.state_dict().items():
            if f"{root}.{name}" in state_dict:
                state_dict[f"{root}.{name}"] = tensor
    return state_dict


def get_state_dict_offloaded_model(model):
    """model's state dict with its offloaded weights' values (read through their hooks, module by module, onto
    the CPU), as save_model stores a dispatched model. Tensors still on the meta device with no hook to read
    them from are left out, with a warning."""
    state_dict, placeholders = {}, set()
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        with _onloaded(module, "cpu"):
            tensors = module.state_dict()
        for key, tensor in tensors.items():
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
                placeholders.add(prefix + key)
            else:
                state_dict[prefix + key] = tensor
    placeholders -= state_dict.keys()
    if placeholders:
        logger.warning(f"The following tensors were not saved because they were still on meta device: "
                       f"{sorted(placeholders)}")
    return state_dict
