"""Device maps: where each part of a model goes, from the sizes of its modules and a memory budget per
device. Accelerate's infer_auto_device_map and its helpers (accelerate.utils.modeling), on the same rules,
so that a model gets the map Accelerate would give it: GPUs in index order, then "cpu", then "disk"; a
module that does not fit is split into its children unless its class is in no_split_module_classes; tied
parameters go with the module placed first; GPU 0 and the CPU keep room for the largest layer, which an
offloaded layer needs when it runs. Sizes come from shapes and dtypes only, so a model on the meta device
(init_empty_weights) is mapped without memory."""
import collections
import warnings

import torch
import torch.nn as nn

from .._loggers import library_logger
from .module_tensors import (convert_file_size_to_int, dtype_byte_size, find_tied_parameters, keeps_its_dtype,
                             named_module_tensors, warn_if_untied)

logger = library_logger(__name__)

# The devices that are not GPUs, in the order a device map falls back to them.
_FALLBACK_DEVICES = ("cpu", "disk")


def _as_dtype(dtype):
    """A torch dtype from a dtype or its name ("float16" or "torch.float16")."""
    return getattr(torch, dtype.replace("torch.", "")) if isinstance(dtype, str) else dtype


def compute_module_sizes(model, dtype=None, special_dtypes=None, buffers_only=False):
    """{name: bytes} for every tensor of model and every module above it ("" is the whole model): tied
    parameters counted once. dtype: the size each floating tensor will have when loaded in that dtype (never
    more than it has now; integers and bools keep theirs); special_dtypes: {tensor name: dtype} overriding
    it; buffers_only: count buffers alone."""
    dtype_size = None if dtype is None else dtype_byte_size(_as_dtype(dtype))
    special_sizes = {name: dtype_byte_size(_as_dtype(special)) for name, special in (special_dtypes or {}).items()}
    tensors = model.named_buffers(recurse=True) if buffers_only else named_module_tensors(model, recurse=True)
    sizes = collections.defaultdict(int)
    for name, tensor in tensors:
        if name in special_sizes:
            size = tensor.numel() * special_sizes[name]
        elif dtype_size is None or keeps_its_dtype(tensor):
            size = tensor.numel() * dtype_byte_size(tensor.dtype)
        else:
            size = tensor.numel() * min(dtype_size, dtype_byte_size(tensor.dtype))
        parts = name.split(".")
        for depth in range(len(parts) + 1):
            sizes[".".join(parts[:depth])] += size
    return sizes


def compute_module_total_buffer_size(model, dtype=None, special_dtypes=None):
    """Bytes of all of model's buffers (with compute_module_sizes' dtype rules)."""
    return compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes, buffers_only=True).get("", 0)


def _is_unsplittable(module, no_split_module_classes):
    """Whether a device map keeps this entry whole: a bare tensor, a module without children, or a module
    of a no-split class."""
    return (not isinstance(module, nn.Module) or not any(True for _ in module.children())
            or type(module).__name__ in no_split_module_classes)


def get_max_layer_size(modules, module_sizes, no_split_module_classes):
    """(size, names) of the largest layers under the (name, module) list modules: a layer is a module kept
    whole (no children, or a no-split class), or a bare tensor in the list; names lists every layer of that
    size."""
    largest, names = 0, []
    pending = list(modules)
    while pending:
        name, module = pending.pop(0)
        if _is_unsplittable(module, no_split_module_classes):
            size = module_sizes[name]
            if size > largest:
                largest, names = size, [name]
            elif size == largest:
                names.append(name)
        else:
            pending = [(f"{name}.{child}", value) for child, value in module.named_children()] + pending
    return largest, names


def _free_gpu_memory():
    """{GPU index: free bytes} of every CUDA device that answers (a device that fails is skipped)."""
    free = {}
    for index in range(torch.cuda.device_count()):
        try:
            torch.tensor([0], device=index)  # creates the device's context, so that the free memory is right
            free[index] = torch.cuda.mem_get_info(index)[0]
        except Exception:
            logger.info(f"Device {index} seems unavailable, Proceeding to check subsequent devices.")
    return free


