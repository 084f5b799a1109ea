"""The Accelerator's process: who and where it runs, its settings, barriers, seeding, splitting inputs."""
import contextlib
import io

import numpy as np

from . import state as state_module
from ._library import ffi, lib
from .errors import check
from .options import resolved_value
from .tensor import Tensor, _is_torch_tensor, lent, returned_like
from .utils.dataclasses import DistributedType


class Device(str):
    """A device name ("cpu", "cuda:1") that also reads as torch.device does (.type, .index), so Accelerate
    code such as `accelerator.device.type` or `x.to(accelerator.device)` runs unchanged without torch."""

    @property
    def type(self):
        return self.partition(":")[0]

    @property
    def index(self):
        _, _, index = self.partition(":")
        return int(index) if index else None


_DISTRIBUTED_TYPES = {
    lib.ACCEL_DISTRIBUTED_NO: DistributedType.NO,
    lib.ACCEL_DISTRIBUTED_MULTI_CPU: DistributedType.MULTI_CPU,
    lib.ACCEL_DISTRIBUTED_MULTI_GPU: DistributedType.MULTI_GPU,
}


def accelerate_distributed_type(running, device, deepspeed_plugin, fsdp_plugin):
    """What Accelerate calls a run that the library runs as `running` (NO, MULTI_CPU, MULTI_GPU) on `device`:
    DEEPSPEED under a DeepSpeedPlugin on a GPU (one process too), FSDP under an FSDP plugin on several GPUs;
    on CPU processes the library's own, under either plugin, as Accelerate's."""
    if deepspeed_plugin is not None and not device.startswith("cpu"):
        return DistributedType.DEEPSPEED
    if fsdp_plugin is not None and running == DistributedType.MULTI_GPU:
        return DistributedType.FSDP
    return running


