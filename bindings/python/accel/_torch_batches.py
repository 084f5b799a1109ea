"""Batches the library read, given back as torch's DataLoader makes them: default_collate's structure (a
sample's tuple or list becomes a list, a named tuple stays its type, a dict stays a dict, a lone tensor a
tensor) and the very dtype, shape and strides of the tensors torch.stack makes, so that a script computes
the same bits under accel as under Accelerate (torch picks kernels by strides: a convolution's backward
over a [32, 1, 8, 8] batch strided (64, 1, 8, 1) sums in another order than over (64, 64, 8, 1)).
"""
import numpy as np
import torch


def contiguous_strides(shape):
    """The strides torch gives a new tensor of this shape (torch.empty, torch.stack): each dimension's is
    the product of the sizes after it, a size 0 counting as 1."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def as_collated(tensor):
    """tensor with the strides torch.stack would give it. Memory already laid out in that order (what
    the library's batches are) is only restrided, a view: DLPack from LibTorch 1.13 reports a size-1
    dimension with stride 1, which torch calls contiguous, so only the strides' numbers differ. Other
    layouts (rows of a transposed dataset tensor) are copied, as torch.stack copies."""
    strides = contiguous_strides(tensor.shape)
    if tensor.stride() == strides:
        return tensor
    if tensor.is_contiguous():
        return tensor.as_strided(tensor.shape, strides)
    return tensor.contiguous().as_strided(tensor.shape, strides)


def _is_bool(value):
    if isinstance(value, (bool, np.bool_)):
        return True
    return getattr(value, "dtype", None) in (torch.bool, np.bool_)


def _as_bytes(value):
    """A bool leaf as uint8 (the library cannot hand bool tensors back through DLPack); others as they are."""
    if isinstance(value, (bool, np.bool_)):
        return np.uint8(value)
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool:
        return value.view(torch.uint8)
    if isinstance(value, np.ndarray) and value.dtype == np.bool_:
        return value.view(np.uint8)
    return value


class Fields:
    """A sample's structure flattened into the named fields the library reads ("0", "1", ... for a
    tuple or list, the keys for a dict, "0" for a lone value), and rebuilt around the batched fields as
    default_collate builds it. Bool leaves travel as uint8 and come back as bool."""

    def __init__(self, example):
        self.kind = type(example)
        if isinstance(example, dict):
            self.keys = list(example)
            self.names = [str(key) for key in example]
            leaves = list(example.values())
        elif isinstance(example, (tuple, list)):
            self.keys = None
            self.names = [str(index) for index in range(len(example))]
            leaves = list(example)
        else:
            self.keys, self.names, leaves = None, ["0"], [example]
        self.bools = {name for name, leaf in zip(self.names, leaves) if _is_bool(leaf)}
        # Without batching, torch's default_convert leaves Python numbers as they are.
        self.numbers = {name for name, leaf in zip(self.names, leaves) if isinstance(leaf, (bool, int, float))}

    def flatten(self, sample):
        """{name: leaf} of one sample, for the library."""
        if isinstance(sample, dict):
            leaves = sample.values()
        elif isinstance(sample, (tuple, list)):
            leaves = sample
        else:
            leaves = [sample]
        return {name: _as_bytes(leaf) for name, leaf in zip(self.names, leaves)}

    def rebuild(self, fields, unbatched=False):
        """default_collate's structure around {name: accel.Tensor} batched fields; unbatched: each field
        is a batch of one whose only row is given, as default_convert gives it (a DataLoader with
        batch_size=None yields samples)."""
        values = []
        for name in self.names:
            tensor = fields[name].torch()
            if name in self.bools:
                tensor = tensor.view(torch.bool)
            if not unbatched:
                values.append(as_collated(tensor))
            elif name in self.numbers:
                values.append(tensor[0].item())
            else:
                values.append(as_collated(tensor[0]))
        if issubclass(self.kind, dict):
            return self.kind(zip(self.keys, values))
        if issubclass(self.kind, tuple) and hasattr(self.kind, "_fields"):
            return self.kind(*values)
        if issubclass(self.kind, (tuple, list)):
            return values
        return values[0]