def get_max_memory(max_memory=None):
    """The memory budget of each device, GPUs first (by index), then "cpu", then "disk": without max_memory,
    the free memory of every CUDA device and the available RAM; otherwise max_memory with sizes such as
    "10GiB" in bytes. ValueError for a device other than a GPU index, "cpu" or "disk"; a GPU index with no
    device is kept, with a warning."""
    import psutil
    if max_memory is None:
        return {**_free_gpu_memory(), "cpu": psutil.virtual_memory().available}
    unknown = [key for key in max_memory if not (isinstance(key, int) or key in _FALLBACK_DEVICES)]
    if unknown:
        raise ValueError(f"Device {unknown[0]} is not recognized, available devices are integers(for GPU), 'cpu' "
                         "and 'disk'")
    gpus = sorted(key for key in max_memory if isinstance(key, int))
    available = torch.cuda.device_count()
    for gpu in gpus:
        if not 0 <= gpu < available:
            logger.warning(f"Device {gpu} is not available, available devices are {list(range(available))}")
    order = gpus + [key for key in _FALLBACK_DEVICES if key in max_memory]
    return {key: convert_file_size_to_int(max_memory[key]) for key in order}


def _leaf_names(names):
    """The names among names that no other name is under (the last level of a module_sizes dict)."""
    parents = {name.rsplit(".", 1)[0] for name in names if "." in name}
    return [name for name in names if name != "" and name not in parents]


def get_balanced_memory(model, max_memory=None, no_split_module_classes=None, dtype=None, special_dtypes=None,
                        low_zero=False):
    """A max_memory for infer_auto_device_map that spreads the model evenly over the GPUs instead of
    filling them in order: every GPU but the last gets the model's size / GPU count plus a margin (1.25 times
    the larger of the biggest no-split block and the mean final module), the last keeps its whole budget.
    low_zero: GPU 0 gets only what the others cannot hold (it is left for generate's work). With one GPU
    and no max_memory, 90% of its free memory. Without GPUs, get_max_memory(max_memory) as it is."""
    user_gave_no_budget = max_memory is None
    max_memory = get_max_memory(max_memory)
    gpus = [key for key, budget in max_memory.items() if isinstance(key, int) and budget > 0]
    if not gpus:
        return max_memory
    if len(gpus) == 1:
        low_zero = False  # nothing to move GPU 0's share to
        if user_gave_no_budget:
            # The rest is left for activations and buffers, so that the model's own weights cannot run it out.
            max_memory[gpus[0]] = int(max_memory[gpus[0]] * 0.9)
            logger.info(f"We will use 90% of the memory on device {gpus[0]} for storing the model, and 10% for "
                        "the buffer to avoid OOM. You can set `max_memory` in to a higher value to use more memory "
                        "(at your own risk).")

    module_sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    per_gpu = module_sizes[""] // (len(gpus) - 1 if low_zero else len(gpus))

    no_split = _as_list(no_split_module_classes)
    block_size = 0
    if no_split:
        for name, module in model.named_modules():
            if name and type(module).__name__ in no_split:
                block_size = max(block_size, module_sizes[name])
    # Sizes without the tensors' own entries: the leaves left are the final modules.
    module_names = [name for name in module_sizes if name not in set(_leaf_names(list(module_sizes)))]
    final_modules = _leaf_names(module_names)
    mean_final = int(sum(module_sizes[name] for name in final_modules) / max(len(final_modules), 1))
    per_gpu += int(1.25 * max(block_size, mean_final))

    for gpu in gpus[:-1]:
        share = max_memory[gpus[0]] if low_zero and gpu == gpus[0] else per_gpu
        max_memory[gpu] = min(share, max_memory[gpu])
    if low_zero:
        left_for_zero = max(0, module_sizes[""] - sum(max_memory[gpu] for gpu in gpus[1:]))
        max_memory[gpus[0]] = min(left_for_zero, max_memory[gpus[0]])
    return max_memory


def _as_list(classes):
    if classes is None:
        return []
    return list(classes) if isinstance(classes, (list, tuple)) else [classes]


def calculate_maximum_sizes(model):
    """(total size of model, (size, names) of its largest layer), the no-split classes taken from a
    transformers model's _no_split_modules."""
    sizes = compute_module_sizes(model)
    top_level = (list(model.named_parameters(recurse=False)) + list(model.named_children())
                 + list(model.named_buffers(recurse=False)))
    return sizes[""], get_max_layer_size(top_level, sizes, getattr(model, "_no_split_modules", None) or [])


