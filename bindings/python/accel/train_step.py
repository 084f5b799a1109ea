"""accel.TrainStep: a whole training step as one call (forward, loss, backward, gradient clipping, the
optimizer step and zero_grad), run eagerly or, with cuda_graph=True on a GPU, captured once as a CUDA graph
and replayed for every later batch of the same shapes. Made by Accelerator.prepare_train_step; the C
header capi/accel/train_step.h says what runs when, and why a step may run eagerly instead."""
import contextlib

from ._handle import Handle
from ._library import ffi, lib
from .errors import check
from .tensor import Tensor, lent, lent_all


class TrainStep(Handle):
    _free = lib.accel_train_step_free

    def __init__(self, model, optimizer, options):
        """Use Accelerator.prepare_train_step(model, optimizer, **settings)."""
        out = ffi.new("accel_train_step_t **")
        check(lib.accel_train_step_new(out, model.pointer, optimizer.pointer, options.pointer))
        super().__init__(out[0])
        self._model, self._optimizer = model, optimizer  # the step keeps them alive; so does this object

    def __call__(self, *inputs, target=None, **named_inputs):
        """One step on a batch: forward(*inputs, **named_inputs), the loss against target (None for the
        loss "output"), backward, clipping, the optimizer step and zero_grad. Returns the loss, an
        accel.Tensor of its own (reading it waits for the GPU; the step itself does not)."""
        names = [ffi.new("char[]", name.encode()) for name in named_inputs]
        loss = ffi.new("accel_tensor_t **")
        target_lent = contextlib.nullcontext() if target is None else lent(target)
        with lent_all(inputs) as positional, lent_all(named_inputs.values()) as named, target_lent as target_tensor:
            check(lib.accel_train_step_run(self.pointer, ffi.new("accel_tensor_t *[]", [t.pointer for t in positional]),
                                           len(positional), ffi.new("char *[]", names),
                                           ffi.new("accel_tensor_t *[]", [t.pointer for t in named]), len(named),
                                           ffi.NULL if target_tensor is None else target_tensor.pointer, loss))
        return Tensor(loss[0])

    @property
    def eager_reason(self):
        """Why the last step did not replay a CUDA graph; "" when it did."""
        return ffi.string(lib.accel_train_step_eager_reason(self.pointer)).decode()

    def stat(self, name):
        """A count: "steps", "replays", "captures", "warmup_steps" or "eager_steps"."""
        out = ffi.new("double *")
        check(lib.accel_train_step_stat(self.pointer, name.encode(), out))
        return int(out[0])
