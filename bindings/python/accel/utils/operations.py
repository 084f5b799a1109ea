"""accel.utils.operations: Accelerate's collectives and structure helpers as functions of the process's
state (accel.state), on torch tensors, numpy arrays and accel.Tensors in nested lists, tuples and dicts;
results of the inputs' kind."""
import collections.abc
import functools

from ..errors import DistributedOperationException  # noqa: F401 (Accelerate's name, here)
from ..state import PartialState
from ..tensor import _is_torch_tensor


def _accelerator():
    return PartialState()._accelerator


class CannotPadNestedTensorWarning(UserWarning):
    """pad_across_processes met a torch nested tensor, whose rows have no common size to pad: it is left as it
    is."""


def is_torch_tensor(value):
    return _is_torch_tensor(value)


def is_namedtuple(data):
    """Whether data is a named tuple (a tuple with _fields and _asdict, as collections.namedtuple and
    typing.NamedTuple make, subclasses included)."""
    return isinstance(data, tuple) and hasattr(data, "_asdict") and hasattr(data, "_fields")


def recursively_apply(func, data, *args, test_type=is_torch_tensor, error_on_other_type=False, **kwargs):
    """func(leaf, *args, **kwargs) for every leaf passing test_type in nested lists, tuples (named tuples
    too) and dicts, the structure rebuilt around the results; other leaves kept, or TypeError."""
    if isinstance(data, (list, tuple)):
        items = [recursively_apply(func, item, *args, test_type=test_type, error_on_other_type=error_on_other_type,
                                   **kwargs) for item in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, dict):
        return type(data)((key, recursively_apply(func, value, *args, test_type=test_type,
                                                  error_on_other_type=error_on_other_type, **kwargs))
                          for key, value in data.items())
    if test_type(data):
        return func(data, *args, **kwargs)
    if error_on_other_type:
        raise TypeError(f"Unsupported types ({type(data)}) passed to `{func.__name__}`. Only nested list/tuple/dicts "
                        f"of objects that are valid for `{test_type.__name__}` should be passed.")
    return data


def send_to_device(tensor, device, non_blocking=False, skip_keys=None):
    """Every leaf with a .to method moved to device (nested lists, tuples and dicts; keys in skip_keys left
    alone); other leaves as they are."""
    if isinstance(tensor, (list, tuple)):
        items = [send_to_device(item, device, non_blocking, skip_keys) for item in tensor]
        return type(tensor)(*items) if hasattr(tensor, "_fields") else type(tensor)(items)
    if isinstance(tensor, dict):
        skipped = [skip_keys] if isinstance(skip_keys, str) else (skip_keys or [])
        return type(tensor)((key, value if key in skipped else send_to_device(value, device, non_blocking, skip_keys))
                            for key, value in tensor.items())
    if hasattr(tensor, "to"):
        try:
            return tensor.to(device, non_blocking=non_blocking)
        except TypeError:
            return tensor.to(device)
    return tensor


def find_batch_size(data):
    """The size of dim 0 of the first tensor found (first item of a list or tuple, first value of a dict)."""
    if isinstance(data, (list, tuple, dict)):
        if len(data) == 0:
            raise ValueError(f"Cannot find the batch size from empty {type(data)}.")
        return find_batch_size(data[0] if not isinstance(data, dict) else next(iter(data.values())))
    if not hasattr(data, "shape"):
        raise TypeError(f"Can only find the batch size of tensors but got {type(data)}.")
    return data.shape[0]


def convert_to_fp32(tensor):
    """fp16 and bf16 torch tensors as float32, in nested structures."""
    from ..torch_model import convert_to_fp32 as convert
    return convert(tensor)