def _inside(name, module_name):
    """Whether the tensor or module name is module_name or lies under it."""
    return name == module_name or name.startswith(module_name + ".")


class _Placement:
    """infer_auto_device_map's walk: the entries left to place (name, module or tensor) in model order, the
    device being filled and what it holds, and the map made so far."""

    def __init__(self, model, max_memory, no_split, module_sizes, dtype, special_dtypes, offload_buffers, verbose):
        self.max_memory, self.no_split, self.sizes = max_memory, no_split, module_sizes
        self.dtype, self.special_dtypes = dtype, special_dtypes
        self.offload_buffers, self.verbose = offload_buffers, verbose
        self.devices = list(max_memory) + ([] if "disk" in max_memory else ["disk"])
        gpus = [device for device in self.devices if device not in _FALLBACK_DEVICES]
        # The devices an offloaded layer runs from (GPU 0) or is read into (the CPU, from disk): they keep room
        # for the largest layer.
        self.reserving_devices = [gpus[0], "cpu"] if gpus else ["cpu"]
        self.gpus = gpus
        self.pending = (list(model.named_parameters(recurse=False)) + list(model.named_children())
                        + list(model.named_buffers(recurse=False)))
        self.device_index, self.used = 0, 0
        self.device_map = collections.OrderedDict()
        self.memory_used, self.buffer_sizes = {}, {}
        self.largest_layer, self.largest_names = get_max_layer_size(self.pending, module_sizes, no_split)

    def say(self, message):
        if self.verbose:
            print(message)

    def refresh_largest_layer(self):
        modules = [(name, module) for name, module in self.pending if isinstance(module, nn.Module)]
        self.largest_layer, self.largest_names = get_max_layer_size(modules, self.sizes, self.no_split)

    def budget(self):
        """(bytes the current device may still take in all, bytes it keeps for the largest layer); None for
        the disk, which takes anything."""
        device = self.devices[self.device_index]
        if device == "disk":
            return None, 0
        reserved = self.largest_layer if device in self.reserving_devices else 0
        return self.max_memory[device] - reserved, reserved

    def next_device(self, name, module, reserved):
        self.say(f"Not enough space on {self.devices[self.device_index]}, going to the next device.")
        self.memory_used[self.devices[self.device_index]] = self.used + reserved
        self.device_index += 1
        self.used = 0
        self.pending.insert(0, (name, module))

    def split(self, name, module, index=0):
        """Replaces the entry at index (module `name`) by its own tensors and its children."""
        self.say(f"Splitting {name}.")
        parts = list(module.named_parameters(recurse=False)) + list(module.named_children())
        self.pending[index:index + 1] = [(f"{name}.{part}", value) for part, value in parts]
        self.refresh_largest_layer()

    def place(self, names, size, module, reserved):
        device = self.devices[self.device_index]
        self.say(f"Putting {names} (size={size}) on {device}.")
        self.used += size
        self.memory_used[device] = self.used + reserved
        for name in names:
            self.device_map[name] = device
        if not self.offload_buffers and isinstance(module, nn.Module):
            buffers = compute_module_total_buffer_size(module, dtype=self.dtype, special_dtypes=self.special_dtypes)
            self.buffer_sizes[device] = self.buffer_sizes.get(device, 0) + buffers

    def tied_entries(self, name, tied_groups):
        """The pending entries holding parameters tied to ones inside module `name` (each entry once)."""
        outside = [tied for group in tied_groups if any(_inside(member, name) for member in group)
                   for tied in group if not _inside(tied, name)]
        entries = []
        for tied in outside:
            entry = next((entry for entry in self.pending if _inside(tied, entry[0])), None)
            if entry is not None and all(entry[0] != seen for seen, _ in entries):
                entries.append(entry)
        return entries

    def step(self, tied_groups):
        name, module = self.pending.pop(0)
        self.say(f"\nTreating module {name}.")
        self.largest_names = [other for other in self.largest_names if not _inside(other, name)]
        if not self.largest_names:
            self.refresh_largest_layer()
        size = self.sizes[name]
        limit, reserved = self.budget()
        if limit is not None and self.used + size > limit:
            if _is_unsplittable(module, self.no_split):
                self.next_device(name, module, reserved)
            else:
                self.pending.insert(0, (name, module))
                self.split(name, module)
            return
        tied = self.tied_entries(name, tied_groups)
        size_with_tied = size + sum(self.sizes[tied_name] for tied_name, _ in tied)
        if limit is None or self.used + size_with_tied <= limit:
            for entry in tied:
                self.pending.remove(entry)
            self.place([name] + [tied_name for tied_name, _ in tied], size_with_tied, module, reserved)
            return
        # It fits alone but not with the modules tied to it: split one of them, or move on.
        splittable = next((entry for entry in tied if not _is_unsplittable(entry[1], self.no_split)), None)
        if splittable is None:
            self.next_device(name, module, reserved)
        else:
            self.pending.insert(0, (name, module))
            self.split(splittable[0], splittable[1], self.pending.index(splittable))

    def warn_about_offloaded_buffers(self):
        """Accelerate's warning when the buffers of offloaded layers, which stay on a GPU while the model runs,
        fit on none of the GPUs (offload_buffers avoids it)."""
        offloaded = sum(self.buffer_sizes.get(device, 0) for device in _FALLBACK_DEVICES)
        if offloaded == 0 or self.offload_buffers or not self.gpus:
            return
        if not any(self.max_memory[gpu] >= offloaded + self.memory_used.get(gpu, 0) for gpu in self.gpus):
            warnings.warn(f"Current model requires {offloaded} bytes of buffer for offloaded layers, which seems does "
                          "not fit any GPU's remaining memory. If you are experiencing a OOM later, please consider "
                          "using offload_buffers=True.")


