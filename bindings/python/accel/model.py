"""accel.Model, a TorchScript module run by the library, or a model whose tensors live in the caller's
runtime (Model.from_tensors); prepared by Accelerator.prepare for device placement, rank 0's weights and
data-parallel gradients, with forward under the state's mixed precision.

Calling a TorchScript model returns accel.Tensors (one, a tuple, or a dict, as forward returns them): they
keep the library's autograd graph, which Accelerator.backward needs, and read as numpy or torch without a
copy. A model of the caller's tensors runs its forward and backward in the caller's runtime and tells the
model about them (begin_forward, grad_ready, end_backward): accel.torch_model does that for an nn.Module.
"""
import io
import os
import sys

from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .errors import check
from .tensor import Tensor, lent_all


def _read_output(output):
    """The Python structure of what forward returned. The C ABI does not say whether a single tensor was a
    tensor or a 1-tuple: one unnamed entry is returned as a tensor."""
    count = lib.accel_output_count(output)
    names = [lib.accel_output_name(output, index) for index in range(count)]
    out = ffi.new("accel_tensor_t **")
    if count and names[0] != ffi.NULL:
        fields = {}
        for name in names:
            check(lib.accel_output_get_named(output, name, out))
            fields[ffi.string(name).decode()] = Tensor(out[0])
        return fields
    tensors = []
    for index in range(count):
        check(lib.accel_output_get(output, index, out))
        tensors.append(Tensor(out[0]))
    return tensors[0] if count == 1 else tuple(tensors)


def _script_module_bytes(module):
    """torch.jit.save into memory, or TypeError if module is no torch.jit.ScriptModule."""
    torch = sys.modules.get("torch")  # a ScriptModule exists only if the program imported torch
    if torch is None or not isinstance(module, torch.jit.ScriptModule):
        raise TypeError(f"a model is a TorchScript path, bytes or torch.jit.ScriptModule, not {type(module).__name__}")
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return buffer.getvalue()


