"""torch optimizers and LR schedulers prepared by an Accelerator: Accelerate's AcceleratedOptimizer and
AcceleratedScheduler, over gradients that accel synchronises (accel.torch_model) and its fp16 loss scale.

The loss scaling of these optimizers is torch's GradScaler as Accelerate drives it, with the library's
scaler (capi/accel/train.h): accelerator.backward multiplies the loss by accel_state_grad_scale's tensor;
before an optimizer step (or clipping, whichever comes first) the gradients are divided by it once
(accel_state_unscale_gradients per prepared module, torch's own kernel for parameters of no prepared
module) while looking for inf and NaN; a step that found one is skipped; then the scale's growth and
backoff rule runs (accel_state_update_grad_scale), once per optimizer step.
"""
import warnings

import torch

from . import _torch_optim_state


class GradScaling:
    """The fp16 loss scale of one Accelerator for torch optimizers: which gradients were unscaled in the
    current optimizer step, and what was found there."""

    def __init__(self, accelerator):
        self._accelerator = accelerator
        self._scale = None  # accel's scale tensor, seen by torch (the same memory every step)
        self._found = {}  # id(hosted module) or id(parameter) -> found_inf, for the step in progress

    @property
    def enabled(self):
        return self._accelerator._loss_scaling

    def scale_tensor(self):
        if self._scale is None:
            self._scale = self._accelerator.grad_scale().torch()
        return self._scale

    def scale(self, loss):
        return loss * self.scale_tensor() if self.enabled else loss

    def _groups(self, parameters):
        """(key, hosted module or None, parameters) for the prepared modules and the loose parameters."""
        groups = {}
        for parameter in parameters:
            hosted = self._accelerator._hosted_owning(parameter)
            key = id(hosted) if hosted is not None else id(parameter)
            groups.setdefault(key, (key, hosted, []))[2].append(parameter)
        return groups.values()

    def unscale(self, parameters):
        """Divides these parameters' gradients by the scale, each once per optimizer step; True when one
        of them (or another of the same prepared module) holds inf or NaN."""
        if not self.enabled:
            return False
        found_any = False
        for key, hosted, members in self._groups(parameters):
            if key not in self._found:
                if hosted is not None:
                    self._found[key] = self._accelerator.unscale_model_gradients(hosted.model)
                else:
                    self._found[key] = self._unscale_loose(members)
            found_any = found_any or self._found[key]
        return found_any

    def _unscale_loose(self, parameters):
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return False
        if any(grad.dtype == torch.float16 for grad in grads):
            raise ValueError("Attempting to unscale FP16 gradients.")
        scale = self.scale_tensor()
        found_inf = torch.zeros(1, dtype=torch.float32, device=scale.device)
        inverse = scale.double().reciprocal().float()
        with torch.no_grad():
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inverse)
        return bool(found_inf.item())

    def finish_step(self, parameters, found_inf):
        """After an optimizer step taken (found_inf False) or skipped: the scale's update, and these
        parameters are scaled again for the next step."""
        if not self.enabled:
            return
        self._accelerator.update_grad_scale(found_inf)
        for key, _hosted, _members in self._groups(parameters):
            self._found.pop(key, None)


def _parameters_of(optimizer):
    return [parameter for group in optimizer.param_groups for parameter in group["params"]]


def _forwarded(name):
    """The wrapped optimizer's attribute of that name, read and written through the wrapper (as Accelerate's
    AcceleratedOptimizer does): schedulers and user code that set param_groups or state change the optimizer
    that steps."""
    return property(lambda self: getattr(self.optimizer, name),
                    lambda self, value: setattr(self.optimizer, name, value))


