"""accel.Tensor, a library tensor handle, and the conversions every API uses at its edges.

Tensors cross in both directions through DLPack without copies (accel._dlpack). A function that takes a
numpy array gives numpy arrays back, one that takes a torch tensor gives torch tensors back, and one that
takes an accel.Tensor gives accel.Tensors back (those still carry the library's autograd graph, which is
what backward needs). torch is imported only when a torch tensor is converted, so numpy-only programs
never load it.
"""
import contextlib
import math
import sys

import numpy as np

from . import _dlpack
from ._handle import Handle
from ._library import ffi, lib
from .errors import check

_DTYPE_NAMES = {
    lib.ACCEL_DTYPE_FLOAT32: "float32",
    lib.ACCEL_DTYPE_FLOAT64: "float64",
    lib.ACCEL_DTYPE_FLOAT16: "float16",
    lib.ACCEL_DTYPE_BFLOAT16: "bfloat16",
    lib.ACCEL_DTYPE_INT8: "int8",
    lib.ACCEL_DTYPE_INT16: "int16",
    lib.ACCEL_DTYPE_INT32: "int32",
    lib.ACCEL_DTYPE_INT64: "int64",
    lib.ACCEL_DTYPE_UINT8: "uint8",
    lib.ACCEL_DTYPE_BOOL: "bool",
}
_DTYPE_CODES = {name: code for code, name in _DTYPE_NAMES.items()}
# The sizes accel_tensor_from_buffer expects; bfloat16 has no numpy dtype to ask.
_ITEM_SIZES = {name: 2 if name == "bfloat16" else np.dtype(name).itemsize for name in _DTYPE_CODES}


def _is_torch_tensor(value):
    torch = sys.modules.get("torch")  # a torch tensor exists only if the program imported torch
    return torch is not None and isinstance(value, torch.Tensor)


class Tensor(Handle):
    """A tensor owned by the library (model outputs, losses, batches, collective results).

    Read it with .numpy() or .torch() (zero-copy), or hand it to np.from_dlpack /
    torch.utils.dlpack.from_dlpack. The memory outlives the handle for as long as an export uses it."""

    _free = lib.accel_tensor_free

    @classmethod
    def from_dlpack(cls, value):
        """Shares the memory of a numpy array, a torch tensor or any DLPack producer (no copy)."""
        out = ffi.new("accel_tensor_t **")
        if isinstance(value, np.ndarray):
            managed = _dlpack.describe_numpy(value)
            code = lib.accel_tensor_from_dlpack(out, managed)
            if code != lib.ACCEL_OK:
                _dlpack.release_description(managed)  # the library did not take it
            check(code)
        else:
            if _is_torch_tensor(value):
                from torch.utils import dlpack as torch_dlpack
                capsule = torch_dlpack.to_dlpack(value.detach())
            elif hasattr(value, "__dlpack__"):
                capsule = value.__dlpack__()
            else:
                raise TypeError(f"accel takes numpy arrays, torch tensors, accel.Tensor or DLPack producers, "
                                f"not {type(value).__name__}")
            _dlpack.import_capsule(capsule, lambda managed: check(lib.accel_tensor_from_dlpack(out, managed)))
        return cls(out[0])

    @classmethod
    def from_buffer(cls, data, dtype, shape):
        """Copies C-ordered elements from any buffer (bytes, bytearray, memoryview, array.array) into a new
        CPU tensor; dtype is a name ("float32", "int64", "bfloat16", ...)."""
        if dtype not in _DTYPE_CODES:
            raise ValueError(f"unknown dtype {dtype!r}; one of {', '.join(_DTYPE_CODES)}")
        shape = tuple(int(size) for size in shape)
        source = ffi.from_buffer(data)
        expected = math.prod(shape) * _ITEM_SIZES[dtype]
        if len(source) != expected:
            raise ValueError(f"the buffer holds {len(source)} bytes; shape {shape} of {dtype} needs {expected}")
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_tensor_from_buffer(out, source, _DTYPE_CODES[dtype], ffi.new("int64_t[]", shape),
                                           len(shape)))
        return cls(out[0])

    @property
    def shape(self):
        sizes = lib.accel_tensor_shape(self.pointer)
        return tuple(sizes[d] for d in range(self.ndim))

    @property
    def ndim(self):
        return lib.accel_tensor_ndim(self.pointer)

    def numel(self):
        return lib.accel_tensor_numel(self.pointer)

    @property
    def dtype(self):
        """The element type's name: "float32", "int64", ... ("unknown" for a type accel has no code for)."""
        return _DTYPE_NAMES.get(lib.accel_tensor_dtype(self.pointer), "unknown")

    @property
    def itemsize(self):
        return lib.accel_tensor_element_size(self.pointer)

    @property
    def device(self):
        """"cpu" or "cuda:<n>"."""
        return ffi.string(lib.accel_tensor_device(self.pointer)).decode()

    def data_ptr(self):
        """Address of the first element (contiguous CPU tensors only)."""
        out = ffi.new("void **")
        check(lib.accel_tensor_data(self.pointer, out))
        return int(ffi.cast("uintptr_t", out[0]))

    def tobytes(self):
        """A copy of the elements in C order, from any device."""
        buffer = bytearray(self.numel() * self.itemsize)
        check(lib.accel_tensor_copy_to_buffer(self.pointer, ffi.from_buffer(buffer), len(buffer)))
        return bytes(buffer)

    def numpy(self):
        """A numpy view of the same memory (read-only: numpy marks every DLPack import so)."""
        return np.from_dlpack(self)

    def torch(self):
        """A torch tensor on the same memory, without the library's autograd graph."""
        from torch.utils import dlpack as torch_dlpack
        return torch_dlpack.from_dlpack(self)

    def item(self):
        return self.numpy().item()

    def __array__(self, dtype=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def __dlpack__(self, stream=None):
        out = ffi.new("DLManagedTensor **")
        check(lib.accel_tensor_to_dlpack(out, self.pointer))
        return _dlpack.export_capsule(out[0])

    def __dlpack_device__(self):
        kind, _, index = self.device.partition(":")
        return (lib.kDLCUDA, int(index)) if kind == "cuda" else (lib.kDLCPU, 0)

    def __repr__(self):
        if self.closed:
            return "accel.Tensor(closed)"
        return f"accel.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device})"


@contextlib.contextmanager
def lent(value):
    """`with lent(x) as tensor:` an accel.Tensor for x for the duration of a call: x itself if it is one,
    else a zero-copy handle on x (numbers, Python's or numpy's, become 0-d arrays first) freed afterwards."""
    if isinstance(value, Tensor):
        yield value
        return
    if isinstance(value, (bool, int, float, np.generic)):
        value = np.asarray(value)
    tensor = Tensor.from_dlpack(value)
    try:
        yield tensor
    finally:
        tensor.close()


@contextlib.contextmanager
def lent_all(values):
    """lent() for each of several values: `with lent_all(values) as tensors:`."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(lent(value)) for value in values]


def returned_like(result, example):
    """The new tensor `result` in the kind of `example`: a numpy array, a torch tensor or (for anything
    else) the accel.Tensor itself. A converted result's handle is freed; the export keeps the memory."""
    if isinstance(example, np.ndarray):
        converted = result.numpy()
    elif _is_torch_tensor(example):
        converted = result.torch()
    else:
        return result
    result.close()
    return converted
