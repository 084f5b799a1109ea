"""An eager torch.nn.Module under accel: its forward and backward stay torch's, and accel gets told about
them as DDP's hooks tell DDP's reducer (capi/accel/model.h, accel_model_from_tensors and the calls after it).

prepare moves the module to the state's device, makes an accel model over its parameters and buffers (DLPack
views: the memory stays torch's), prepares it (rank 0's values in every rank's tensors), and installs accel's
gradient storage as each trainable parameter's .grad (with several processes a view into its gradient
bucket, as DDP's gradient_as_bucket_view), so that autograd accumulates there in place. Then, per backward:
- each trainable parameter's post-accumulate-grad hook (Tensor.register_post_accumulate_grad_hook on torch
  >= 2.1; the AccumulateGrad node's hook before) checks that .grad is still that storage (a zero_grad that
  set it to None makes autograd create another: its value is copied in and the storage put back, as DDP
  does) and marks the gradient ready, which starts its bucket's all-reduce once the bucket is full;
- the first hook of a backward queues accel_model_end_backward on autograd's engine, run when the whole
  backward is over (DDP's finalize callback), so `loss.backward()` synchronises as accelerator.backward
  does.
With several processes the module comes back wrapped (DataParallelModule, DDP's place in Accelerate), whose
forward first calls accel_model_begin_forward: the buffer broadcast and the decision whether the coming
backward synchronises. unwrap_model gives the module itself back. Under zero_stage 3 on several processes
(or offloaded on one) the module is prepared by accel._torch_sharded instead (its parameters sharded, gathered
per unit).
"""
import contextlib
import functools

import torch

from .model import Model

# Autograd's engine: queue_callback runs a function once the backward in progress is over.
_ENGINE = torch.autograd.Variable._execution_engine


def _low_precision_dtype(mixed_precision, device_type):
    """The autocast dtype of accel's mixed precision on this device type, or None where there is none:
    bf16 on the CPU and CUDA, fp16 on CUDA (fp16 on the CPU is the loss scaler alone)."""
    if mixed_precision == "bf16":
        return torch.bfloat16
    if mixed_precision == "fp16" and device_type == "cuda":
        return torch.float16
    return None


def convert_to_fp32(data):
    """fp16 and bf16 tensors of nested lists, tuples and dicts as float32; anything else as it is."""
    if isinstance(data, torch.Tensor):
        return data.float() if data.dtype in (torch.float16, torch.bfloat16) else data
    if isinstance(data, (list, tuple)):
        items = [convert_to_fp32(item) for item in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, dict):
        return type(data)((key, convert_to_fp32(value)) for key, value in data.items())
    return data


def patch_forward_for_mixed_precision(module, device_type, dtype, outputs_to_fp32=True, autocast_handler=None):
    """Accelerate's prepare_model under mixed precision: forward runs under torch.autocast (with
    autocast_handler's enabled and cache_enabled, an AutocastKwargs, when given) and its low precision
    outputs come back as float32; the original stays as module._original_forward."""
    original = module.forward
    enabled = autocast_handler is None or autocast_handler.enabled
    cache_enabled = None if autocast_handler is None else autocast_handler.cache_enabled

    @functools.wraps(original)
    def forward(*args, **kwargs):
        with torch.autocast(device_type=device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled):
            outputs = original(*args, **kwargs)
        return convert_to_fp32(outputs) if outputs_to_fp32 else outputs

    module._original_forward = original
    module.forward = forward


def restore_forward(module):
    """Undoes patch_forward_for_mixed_precision (unwrap_model(keep_fp32_wrapper=False))."""
    original = module.__dict__.pop("_original_forward", None)
    if original is not None:
        module.forward = original


def _post_accumulate_grad_hook(parameter, hook):
    """hook() after autograd accumulated into parameter.grad. Returns (handle, what must be kept alive)."""
    if hasattr(parameter, "register_post_accumulate_grad_hook"):  # torch >= 2.1
        return parameter.register_post_accumulate_grad_hook(lambda _parameter: hook()), None
    # torch < 2.1: a hook on the parameter's AccumulateGrad node. autograd keeps that node only while a graph
    # or someone refers to it, so it is kept here (as DDP keeps its grad accumulators).
    accumulator = parameter.expand_as(parameter).grad_fn.next_functions[0][0]
    return accumulator.register_hook(lambda _inputs, _outputs: hook()), accumulator