def concatenate(data, dim=0):
    """torch.cat of a list of structures, leaf by leaf."""
    import torch
    first = data[0]
    if isinstance(first, (list, tuple)):
        items = [concatenate([d[i] for d in data], dim=dim) for i in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
    if isinstance(first, dict):
        return type(first)((key, concatenate([d[key] for d in data], dim=dim)) for key in first)
    if not isinstance(first, torch.Tensor):
        raise TypeError(f"Can only concatenate tensors but got {type(first)}")
    return torch.cat(data, dim=dim)


def gather(tensor):
    """Every process's tensors concatenated along dim 0 in rank order (accel.Accelerator.gather)."""
    return _accelerator().gather(tensor)


def gather_object(object):
    """Every process's picklable object: a list from each process, joined in rank order (one process: the
    object itself)."""
    return _accelerator().gather_object(object)


def broadcast(tensor, from_process=0):
    """Every leaf overwritten in place with from_process's; returned."""
    return _accelerator().broadcast(tensor, from_process)


def broadcast_object_list(object_list, from_process=0):
    """object_list's items replaced, in place, by from_process's; returned."""
    accelerator = _accelerator()
    if accelerator.num_processes > 1:
        object_list[:] = accelerator.gather_object([list(object_list)])[from_process]
    return object_list


def reduce(tensor, reduction="mean", scale=1.0):
    """Element-wise "mean", "sum" or "max" over the processes (another reduction is an error)."""
    return _accelerator().reduce(tensor, reduction, scale)


def pad_across_processes(tensor, dim=0, pad_index=0, pad_first=False):
    """dim padded with pad_index to the largest size any process has there."""
    return _accelerator().pad_across_processes(tensor, dim, pad_index, pad_first)


def copy_tensor_to_devices(tensor=None):
    """The main process's tensor on every process (the others pass None)."""
    import torch
    accelerator = _accelerator()
    if accelerator.num_processes == 1:
        return tensor
    shape, dtype = accelerator._broadcast_object(None if tensor is None else (tuple(tensor.shape), tensor.dtype))
    if not accelerator.is_main_process:
        tensor = torch.zeros(shape, dtype=dtype, device=accelerator.device)
    return accelerator.broadcast(tensor.contiguous(), from_process=0)


class ConvertOutputsToFp32:
    """A forward whose fp16 and bf16 tensor outputs come back as float32 (Accelerate's wrapper of a model's
    forward under mixed precision). Refuses to be pickled, as Accelerate's does: a model carrying it must be
    unwrapped first (extract_model_from_parallel(model, keep_fp32_wrapper=False))."""

    def __init__(self, model_forward):
        self.model_forward = model_forward
        functools.update_wrapper(self, model_forward)

    def __call__(self, *args, **kwargs):
        return convert_to_fp32(self.model_forward(*args, **kwargs))

    def __getstate__(self):
        import pickle
        raise pickle.PicklingError("Cannot pickle a prepared model with automatic mixed precision, please unwrap the "
                                   "model with `Accelerator.unwrap_model(model)` before pickling it.")


def convert_outputs_to_fp32(model_forward):
    """model_forward wrapped so that its fp16 and bf16 outputs come back as float32. The wrapper's
    __wrapped__ leads back to model_forward, which is how extract_model_from_parallel(...,
    keep_fp32_wrapper=False) finds the model's own forward again."""
    converting = ConvertOutputsToFp32(model_forward)

    def forward(*args, **kwargs):
        return converting(*args, **kwargs)

    forward.__wrapped__ = converting
    return forward


def find_device(data):
    """The device of the first torch tensor in nested mappings, lists and tuples; None when there is none."""
    if isinstance(data, collections.abc.Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        return next((device for device in map(find_device, data) if device is not None), None)
    return data.device if is_torch_tensor(data) else None


def listify(data):
    """Every torch tensor of nested lists, tuples and dicts as Python numbers in nested lists (tolist();
    bf16 through float32, which tolist() needs)."""
    def to_list(tensor):
        import torch
        tensor = tensor.detach().cpu()
        return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).tolist()

    return recursively_apply(to_list, data)


def pad_input_tensors(tensor, batch_size, num_processes, dim=0):
    """Every torch tensor of nested lists, tuples and dicts padded with zeros along dim, from batch_size
    rows to the next multiple of num_processes (at least num_processes), so that it splits evenly between
    the processes."""
    def pad(leaf):
        import torch
        padded_size = max(num_processes, -(-batch_size // num_processes) * num_processes)
        padding = list(leaf.shape)
        padding[dim] = padded_size - leaf.shape[dim]
        return torch.cat([leaf, leaf.new_zeros(padding)], dim=dim)

    return recursively_apply(pad, tensor, error_on_other_type=True)
