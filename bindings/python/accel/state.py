"""accel.state: Accelerate's PartialState, AcceleratorState and GradientState, read from the process's
library state (a process has one: every instance shares it, as Accelerate's Borg singletons do).

PartialState() made before any Accelerator makes the library state (with cpu, as Accelerate's cpu=
argument); an Accelerator made later must then ask for the same settings (a process has one state).
"""
import functools
import weakref

from ._library import lib
from .errors import StateResetError, check
from .options import resolved_value

# Weak references to the process's Accelerators, the latest registered last, reset ones included (a forked
# child must not free any). Every live one is a handle to the same state, so any answers for it: the latest,
# or, when it is gone (a function made its own Accelerator and returned), the one before it.
_accelerators = []


def _register(accelerator):
    _accelerators[:] = [reference for reference in _accelerators if reference() not in (None, accelerator)]
    _accelerators.append(weakref.ref(accelerator))


def _forget_inherited_states():
    """In a process forked by a launcher: starts without a state, as if none had been made, so that its
    Accelerator meets the other launched processes (the library makes a new state in a process whose pid
    differs). The Accelerators inherited from the parent are dropped without freeing their handles: their
    state's threads and group exist only in the parent, and freeing the last handle would tear them down."""
    for reference in _accelerators:
        if reference() is not None:
            reference()._pointer = None
    _accelerators.clear()
    PartialState._shared_state.clear()
    GradientState._shared_state.clear()


# Where PartialState.distributed_type's setter keeps its value, in the shared state a reset clears.
_SET_DISTRIBUTED_TYPE = "_set_distributed_type"


def set_distributed_type():
    """The value given to PartialState.distributed_type's setter, or None."""
    return PartialState._shared_state.get(_SET_DISTRIBUTED_TYPE)


# The Accelerator class, installed by accel.accelerator (which this module sits below) when it is imported:
# what PartialState() makes when no Accelerator lives.
_accelerator_class = None


def _install_accelerator_class(cls):
    global _accelerator_class
    _accelerator_class = cls


def _live_accelerator():
    for reference in reversed(_accelerators):
        accelerator = reference()
        if accelerator is not None and not accelerator.closed and not accelerator._state_was_reset:
            return accelerator
    return None


# The settings Accelerate keeps in its shared AcceleratorState / PartialState: a later Accelerator that leaves
# one unset joins the process's value (a different value is still refused). The library's other state
# settings (accumulation, scheduler stepping, rng_types, grad scaler) are each Accelerator's own in
# Accelerate, where unset means the default: they are left to it.
_JOINED_SETTINGS = ("mixed_precision", "use_cpu", "device", "backend", "timeout_s")


def _join_live_state(settings):
    """settings (state options, None where unset) with the live state's value for every unset one of
    _JOINED_SETTINGS, so that, as in Accelerate, Accelerator() after AcceleratorState._reset_state() and
    Accelerator(mixed_precision="bf16") is a bf16 one rather than a conflicting request for "no"."""
    accelerator = _live_accelerator()
    if accelerator is None:
        return settings
    return {**settings, **{key: resolved_value(accelerator._state_options, "state", key)
                           for key in _JOINED_SETTINGS if settings.get(key) is None}}


def _check_not_reset(accelerator):
    """StateResetError, worded as Accelerate's AttributeError, for an Accelerator whose state was reset."""
    if getattr(accelerator, "_state_was_reset", False):
        raise StateResetError(lib.ACCEL_ERR_INVALID_STATE,
                              "`AcceleratorState` object has no attribute left for this Accelerator. This happens "
                              "if `AcceleratorState._reset_state()` was called and an `Accelerator` or "
                              "`PartialState` was not reinitialized (objects made before the reset cannot be used: "
                              "make them again).")


def _reset():
    """Retires the process's library state (accel_state_reset: the next Accelerator may choose any settings,
    and every object made before can only be freed) and forgets the Accelerator it came from."""
    accelerator = _live_accelerator()
    if accelerator is not None:
        check(lib.accel_state_reset(accelerator.pointer))
    for reference in _accelerators:
        if reference() is not None:
            reference()._state_was_reset = True
    PartialState._shared_state.clear()
    GradientState._shared_state.clear()