class PreparedModule:
    """What a prepared nn.Module's keeper (HostedModule, accel._torch_sharded.ShardedModule) answers for
    every stage: self.model is the accel model, self._by_parameter its trainable parameters' indices by id,
    self._hooks the (handle, kept object) pairs of its hooks."""

    def owns(self, parameter):
        return id(parameter) in self._by_parameter

    def begin_forward(self):
        self.model.begin_forward(torch.is_grad_enabled())

    def remove_hooks(self):
        for handle, _kept in self._hooks:
            handle.remove()
        self._hooks.clear()


class HostedModule(PreparedModule):
    """One prepared nn.Module: the accel model over its tensors, the gradient storage and the hooks."""

    def __init__(self, module, prepare_model, several_processes=False):
        """prepare_model(model) prepares the accel model with the accelerator's options (collective)."""
        named_parameters = list(module.named_parameters())  # each tensor once, as accel lists them
        self.module = module
        self.model = Model.from_tensors([(name, parameter.detach()) for name, parameter in named_parameters],
                                        [(name, buffer.detach()) for name, buffer in module.named_buffers()],
                                        [parameter.requires_grad for _, parameter in named_parameters])
        prepare_model(self.model)
        self.trainable = {index: parameter for index, (_, parameter) in enumerate(named_parameters)
                          if parameter.requires_grad}
        self.grads = {index: self.model.grad_view(index).torch() for index in self.trainable}
        self._by_parameter = {id(parameter): index for index, parameter in self.trainable.items()}
        self._end_queued = False
        self._several_processes = several_processes
        # Trainable parameters whose gradient torch would hold as None: all at first, then those set to none
        # by zero_grad, until a gradient accumulates on this process. Their storage stays installed (zeroed)
        # through the backward; at its end those no rank's backward reached get None back, as under DDP.
        self._none = set(self.trainable)
        self._hooks = []
        for index, parameter in self.trainable.items():
            parameter.grad = self.grads[index]
            self._hooks.append(_post_accumulate_grad_hook(parameter, functools.partial(self._grad_ready, index)))

    def storage_of(self, parameter):
        return self.grads[self._by_parameter[id(parameter)]]

    def reinstall(self, parameter):
        """Puts the gradient storage back as parameter.grad, keeping what autograd put elsewhere."""
        storage, current = self.storage_of(parameter), parameter.grad
        if current is None or current.data_ptr() != storage.data_ptr():
            with torch.no_grad():
                if current is None:
                    storage.zero_()
                else:
                    storage.copy_(current)
            parameter.grad = storage

    def zero_grad(self, parameters, set_to_none=False):
        """Zeroes the gradient storage of these parameters in place and installs it again where it was
        replaced: the storage (a bucket view) is never given up. set_to_none: the parameters then read as
        torch's None until a backward reaches them (see _end_backward)."""
        storages = []
        for parameter in parameters:
            storage = self.storage_of(parameter)
            if set_to_none:
                self._none.add(self._by_parameter[id(parameter)])
            if parameter.grad is None or parameter.grad.data_ptr() != storage.data_ptr():
                parameter.grad = storage
            storages.append(storage)
        with torch.no_grad():
            torch._foreach_zero_(storages)

    def _grad_ready(self, index):
        self._none.discard(index)
        parameter = self.trainable[index]
        if parameter.grad is not self.grads[index]:
            self.reinstall(parameter)
        if not self._end_queued:
            self._end_queued = True
            _ENGINE.queue_callback(self._end_backward)
        self.model.grad_ready(index)

    def _end_backward(self):
        self._end_queued = False
        self.model.end_backward()
        for index in self._none:
            reached_by_no_rank = not self._several_processes or self.model.grad_reached_by_no_rank(index)
            self.trainable[index].grad = None if reached_by_no_rank else self.grads[index]


class DataParallelModule(torch.nn.Module):
    """A module prepared on several processes, as Accelerate's DistributedDataParallel wrapper: .module is
    the module itself (its state_dict keys get the prefix "module.", as DDP's do); forward tells accel a
    forward begins (rank 0's buffers broadcast when the forward before synchronised; whether the coming
    backward synchronises), then runs the module's."""

    def __init__(self, module, hosted, no_sync):
        super().__init__()
        self.module = module
        self._hosted = hosted
        self._no_sync = no_sync

    def forward(self, *args, **kwargs):
        self._hosted.begin_forward()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """DDP's no_sync(): backwards of forwards run in the block only accumulate on this process."""
        with self._no_sync():
            yield
