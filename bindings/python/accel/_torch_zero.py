"""A torch optimizer under ZeRO (Accelerate's DeepSpeedPlugin(zero_stage=1|2|3), or FSDP's SHARD_GRAD_OP and
FULL_SHARD): each process steps, and keeps state for, only its share of the parameters' elements, as the
library splits them. Under stage 3 the views are the library's shares themselves
(accel_optimizer_piece_tensors), the parameters holding no values between uses (accel._torch_sharded), and
their gradients are read from the library at each step; so are they under stages 1 and 2 with the optimizer
offloaded (zero_cpu_offload), where they are the library's host copies of this process's elements.

The library makes an external optimizer over the prepared module's accel model
(capi/accel/optimizer.h, accel_optimizer_new_external) and says which elements this process steps
(accel_optimizer_piece: a parameter's name and a run of its flattened elements). The torch optimizer's groups
are given, in place of each parameter, 1-d views of those elements (leaf tensors on the parameter's memory):
its state then exists for them only. accel_optimizer_step calls back to step the torch optimizer over the
views, their gradients being views of the parameters' (averaged there for this process's elements), then
gathers every process's updated elements. Clipping through the Accelerator shares the norm over the
processes as for accel's own optimizers, and the steps are stage 0's bit for bit (the views start at
multiples of 64 elements, where torch's elementwise kernels cut the whole parameter).

state_dict() holds this process's share, as DeepSpeed's optimizer files are per process; save_state stores
it with the parameters' names and element runs, so a checkpoint resumes on any number of processes and at any
stage (accel._torch_optim_state).
"""
import torch

from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .errors import UnsupportedError, check
from .tensor import Tensor, returned_like

_TORCH_EXAMPLE = torch.empty(0)  # what returned_like converts the library's tensors to


class _ExternalOptimizer(Handle):
    _free = lib.accel_optimizer_free

    def __init__(self, model, step):
        """step(): steps the caller's optimizer; called by step() on synchronising steps."""
        self.callbacks = Callbacks()
        pointer = self.callbacks.make("accel_external_step_fn", lambda _payload: step())
        out = ffi.new("accel_optimizer_t **")
        check(lib.accel_optimizer_new_external(out, model.pointer, pointer, ffi.NULL), self.callbacks)
        super().__init__(out[0])

    def pieces(self):
        """[(parameter name, first element, element count)] this process steps."""
        name, begin, numel = ffi.new("const char **"), ffi.new("int64_t *"), ffi.new("int64_t *")
        found = []
        for index in range(lib.accel_optimizer_num_pieces(self.pointer)):
            check(lib.accel_optimizer_piece(self.pointer, index, name, begin, numel))
            found.append((ffi.string(name[0]).decode(), begin[0], numel[0]))
        return found

    def piece_tensors(self, index):
        """(the elements of piece index as a 1-d torch tensor, its gradient or None): under zero_stage 3 this
        process's share of the parameter, which holds its values between uses."""
        value, grad = ffi.new("accel_tensor_t **"), ffi.new("accel_tensor_t **")
        check(lib.accel_optimizer_piece_tensors(self.pointer, index, value, grad))
        tensors = [Tensor(value[0]), Tensor(grad[0]) if grad[0] != ffi.NULL else None]
        return tuple(None if tensor is None else returned_like(tensor, _TORCH_EXAMPLE) for tensor in tensors)

    def step(self):
        check(lib.accel_optimizer_step(self.pointer), self.callbacks)

    def zero_grad(self):
        check(lib.accel_optimizer_zero_grad(self.pointer))


def _piece_view(parameter, begin, numel):
    view = parameter.detach().view(-1).narrow(0, begin, numel)
    view.requires_grad_(parameter.requires_grad)
    return view