class ProcessMixin:
    """The Accelerator's process properties and process-wide operations."""

    @property
    def num_processes(self):
        return lib.accel_state_num_processes(self.pointer)

    @property
    def process_index(self):
        return lib.accel_state_process_index(self.pointer)

    @property
    def local_process_index(self):
        return lib.accel_state_local_process_index(self.pointer)

    @property
    def num_local_processes(self):
        """Processes on this machine."""
        return lib.accel_state_num_local_processes(self.pointer)

    @property
    def is_main_process(self):
        return bool(lib.accel_state_is_main_process(self.pointer))

    @property
    def is_local_main_process(self):
        return bool(lib.accel_state_is_local_main_process(self.pointer))

    @property
    def is_last_process(self):
        return bool(lib.accel_state_is_last_process(self.pointer))

    @property
    def distributed_type(self):
        running = _DISTRIBUTED_TYPES[lib.accel_state_distributed_type(self.pointer)]
        return state_module.set_distributed_type() or accelerate_distributed_type(
            running, self.device, self._deepspeed_plugin, self._fsdp_plugin)

    @property
    def is_fsdp2(self):
        """Accelerate 1.x's: an FSDP run (above) whose plugin says fsdp_version 2."""
        return self.distributed_type == DistributedType.FSDP and self._fsdp_plugin.fsdp_version == 2

    @property
    def device(self):
        """"cpu" or "cuda:<n>": a string (torch is not needed to use the library) with torch.device's .type
        and .index."""
        return Device(ffi.string(lib.accel_state_device(self.pointer)).decode())

    @property
    def mixed_precision(self):
        """"no", "fp16" or "bf16"."""
        return ffi.string(lib.accel_state_mixed_precision(self.pointer)).decode()

    @property
    def backend(self):
        """"gloo", "nccl", or "" with one process; "gloo+shm" when all-reduces go through shared memory,
        "gloo+hier-shm" when through each node's and then between the nodes' leaders."""
        return ffi.string(lib.accel_state_backend(self.pointer)).decode()

    @property
    def is_broken(self):
        """True once a collective timed out or lost a peer: later collectives fail at once."""
        return bool(lib.accel_state_is_broken(self.pointer))

    @property
    def gradient_accumulation_steps(self):
        """This Accelerator's accumulation; set it as in Accelerate (from the next accumulate() on)."""
        return int(lib.accel_state_gradient_accumulation_steps(self.pointer))

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps):
        check(lib.accel_state_set_gradient_accumulation_steps(self.pointer, int(steps)))

    @property
    def state(self):
        """Accelerate's AcceleratorState (accel.state): the process and the Accelerator's settings."""
        return state_module.AcceleratorState()

    @property
    def gradient_state(self):
        return state_module.GradientState()

    @property
    def use_distributed(self):
        return self.num_processes > 1

    @property
    def split_batches(self):
        return bool(self.dataloader_config.split_batches)

    @property
    def even_batches(self):
        return self.dataloader_config.even_batches is not False

    @property
    def dispatch_batches(self):
        """DataLoaderConfiguration's dispatch_batches: None (Accelerate's default: dispatch iterable datasets
        only), True or False."""
        return self.dataloader_config.dispatch_batches

    @property
    def use_seedable_sampler(self):
        return bool(self.dataloader_config.use_seedable_sampler)

    @property
    def _step_scheduler_with_optimizer(self):
        return resolved_value(self._state_options, "state", "step_scheduler_with_optimizer") == "true"

    @property
    def _loss_scaling(self):
        """Whether losses are scaled (fp16 with the grad scaler on)."""
        return (self.mixed_precision == "fp16"
                and resolved_value(self._state_options, "state", "grad_scaler_enabled") == "true")

    def wait_for_everyone(self):
        """A barrier across every process."""
        check(lib.accel_state_wait_for_everyone(self.pointer))

    def set_seed(self, seed, device_specific=False):
        """Accelerate's set_seed: torch's default CPU (and CUDA) generators of this process, seeded with
        seed, plus the process index when device_specific. Python's random and numpy are not seeded."""
        check(lib.accel_state_set_seed(self.pointer, seed, int(bool(device_specific))))

    @contextlib.contextmanager
    def _goes_first(self, begin, end):
        check(begin(self.pointer))
        try:
            yield
        finally:
            # Even when the block failed: the other ranks wait for the first one in their begin.
            check(end(self.pointer))

    def main_process_first(self):
        """`with accelerator.main_process_first():` the main process runs the block, then the others."""
        return self._goes_first(lib.accel_state_main_process_first_begin, lib.accel_state_main_process_first_end)

    def local_main_process_first(self):
        """The same with the main process of each machine going first."""
        return self._goes_first(lib.accel_state_local_main_process_first_begin,
                                lib.accel_state_local_main_process_first_end)

    @contextlib.contextmanager
    def split_between_processes(self, inputs, apply_padding=False):
        """`with accelerator.split_between_processes(inputs) as mine:` this process's contiguous share of a
        list, tuple, string, numpy array, torch tensor or dict of those (every value split alike), the first
        len % num_processes ranks getting one more; apply_padding repeats the last item so every rank has as
        many."""
        yield self._split(inputs, apply_padding)

    def _split(self, inputs, apply_padding):
        if isinstance(inputs, dict):
            lengths = {len(value) for value in inputs.values()}
            if len(lengths) > 1:
                raise ValueError("split_between_processes: every value of the dict needs the same length")
            return {key: self._split(value, apply_padding) for key, value in inputs.items()}
        if isinstance(inputs, (np.ndarray, Tensor)) or _is_torch_tensor(inputs):
            out = ffi.new("accel_tensor_t **")
            with lent(inputs) as tensor:
                check(lib.accel_state_split_tensor(self.pointer, tensor.pointer, int(bool(apply_padding)), out))
            return returned_like(Tensor(out[0]), inputs)
        first, count, padded = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        check(lib.accel_state_split_range(self.pointer, len(inputs), first, count, padded))
        share = inputs[first[0]:first[0] + count[0]]
        if apply_padding and count[0] < padded[0] and len(inputs) > 0:
            share = share + inputs[-1:] * (padded[0] - count[0])
        return share

    def send_to_device(self, tensor, non_blocking=False):
        """The tensor (numpy array or torch tensor) on this process's device: the same memory when it is
        already there (Accelerate's send_to_device)."""
        out = ffi.new("accel_tensor_t **")
        with lent(tensor) as lent_tensor:
            check(lib.accel_state_send_to_device(self.pointer, lent_tensor.pointer, int(bool(non_blocking)), out))
        return returned_like(Tensor(out[0]), tensor)

    def print(self, *args, **kwargs):
        """print() on the main process of each machine only (Accelerate's PartialState.print), above the
        progress bar when one is drawn."""
        text = io.StringIO()
        print(*args, file=text, **kwargs)
        check(lib.accel_state_print(self.pointer, text.getvalue().rstrip("\n").encode()))

    # Accelerate's decorators: the function runs only on the processes named, returning None elsewhere.
    def on_main_process(self, function):
        return state_module.PartialState().on_main_process(function)

    def on_local_main_process(self, function):
        return state_module.PartialState().on_local_main_process(function)

    def on_last_process(self, function):
        return state_module.PartialState().on_last_process(function)

    def on_process(self, function=None, process_index=None):
        return state_module.PartialState().on_process(function, process_index)

    def on_local_process(self, function=None, local_process_index=None):
        return state_module.PartialState().on_local_process(function, local_process_index)

    @property
    def _rng_types(self):
        return [name for name in resolved_value(self._state_options, "state", "rng_types").split(",") if name]