def infer_auto_device_map(model, max_memory=None, no_split_module_classes=None, dtype=None, special_dtypes=None,
                          verbose=False, clean_result=True, offload_buffers=False):
    """A device map for model ({module name: GPU index, "cpu" or "disk"}) within max_memory (get_max_memory's
    budgets; by default what is free), filling the GPUs in order, then the CPU, then the disk. Modules are
    taken in the model's order; one that does not fit is split into its children, unless it has none or its
    class name is in no_split_module_classes, in which case it goes to the next device. Parameters tied to
    a module go with it. GPU 0 and the CPU keep room for the largest layer (what running an offloaded layer
    needs). dtype and special_dtypes: the dtypes the weights will be loaded in (compute_module_sizes).
    verbose prints each decision; clean_result merges the children of a module that all went to one device
    into the module (clean_device_map). offload_buffers: the buffers of offloaded layers are offloaded too;
    without it, a warning when they would fit on no GPU."""
    max_memory = get_max_memory(max_memory)
    dtype = None if dtype is None else _as_dtype(dtype)
    tied_groups = find_tied_parameters(model)
    warn_if_untied(model, tied_groups)
    module_sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    placement = _Placement(model, max_memory, _as_list(no_split_module_classes), module_sizes, dtype, special_dtypes,
                           offload_buffers, verbose)
    while placement.pending:
        placement.step(tied_groups)
    device_map = placement.device_map
    if clean_result:
        device_map = clean_device_map(device_map)
    placement.warn_about_offloaded_buffers()
    return device_map


def clean_device_map(device_map, module_name=""):
    """device_map with every module whose entries all name one device merged into one entry for it (the
    merged entry takes the place of its first part), from the whole model down. Changes device_map in place
    and returns it."""
    prefix = f"{module_name}." if module_name else ""
    inside = [name for name in device_map if name.startswith(prefix)]
    devices = {device_map[name] for name in inside}
    if len(inside) > 1 and len(devices) == 1:
        merged = []
        for name, device in device_map.items():
            if name not in inside:
                merged.append((name, device))
            elif name == inside[0]:
                merged.append((module_name, device))
        device_map.clear()
        device_map.update(merged)
        return device_map
    depth = len(module_name.split(".")) + 1 if module_name else 1
    children = dict.fromkeys(".".join(name.split(".")[:depth]) for name in inside if len(name) > len(module_name))
    for child in children:
        clean_device_map(device_map, module_name=child)
    return device_map