class ZeroSteps:
    """The share of a torch optimizer's parameters this process steps, and the step over it."""

    def __init__(self, optimizer, hosted, offloaded):
        self._optimizer = optimizer
        self._closure = None
        self._result = None
        self._external = _ExternalOptimizer(hosted.model, self._step_pieces)
        self._hosted = hosted
        # Under stage 3 the pieces are the library's shares, the parameters' only values between uses.
        self._sharded = hosted.model.num_units() > 0
        # Offloaded, and under stage 3, the library's tensors are stepped (host copies, or the shares).
        self._library_pieces = self._sharded or offloaded
        by_name = dict(hosted.module.named_parameters())
        owned = {}
        for index, (name, begin, numel) in enumerate(self._external.pieces()):
            owned[id(by_name[name])] = (begin, numel, index)
        self._pieces = []  # (view, parameter, begin, numel)
        state = optimizer.state
        for group in optimizer.param_groups:
            views = []
            for parameter in group["params"]:
                if id(parameter) not in owned:
                    state.pop(parameter, None)
                    continue
                begin, numel, index = owned[id(parameter)]
                if self._library_pieces:
                    view = self._external.piece_tensors(index)[0].requires_grad_(parameter.requires_grad)
                else:
                    view = _piece_view(parameter, begin, numel)
                if parameter in state:
                    state[view] = _piece_state(state.pop(parameter), parameter, begin, numel, view.device)
                views.append(view)
                self._pieces.append((view, parameter, begin, numel, index))
            group["params"] = views

    def stepped(self):
        """[(parameter, first element, element count, the view stepped)] in the optimizer's order."""
        return [(parameter, begin, numel, view) for view, parameter, begin, numel, _index in self._pieces]

    def step(self, closure=None):
        self._closure, self._result = closure, None
        self._external.step()
        if self._sharded:
            self._hosted.release_gathered()
        return self._result

    def zero_grad(self):
        """Under stage 3 the gradients are the shares' (the library's): cleared there."""
        if self._sharded:
            self._external.zero_grad()

    def _step_pieces(self):
        for view, parameter, begin, numel, index in self._pieces:
            if self._library_pieces:
                grad = self._external.piece_tensors(index)[1]
            else:
                grad = parameter.grad
                grad = None if grad is None else grad.view(-1).narrow(0, begin, numel)
            view.grad = grad
        try:
            self._result = self._optimizer.step(self._closure) if self._closure is not None else self._optimizer.step()
        finally:
            for view, *_ in self._pieces:
                view.grad = None


def _piece_state(entry, parameter, begin, numel, device):
    """A parameter's optimizer state (prepared after state was loaded into it) cut to its piece, on the piece's
    device (the host's, for a share the library offloads)."""
    return {key: value.detach().reshape(-1).narrow(0, begin, numel).to(device, copy=True)
            if isinstance(value, torch.Tensor) and value.shape == parameter.shape else value
            for key, value in entry.items()}


def zero_steps(optimizer, accelerator, stage):
    """ZeroSteps for a torch optimizer whose parameters all belong to one module prepared by this
    Accelerator; UnsupportedError, naming what, otherwise and under fp16 loss scaling."""
    owners = [accelerator._hosted_owning(parameter)
              for group in optimizer.param_groups for parameter in group["params"]]
    if not owners or None in owners or any(owner is not owners[0] for owner in owners):
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
            f"prepare: under zero_stage {stage} (DeepSpeedPlugin, or FSDP's SHARD_GRAD_OP or FULL_SHARD) a "
            f"{type(optimizer).__name__} steps this process's share of one prepared module's parameters: every "
            "parameter it holds must belong to the one module, prepared before it (prepare(model, optimizer) does so)"))
    if accelerator._loss_scaling:
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
            f"prepare: a {type(optimizer).__name__} under zero_stage {stage} with fp16 loss scaling is not supported "
            "(bf16, or accel.OptimizerSpec, which the library steps, is)"))
    return ZeroSteps(optimizer, owners[0], accelerator._model_settings.get("zero_cpu_offload", False))