class AcceleratedOptimizer(torch.optim.Optimizer):
    """Accelerate's AcceleratedOptimizer around a torch optimizer: step() and zero_grad() act only on steps
    that synchronise gradients; under fp16 the gradients are unscaled first and a step whose gradients
    hold inf or NaN is skipped (step_was_skipped), the loss scale backing off.

    zero_grad() keeps the gradient storage of the parameters of prepared modules (accel's buckets): it
    zeroes it in place, as DDP's gradient_as_bucket_view requires; with set_to_none, a parameter that no
    rank's next backward reaches reads None after it, as under DDP. Parameters of no prepared module follow
    torch's zero_grad (set_to_none None means True, as in Accelerate)."""

    def __init__(self, optimizer, accelerator, device_placement=True, zero_stage=0):
        """zero_stage 1, 2 or 3: the optimizer's groups then hold this process's share of each parameter
        (accel._torch_zero), which step() steps and the library gathers to every process (under 3, the
        library's shares themselves, gathered when the module next uses them)."""
        # torch.optim.Optimizer.__init__ is not called: this object only forwards to `optimizer`.
        self.optimizer = optimizer
        self._accelerator = accelerator
        self._is_overflow = False
        if device_placement and accelerator.device != "cpu":
            state = optimizer.state_dict()
            optimizer.load_state_dict(_to_device(state, accelerator.device))
        self._parameters = _parameters_of(optimizer)  # the module's, whatever the groups hold after
        self._zero = None
        if zero_stage:
            from ._torch_zero import zero_steps
            self._zero = zero_steps(optimizer, accelerator, zero_stage)

    _zero = None  # also after unpickling, which keeps only the optimizer and the overflow flag

    state = _forwarded("state")
    param_groups = _forwarded("param_groups")
    defaults = _forwarded("defaults")

    def add_param_group(self, param_group):
        self.optimizer.add_param_group(param_group)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def save_checkpoint_state(self, file):
        """save_state's bytes: state_dict() with the layout of what this process steps."""
        torch.save(_torch_optim_state.saved_state(self, self._layout(), replicated=self._zero is None), file)

    def load_checkpoint_parts(self, saved):
        """load_state from every saving process's bytes (any number of processes, any ZeRO stage)."""
        accelerator = self._accelerator
        _torch_optim_state.load_parts(self, saved, accelerator.process_index, accelerator.num_processes,
                                      self._layout())

    def _layout(self):
        if self._zero is not None:
            stepped = self._zero.stepped()
        else:
            stepped = [(parameter, 0, parameter.numel(), parameter)
                       for group in self.optimizer.param_groups for parameter in group["params"]]
        owners = {id(owner): owner for owner in (self._accelerator._hosted_owning(entry[0]) for entry in stepped)}
        names = {}
        if len(owners) == 1 and None not in owners.values():
            names = {id(parameter): name for name, parameter in next(iter(owners.values())).module.named_parameters()}
        return _torch_optim_state.layout(names, stepped)

    def zero_grad(self, set_to_none=None):
        if not self._accelerator.sync_gradients:
            return
        loose = []
        by_module = {}
        for parameter in self._parameters if self._zero is not None else _parameters_of(self.optimizer):
            hosted = self._accelerator._hosted_owning(parameter)
            if hosted is None:
                loose.append(parameter)
            else:
                by_module.setdefault(id(hosted), (hosted, []))[1].append(parameter)
        for hosted, parameters in by_module.values():
            hosted.zero_grad(parameters, set_to_none is None or set_to_none)
        if self._zero is not None:
            self._zero.zero_grad()
        for parameter in loose:
            if parameter.grad is None:
                continue
            if set_to_none is None or set_to_none:
                parameter.grad = None
            else:
                if parameter.grad.grad_fn is not None:
                    parameter.grad.detach_()
                else:
                    parameter.grad.requires_grad_(False)
                parameter.grad.zero_()

    def step(self, closure=None):
        if not self._accelerator.sync_gradients:
            return None
        if self._zero is not None:
            return self._zero.step(closure)
        scaling = self._accelerator._torch.scaling
        if not scaling.enabled:
            return self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        parameters = _parameters_of(self.optimizer)
        found_inf = scaling.unscale(parameters)
        result = None
        if not found_inf:
            result = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        self._is_overflow = found_inf
        scaling.finish_step(parameters, found_inf)
        return result

    @property
    def step_was_skipped(self):
        """Whether the last synchronising step was skipped because fp16 gradients held inf or NaN."""
        return self._is_overflow

    def train(self):
        if hasattr(self.optimizer, "train"):
            self.optimizer.train()

    def eval(self):
        if hasattr(self.optimizer, "eval"):
            self.optimizer.eval()

    def __repr__(self):
        return f"AcceleratedOptimizer({self.optimizer!r})"

    def __getstate__(self):
        return {"optimizer": self.optimizer, "_is_overflow": self._is_overflow}


def _to_device(state, device):
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {key: _to_device(value, device) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_to_device(value, device) for value in state)
    return state


class AcceleratedScheduler:
    """Accelerate's AcceleratedScheduler around a torch LR scheduler. With step_with_optimizer (the
    Accelerator's step_scheduler_with_optimizer, default True) step() acts only after a real optimizer
    step: nothing while accumulating or after an fp16 step that was skipped; then it steps the schedule
    num_processes times (once with split_batches), so a schedule sized in single-process steps keeps its
    place (a OneCycleLR never past its total_steps)."""

    def __init__(self, scheduler, optimizers, accelerator, step_with_optimizer=True, split_batches=False):
        self.scheduler = scheduler
        self.optimizers = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
        self.split_batches = split_batches
        self.step_with_optimizer = step_with_optimizer
        self._accelerator = accelerator

    def step(self, *args, **kwargs):
        if not self.step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self._accelerator.sync_gradients:
            return
        if any(optimizer.step_was_skipped for optimizer in self.optimizers):
            return
        repeats = 1 if self.split_batches else self._accelerator.num_processes
        for _ in range(repeats):
            total = getattr(self.scheduler, "total_steps", None)
            if total is not None and self.scheduler._step_count > total:
                break
            with warnings.catch_warnings():
                # torch warns when its scheduler steps before the optimizer it wraps, which a skipped or
                # accumulating step makes look so.
                warnings.simplefilter("ignore", UserWarning)
                self.scheduler.step(*args, **kwargs)

    def get_last_lr(self):
        return self.scheduler.get_last_lr()

    def state_dict(self):
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict):
        self.scheduler.load_state_dict(state_dict)

    def get_lr(self):
        return self.scheduler.get_lr()

    def print_lr(self, *args, **kwargs):
        return self.scheduler.print_lr(*args, **kwargs)

    def __repr__(self):
        return f"AcceleratedScheduler({self.scheduler!r})"
