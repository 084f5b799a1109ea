"""accel.Dataset: where a loader's samples come from.

A sample is a mapping of field name to tensor-like (numpy array, torch tensor, accel.Tensor, or a Python
number for a scalar field); the samples of a dataset share names, shapes and dtypes, and a loader stacks
them into batches of the same names.
"""
import contextlib
import os
import sys

import numpy as np

from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .errors import check
from .tensor import Tensor, _is_torch_tensor, lent, lent_all


@contextlib.contextmanager
def _sample_field(value):
    """A sample field as an accel.Tensor: host values (numpy arrays, numbers, CPU torch tensors) copied into
    the library's memory, anything else (a CUDA tensor, a DLPack producer) shared. A shared host array would
    go back to Python through a deleter that needs the GIL, run by whichever thread drops the sample: a
    prefetch thread, which Python ends mid-call when it exits (the process then aborts)."""
    if isinstance(value, Tensor):
        yield value
        return
    if _is_torch_tensor(value) and value.device.type == "cpu" and value.dtype != sys.modules["torch"].bfloat16:
        value = value.detach().numpy()
    if isinstance(value, (bool, int, float, np.generic, np.ndarray)):
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)  # which would make a 0-d array 1-d
        copy = Tensor.from_buffer(array, array.dtype.name, array.shape)
        try:
            yield copy
        finally:
            copy.close()
        return
    with lent(value) as tensor:
        yield tensor


def _add_fields(sample, item, where):
    """accel_sample_add for each field of a Python sample (see _sample_field for what is copied)."""
    if not hasattr(item, "items"):
        raise TypeError(f"{where} must return a mapping of field name to array, not {type(item).__name__}")
    for name, value in item.items():
        with _sample_field(value) as tensor:
            check(lib.accel_sample_add(sample, name.encode(), tensor.pointer))


class Dataset(Handle):
    _free = lib.accel_dataset_free

    def __init__(self, pointer, callbacks=None):
        super().__init__(pointer)
        # What the library calls back into lives as long as this object, and as long as any loader over it.
        self.callbacks = callbacks

    @classmethod
    def from_tensors(cls, fields):
        """Named arrays sharing dim 0, one sample per row, e.g. {"x": features, "y": labels}. Shared with the
        library, not copied: do not write into them while a loader reads them."""
        names = [ffi.new("char[]", name.encode()) for name in fields]
        with lent_all(fields.values()) as tensors:
            out = ffi.new("accel_dataset_t **")
            check(lib.accel_dataset_from_tensors(out, ffi.new("char *[]", names),
                                                 ffi.new("accel_tensor_t *[]", [t.pointer for t in tensors]),
                                                 len(names)))
        return cls(out[0])

    @classmethod
    def from_map(cls, dataset):
        """A map-style dataset: len(dataset) samples, dataset[index] returning a mapping of name to array
        (torch's Dataset protocol). Prefetch threads (the loader's prefetch_threads) call it concurrently."""
        callbacks = Callbacks()

        def get_item(index, sample, _payload):
            _add_fields(sample, dataset[index], "dataset[index]")

        get_item_pointer = callbacks.make("accel_get_item_fn", get_item)
        out = ffi.new("accel_dataset_t **")
        check(lib.accel_dataset_from_callback(out, len(dataset), get_item_pointer, ffi.NULL), callbacks)
        return cls(out[0], callbacks)

    @classmethod
    def from_iterable(cls, iterable):
        """A stream of samples: iter(iterable) each epoch, after iterable.set_epoch(epoch) when it has one
        (torch's IterableDataset protocol). Loaders over it dispatch by default: rank 0 reads the stream."""
        callbacks = Callbacks()
        iterators = []  # the current epoch's iterator

        def start_epoch(epoch, _payload):
            if hasattr(iterable, "set_epoch"):
                iterable.set_epoch(epoch)
            iterators[:] = [iter(iterable)]

        def next_item(sample, end, _payload):
            try:
                item = next(iterators[0])
            except StopIteration:
                end[0] = 1
                return
            _add_fields(sample, item, "the iterable")

        out = ffi.new("accel_dataset_t **")
        check(lib.accel_dataset_from_iterable(out, callbacks.make("accel_start_epoch_fn", start_epoch),
                                              callbacks.make("accel_next_item_fn", next_item), ffi.NULL),
              callbacks)
        return cls(out[0], callbacks)

    @classmethod
    def from_safetensors(cls, path):
        """Every tensor of a .safetensors file is a field; the file is memory-mapped and only the rows a
        batch needs are read."""
        out = ffi.new("accel_dataset_t **")
        check(lib.accel_dataset_from_safetensors(out, os.fsencode(path)))
        return cls(out[0])

    @classmethod
    def from_npy(cls, paths):
        """Memory-mapped .npy files, one field each: {"x": "x.npy", "y": "y.npy"}."""
        names = [ffi.new("char[]", name.encode()) for name in paths]
        files = [ffi.new("char[]", os.fsencode(path)) for path in paths.values()]
        out = ffi.new("accel_dataset_t **")
        check(lib.accel_dataset_from_npy(out, ffi.new("char *[]", names), ffi.new("char *[]", files), len(names)))
        return cls(out[0])

    def __len__(self):
        length = lib.accel_dataset_length(self.pointer)
        if length < 0:
            raise TypeError("an iterable dataset has no length")
        return length

