"""The Accelerator's collectives (gather, reduce, broadcast, padding) over nested tensors and objects."""
import pickle
import warnings

import numpy as np

from . import _nested
from ._library import ffi, lib
from .errors import check, check_collective
from .tensor import Tensor, lent, lent_all, returned_like
from .utils.operations import CannotPadNestedTensorWarning


def _writable(value, what):
    """The collectives that write into the caller's array refuse a read-only one, saying so."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        raise ValueError(f"{what} writes into the array, and this one is read-only (as np.from_dlpack results "
                         "are): pass a copy")


class CollectivesMixin:
    """gather, reduce, broadcast, padding and the other collectives of the Accelerator."""

    def _each_tensor(self, data, operation, call):
        def one(value):
            out = ffi.new("accel_tensor_t **")
            with lent(value) as tensor:
                check_collective(call(tensor.pointer, out))
            return returned_like(Tensor(out[0]), value)

        return _nested.apply(one, data, operation)

    def gather(self, tensor):
        """Every process's tensor concatenated along dim 0, in rank order (0-d tensors count as [1]). The
        row counts may differ between processes (no pad_across_processes needed); other sizes may not."""
        return self._each_tensor(tensor, "gather", lambda t, out: lib.accel_state_gather(self.pointer, t, out))

    def gather_for_metrics(self, input_data, use_gather_object=False):
        """gather, then, on the last batch of a loader, without the samples that padded the last global
        batch: every sample of the dataset counted once. Data that is not made of tensors (or
        use_gather_object) goes through gather_object, trimmed alike for a prepared torch DataLoader."""
        try:
            all_tensors = not use_gather_object and bool(_nested.leaves(input_data, "gather_for_metrics"))
        except TypeError:
            all_tensors = False
        loader = self._active_torch_loader()
        if not all_tensors:
            data = self.gather_object(input_data)
            if loader is not None and loader.end_of_dataloader and loader.remainder > 0:
                return data[:loader.remainder]
            return data
        gathered = self._each_tensor(input_data, "gather_for_metrics",
                                     lambda t, out: lib.accel_state_gather_for_metrics(self.pointer, t, out))
        if loader is not None and loader._python_plan and loader.end_of_dataloader and loader.remainder > 0:
            # The library deals such a loader's batches as a plain list and trims nothing: as Accelerate,
            # keep the dataset's samples of the last global batch only.
            return _nested.apply(lambda t: t[:loader.remainder], gathered, "gather_for_metrics")
        return gathered

    def _broadcast_object(self, obj, from_process=0):
        """obj as from_process has it, on every process."""
        data = self.gather_object([obj]) if self.num_processes > 1 else [obj]
        return data[from_process]

    def set_trigger(self):
        """Accelerate's set_trigger: raises this process's flag, which the next check_trigger on every
        process sees (a breakpoint for all processes when one of them meets a condition)."""
        self._trigger = True

    def check_trigger(self):
        """Accelerate's check_trigger (collective): True on every process when any process called
        set_trigger since the last check, and then every flag is lowered; False otherwise."""
        raised = self._on_any_process(self._trigger)
        if raised:
            self._trigger = False
        return raised

    def _on_any_process(self, flag):
        """Whether flag is true on any process (collective)."""
        return int(self.reduce(np.asarray(int(bool(flag)), dtype=np.int64), "sum")) > 0

    def reduce(self, tensor, reduction="sum", scale=1.0):
        """Element-wise "sum", "mean" or "max" over the processes (any other reduction is an error). Nested
        lists, tuples and dicts are reduced in one call: one exchange of every leaf's path, shape and dtype,
        then one all-reduce per dtype."""
        leaves = _nested.leaves(tensor, "reduce")
        if len(leaves) == 1 and leaves[0][0] == "":
            return self._each_tensor(tensor, "reduce",
                                     lambda t, out: lib.accel_state_reduce(self.pointer, t, reduction.encode(), out))
        names = [ffi.new("char[]", path.encode()) for path, _ in leaves]
        outputs = ffi.new("accel_tensor_t *[]", max(1, len(leaves)))
        with lent_all([leaf for _, leaf in leaves]) as tensors:
            check_collective(lib.accel_state_reduce_named(self.pointer, ffi.new("const char *[]", names),
                                                          ffi.new("accel_tensor_t *[]", [t.pointer for t in tensors]),
                                                          len(leaves), reduction.encode(), outputs))
        results = iter([returned_like(Tensor(outputs[i]), leaf) for i, (_, leaf) in enumerate(leaves)])
        return _nested.apply(lambda _: next(results), tensor, "reduce")

    def pad_across_processes(self, tensor, dim=0, pad_index=0, pad_first=False):
        """Pads dim to the largest size any process has there, with pad_index, at the end (or start). A
        torch nested tensor is left as it is, with a CannotPadNestedTensorWarning (as Accelerate does)."""
        def one(value):
            if getattr(value, "is_nested", False):
                warnings.warn("Cannot pad nested tensors without more information. Leaving unprocessed.",
                              CannotPadNestedTensorWarning)
                return value
            return self._each_tensor(value, "pad_across_processes",
                                     lambda t, out: lib.accel_state_pad_across_processes(
                                         self.pointer, t, dim, pad_index, int(bool(pad_first)), out))

        return _nested.apply(one, tensor, "pad_across_processes")

    def broadcast(self, tensor, from_process=0):
        """Overwrites the tensors, on every process, with those of from_process, in place; returns them."""
        def one(value):
            _writable(value, "broadcast")
            with lent(value) as handle:
                check_collective(lib.accel_state_broadcast(self.pointer, handle.pointer, from_process))
            return value

        return _nested.apply(one, tensor, "broadcast")

    def reduce_scatter(self, tensor, output, reduction="sum"):
        """Writes into output, in place, this process's share of the element-wise "sum" or "mean" of every
        process's tensor (PyTorch's reduce_scatter_tensor): with n elements in output, elements
        [index * n, (index + 1) * n) of the reduction. output has tensor's dtype and 1/num_processes of its
        elements; returns output."""
        _writable(output, "reduce_scatter")
        with lent(tensor) as handle, lent(output) as out:
            check(lib.accel_state_reduce_scatter(self.pointer, handle.pointer, reduction.encode(), out.pointer))
        return output

    def all_gather(self, tensor, output):
        """Writes into output, in place, every process's tensor in process order (PyTorch's
        all_gather_into_tensor): output has tensor's dtype and num_processes times its elements; returns it."""
        _writable(output, "all_gather")
        with lent(tensor) as handle, lent(output) as out:
            check(lib.accel_state_all_gather(self.pointer, handle.pointer, out.pointer))
        return output

    def gather_object(self, obj):
        """Any picklable object from every process: with several processes, each passes a list and gets the
        lists' items in rank order; with one, the object comes back (as Accelerate does)."""
        data = pickle.dumps(obj)
        out = ffi.new("accel_bytes_list_t **")
        check(lib.accel_state_gather_bytes(self.pointer, data, len(data), out))
        try:
            gathered = []
            for index in range(lib.accel_bytes_list_count(out[0])):
                item, size = ffi.new("void **"), ffi.new("size_t *")
                check(lib.accel_bytes_list_get(out[0], index, item, size))
                gathered.append(pickle.loads(ffi.buffer(item[0], size[0])))
        finally:
            lib.accel_bytes_list_free(out[0])
        return gathered[0] if len(gathered) == 1 else [item for items in gathered for item in items]