class Model(Handle):
    _free = lib.accel_model_free

    @classmethod
    def load(cls, source):
        """A model from a TorchScript file path, its bytes (torch.jit.save), or a torch.jit.ScriptModule
        (saved to memory). On the CPU and not prepared: Accelerator.prepare does that."""
        out = ffi.new("accel_model_t **")
        if isinstance(source, (str, os.PathLike)):
            check(lib.accel_model_load(out, os.fsencode(source)))
            return cls(out[0])
        if not isinstance(source, (bytes, bytearray, memoryview)):
            source = _script_module_bytes(source)
        data = ffi.from_buffer(source)
        check(lib.accel_model_load_buffer(out, data, len(data)))
        return cls(out[0])

    @classmethod
    def from_tensors(cls, parameters, buffers=(), trainable=None):
        """A model over the caller's tensors, shared (never copied): parameters and buffers are (name,
        tensor) pairs of numpy arrays, torch tensors or DLPack producers; trainable, one flag per parameter
        (None: all trainable). Its forward and backward are the caller's; see begin_forward."""
        parameters, buffers = list(parameters), list(buffers)
        flags = ffi.NULL if trainable is None else ffi.new("int[]", [int(bool(flag)) for flag in trainable])
        if trainable is not None and len(trainable) != len(parameters):
            raise ValueError(f"{len(trainable)} trainable flags for {len(parameters)} parameters")
        names = [ffi.new("char[]", name.encode()) for name, _ in parameters]
        buffer_names = [ffi.new("char[]", name.encode()) for name, _ in buffers]
        out = ffi.new("accel_model_t **")
        with lent_all(tensor for _, tensor in parameters) as tensors, \
                lent_all(tensor for _, tensor in buffers) as buffer_tensors:
            check(lib.accel_model_from_tensors(out, ffi.new("char *[]", names),
                                               ffi.new("accel_tensor_t *[]", [t.pointer for t in tensors]), flags,
                                               len(tensors), ffi.new("char *[]", buffer_names),
                                               ffi.new("accel_tensor_t *[]", [t.pointer for t in buffer_tensors]),
                                               len(buffer_tensors)))
        return cls(out[0])

    def begin_forward(self, grad_enabled=True):
        """Before each forward of a model of the caller's tensors (grad_enabled False under no_grad): with
        several processes it may broadcast rank 0's buffers (collective) and decides whether the coming
        backward synchronises."""
        check(lib.accel_model_begin_forward(self.pointer, int(bool(grad_enabled))))

    def grad_view(self, index):
        """Parameter index's gradient storage (an accel.Tensor): install it as the gradient of the caller's
        tensor, so that its backward accumulates there (a view into the gradient bucket with several
        processes)."""
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_model_grad_view(self.pointer, index, out))
        return Tensor(out[0])

    def grad_ready(self, index):
        """Parameter index's gradient for this backward is complete: its bucket's all-reduce starts once
        the bucket is full."""
        check(lib.accel_model_grad_ready(self.pointer, index))

    def end_backward(self):
        """The caller's backward is over: on a synchronising backward, waits for the all-reduces."""
        check(lib.accel_model_end_backward(self.pointer))

    def grad_reached_by_no_rank(self, index):
        """Whether no rank's backward reached parameter index in the last synchronising backward
        (find_unused_parameters): its gradient was left as it was."""
        out = ffi.new("int *")
        check(lib.accel_model_grad_reached_by_no_rank(self.pointer, index, out))
        return bool(out[0])

    # --- ZeRO stage 3 (capi/accel/model.h, accel_model_set_units): accel.torch_model drives these -----------

    def set_units(self, unit_of_parameter):
        """Before prepare: per parameter (in this model's order), the unit zero_stage 3 gathers it in."""
        units = list(unit_of_parameter)
        check(lib.accel_model_set_units(self.pointer, ffi.new("int32_t[]", units), len(units)))

    def num_units(self):
        """The units of a model sharded by zero_stage 3; 0 for one that is not."""
        return lib.accel_model_num_units(self.pointer)

    def unit_numel(self, unit):
        """The elements of a unit's layout: what its full buffer holds."""
        out = ffi.new("int64_t *")
        check(lib.accel_model_unit_numel(self.pointer, unit, out))
        return out[0]

    def parameter_place(self, index):
        """(unit, first element in the unit's layout) of trainable parameter index."""
        unit, offset = ffi.new("size_t *"), ffi.new("int64_t *")
        check(lib.accel_model_parameter_place(self.pointer, index, unit, offset))
        return unit[0], offset[0]

    def set_parameter(self, index, value):
        """Writes value, the whole value of parameter index (its shape; converted to its dtype and device),
        into the model: under zero_stage 3 into this process's share of it, otherwise into the tensor. Not
        collective: every process passes the whole value."""
        with lent_all([value]) as (tensor,):
            check(lib.accel_model_set_parameter(self.pointer, index, tensor.pointer))

    def unit_gather(self, unit, full):
        """Fills full (the unit's layout: a 1-d tensor of unit_numel elements) with every process's share of
        the unit's parameters. Collective."""
        with lent_all([full]) as (tensor,):
            check(lib.accel_model_unit_gather(self.pointer, unit, tensor.pointer))

    def unit_gather_gradients(self, unit, full):
        """Fills full (the unit's layout, of its parameters' dtype) with the unit's averaged gradients, zeros where
        no process holds any; False when no process holds gradients of the unit (before its first
        synchronising backward, after a zero_grad that set them to none). Collective."""
        present = ffi.new("int *")
        with lent_all([full]) as (tensor,):
            check(lib.accel_model_unit_gather_gradients(self.pointer, unit, tensor.pointer, present))
        return bool(present[0])

    def unit_prefetch(self, unit, full):
        """Starts unit_gather(unit, full) and returns before it is done (collective): the unit's next
        unit_gather only waits for it. full must stay alive and untouched until then or the end of the
        backward (end_backward waits for the prefetches left and forgets them)."""
        with lent_all([full]) as (tensor,):
            check(lib.accel_model_unit_prefetch(self.pointer, unit, tensor.pointer))

    def unit_reduce(self, unit, full_gradients):
        """Hands the unit's accumulated gradients (its layout) over: True when averaged into this process's
        share (a synchronising backward; collective), False when the backward only accumulates (keep them)."""
        reduced = ffi.new("int *")
        with lent_all([full_gradients]) as (tensor,):
            check(lib.accel_model_unit_reduce(self.pointer, unit, tensor.pointer, reduced))
        return bool(reduced[0])

    def __call__(self, *inputs, **named_inputs):
        """forward(*inputs, **named_inputs), building the autograd graph (training)."""
        return self._run(lib.accel_model_forward, inputs, named_inputs)

    def evaluate(self, *inputs, **named_inputs):
        """forward without building a graph: what Accelerate code writes under torch.no_grad()."""
        return self._run(lib.accel_model_evaluate, inputs, named_inputs)

    def _run(self, function, inputs, named_inputs):
        names = [ffi.new("char[]", name.encode()) for name in named_inputs]
        with lent_all(inputs) as positional, lent_all(named_inputs.values()) as named:
            out = ffi.new("accel_output_t **")
            check(function(self.pointer, ffi.new("accel_tensor_t *[]", [t.pointer for t in positional]),
                           len(positional), ffi.new("char *[]", names),
                           ffi.new("accel_tensor_t *[]", [t.pointer for t in named]), len(named), out))
        try:
            return _read_output(out[0])
        finally:
            lib.accel_output_free(out[0])

    def train(self, mode=True):
        """Training mode (True) or evaluation mode (False), as torch's Module.train; returns self."""
        check(lib.accel_model_train(self.pointer, int(bool(mode))))
        return self

    def eval(self):
        return self.train(False)

    def set_checkpoint_model(self, how):
        """How save_state writes this prepared model from now on: "whole" (one file, by process 0) or
        "sharded" (each process its piece of every tensor, in parallel: FSDP's SHARDED_STATE_DICT), as the
        prepare option checkpoint_model chose. Either loads on any number of processes."""
        check(lib.accel_model_set_checkpoint_model(self.pointer, how.encode()))

    @property
    def training(self):
        return bool(lib.accel_model_is_training(self.pointer))

    def named_parameters(self):
        """(name, accel.Tensor) pairs in registration order, a tensor several modules hold (tied weights)
        once, under its first name, as torch's named_parameters; the tensors share the model's memory."""
        for index in range(lib.accel_model_num_parameters(self.pointer)):
            yield ffi.string(lib.accel_model_parameter_name(self.pointer, index)).decode(), self.parameter(index)

    def parameter(self, index):
        """Parameter index (an accel.Tensor sharing the model's memory; UnsupportedError for one sharded by
        zero_stage 3, which no process holds whole)."""
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_model_parameter(self.pointer, index, out))
        return Tensor(out[0])

    def parameters(self):
        return (tensor for _, tensor in self.named_parameters())

    def named_buffers(self):
        for index in range(lib.accel_model_num_buffers(self.pointer)):
            out = ffi.new("accel_tensor_t **")
            check(lib.accel_model_buffer(self.pointer, index, out))
            yield ffi.string(lib.accel_model_buffer_name(self.pointer, index)).decode(), Tensor(out[0])

    def state_dict(self):
        """Parameters and buffers by name, sharing the model's memory."""
        return {**dict(self.named_parameters()), **dict(self.named_buffers())}

    def whole_state_dict(self, keep=True):
        """Every parameter and buffer by name (a tensor several modules hold once), copies of their whole
        values, as Accelerator.save_model writes them. Under zero_stage 3 they are gathered unit by unit:
        collective, every process calls it, and one with keep False gets an empty dict."""
        whole = {}
        callbacks = Callbacks()

        def take(name, tensor, _payload):
            whole[ffi.string(name).decode()] = Tensor(tensor)

        each = callbacks.make("accel_whole_tensor_fn", take) if keep else ffi.NULL
        check(lib.accel_model_each_whole_tensor(self.pointer, int(bool(keep)), each, ffi.NULL), callbacks)
        return whole

    def grad_sync_stat(self, name):
        """What the gradient all-reduces cost, one figure by name: syncs, bytes, copied_bytes, reduce_ms,
        overlapped_ms, exposed_ms, wait_ms, helper_cpu_ms (totals since prepare), each also with the prefix
        last_ (the last synchronising backward's); and gradient_bytes, optimizer_state_bytes (the memory ZeRO's
        zero_stage splits, on this process). 0 when the model is not data-parallel."""
        out = ffi.new("double *")
        check(lib.accel_model_grad_sync_stat(self.pointer, name.encode(), out))
        return out[0]

    def unwrap(self):
        """The plain module without the data-parallel wrapper (same parameters)."""
        out = ffi.new("accel_model_t **")
        check(lib.accel_model_unwrap(self.pointer, out))
        return Model(out[0])

    def save_torchscript(self, path):
        """Writes the module as TorchScript, loadable with torch.jit.load."""
        check(lib.accel_model_save_torchscript(self.pointer, os.fsencode(path)))

    def load_weights(self, directory):
        """Loads what Accelerator.save_model wrote into directory (model.safetensors, or the index and its
        shards; a checkpoint's first model too), copying each tensor onto the model's device. Everything is
        checked first (names, shapes, dtypes), so on an error the model is unchanged."""
        check(lib.accel_model_load_weights(self.pointer, os.fsencode(directory)))