class PartialState:
    """The process: num_processes, process_index, local_process_index, device, distributed_type, backend,
    is_main_process, ..., and wait_for_everyone, main_process_first, split_between_processes, print and the
    on_*_process decorators."""

    _shared_state = {}

    def __init__(self, cpu=False, **kwargs):
        self.__dict__ = self._shared_state
        if _live_accelerator() is None:
            self._own = _accelerator_class(cpu=True if cpu else None)  # kept alive by the shared state

    @property
    def _accelerator(self):
        accelerator = _live_accelerator()
        if accelerator is None:
            raise AttributeError("no accel state in this process: make an Accelerator (or a PartialState) first")
        return accelerator

    @property
    def initialized(self):
        return _live_accelerator() is not None

    num_processes = property(lambda self: self._accelerator.num_processes)
    process_index = property(lambda self: self._accelerator.process_index)
    local_process_index = property(lambda self: self._accelerator.local_process_index)
    device = property(lambda self: self._accelerator.device)

    @property
    def distributed_type(self):
        return self._accelerator.distributed_type

    @distributed_type.setter
    def distributed_type(self, value):
        """Settable, as Accelerate's attribute is (its test scripts swap it to reach a branch): every Python
        reader (this state, every Accelerator's distributed_type) sees value until the state is reset. The
        library's own behaviour (its process group, its collectives) stays that of the state it made."""
        self._shared_state[_SET_DISTRIBUTED_TYPE] = value
    backend = property(lambda self: self._accelerator.backend or None)
    is_main_process = property(lambda self: self._accelerator.is_main_process)
    is_local_main_process = property(lambda self: self._accelerator.is_local_main_process)
    is_last_process = property(lambda self: self._accelerator.is_last_process)
    debug = False
    fork_launched = False

    @property
    def use_distributed(self):
        return self.num_processes > 1

    def wait_for_everyone(self):
        self._accelerator.wait_for_everyone()

    def main_process_first(self):
        return self._accelerator.main_process_first()

    def local_main_process_first(self):
        return self._accelerator.local_main_process_first()

    def split_between_processes(self, inputs, apply_padding=False):
        return self._accelerator.split_between_processes(inputs, apply_padding)

    def print(self, *args, **kwargs):
        self._accelerator.print(*args, **kwargs)

    def _on(self, condition, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs) if condition() else None
        return wrapper

    def on_main_process(self, function):
        return self._on(lambda: self.is_main_process, function)

    def on_local_main_process(self, function):
        return self._on(lambda: self.is_local_main_process, function)

    def on_last_process(self, function):
        return self._on(lambda: self.is_last_process, function)

    def on_process(self, function=None, process_index=None):
        if function is None:
            return functools.partial(self.on_process, process_index=process_index)
        return self._on(lambda: self.process_index == process_index, function)

    def on_local_process(self, function=None, local_process_index=None):
        if function is None:
            return functools.partial(self.on_local_process, local_process_index=local_process_index)
        return self._on(lambda: self.local_process_index == local_process_index, function)

    def destroy_process_group(self, group=None):
        """Ends the process's state (Accelerator.end_training); nothing without one (none made yet, or reset),
        as Accelerate's does nothing when torch.distributed has no process group."""
        accelerator = _live_accelerator()
        if accelerator is not None:
            accelerator.end_training()

    @staticmethod
    def _reset_state():
        """Accelerate's PartialState._reset_state, as test suites call it between tests: a new Accelerator
        (or PartialState) may then choose other settings (CPU or not, mixed precision, accumulation) in the
        same process. Objects made before the reset keep working only as far as being freed: calling them
        raises InvalidStateError ("the state was reset"). With several processes, every process resets at
        the same point (see accel_state_reset in capi/accel/state.h)."""
        _reset()

    def __getattr__(self, name):
        """Reached for a name the state does not have, and for one of its properties when no state lives
        (never made, or reset): then worded as Accelerate's, naming the reset."""
        cls = type(self).__name__
        if isinstance(getattr(type(self), name, None), property):
            raise AttributeError(f"`{cls}` object has no attribute `{name}`. This happens if `{cls}._reset_state()` "
                                 "was called and an `Accelerator` or `PartialState` was not reinitialized.")
        raise AttributeError(f"'{cls}' object has no attribute '{name}'")

    def __repr__(self):
        return (f"Distributed environment: {self.distributed_type.value}\nNum processes: {self.num_processes}\n"
                f"Process index: {self.process_index}\nLocal process index: {self.local_process_index}\n"
                f"Device: {self.device}\n")


class AcceleratorState(PartialState):
    """PartialState with the Accelerator's settings: mixed_precision, deepspeed_plugin and fsdp_plugin (the
    live Accelerator's, or None), and dynamo_plugin / megatron_lm_plugin (None: accel has neither)."""

    _shared_state = PartialState._shared_state

    mixed_precision = property(lambda self: self._accelerator.mixed_precision)
    deepspeed_plugin = property(lambda self: self._accelerator._deepspeed_plugin)
    fsdp_plugin = property(lambda self: self._accelerator._fsdp_plugin)
    is_fsdp2 = property(lambda self: self._accelerator.is_fsdp2)
    dynamo_plugin = None
    megatron_lm_plugin = None

    @property
    def use_fp16(self):
        return self.mixed_precision != "no"

    @staticmethod
    def _reset_state(reset_partial_state=False):
        """Accelerate's AcceleratorState._reset_state. The library keeps the process and the Accelerator's
        settings in one state, so the reset is PartialState._reset_state's, whatever reset_partial_state
        says."""
        _reset()

    def __repr__(self):
        return super().__repr__() + f"Mixed precision type: {self.mixed_precision}\n"


class GradientState:
    """Accelerate's GradientState: sync_gradients (whether this step synchronises and steps the optimizer),
    and, from the prepared loader being iterated, end_of_dataloader, remainder, active_dataloader and
    in_dataloader; num_steps (gradient_accumulation_steps), sync_with_dataloader, sync_each_batch."""

    _shared_state = {}

    def __init__(self, gradient_accumulation_plugin=None):
        self.__dict__ = self._shared_state

    @staticmethod
    def _reset_state():
        """Accelerate's GradientState._reset_state: the accumulation and loader progress live in the process
        state, which PartialState._reset_state resets; this forgets nothing more."""
        GradientState._shared_state.clear()

    @property
    def _accelerator(self):
        return PartialState()._accelerator

    sync_gradients = property(lambda self: self._accelerator.sync_gradients)
    num_steps = property(lambda self: self._accelerator.gradient_accumulation_steps)
    adjust_scheduler = False

    @property
    def sync_with_dataloader(self):
        return resolved_value(self._accelerator._state_options, "state", "sync_with_dataloader") == "true"

    @property
    def sync_each_batch(self):
        return resolved_value(self._accelerator._state_options, "state", "sync_each_batch") == "true"

    @property
    def active_dataloader(self):
        return self._accelerator._active_torch_loader()

    @property
    def in_dataloader(self):
        return self.active_dataloader is not None

    @property
    def end_of_dataloader(self):
        loader = self.active_dataloader
        return bool(loader is not None and loader.end_of_dataloader)

    @property
    def remainder(self):
        loader = self.active_dataloader
        return -1 if loader is None else loader.remainder
