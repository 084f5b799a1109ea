"""The Accelerator's training step: accumulation, backward, loss scaling, clipping, the step's contexts."""
import contextlib
import os
import sys
import warnings

from ._accelerator_prepare import describe_kind
from ._library import ffi, lib
from .errors import UnsupportedError, check
from .kwargs_handlers import AutocastKwargs, ProfileKwargs
from .model import Model
from .tensor import Tensor, _is_torch_tensor
from .utils.dataclasses import DistributedType


class TrainingMixin:
    """The Accelerator's methods of the training step."""

    @contextlib.contextmanager
    def accumulate(self, *models):
        """`with accelerator.accumulate(model):` around each step: decides whether this step synchronises
        gradients (every gradient_accumulation_steps batches, and at the end of the loader). The state knows
        its models: the arguments are accepted so that Accelerate code runs unchanged."""
        check(lib.accel_state_accumulate(self.pointer))
        yield

    @property
    def sync_gradients(self):
        """True when the current step synchronises gradients and steps the optimizer; set it as in Accelerate
        (it holds until the next accumulate() decides again)."""
        return bool(lib.accel_state_sync_gradients(self.pointer))

    @sync_gradients.setter
    def sync_gradients(self, value):
        check(lib.accel_state_set_sync_gradients(self.pointer, 1 if value else 0))

    def backward(self, loss, num_items_in_batch=None, **kwargs):
        """Backward of loss / gradient_accumulation_steps (scaled under fp16); on a synchronising step the
        gradients are then averaged over the processes. loss is a torch tensor (of prepared torch
        modules; kwargs go to its backward), or an accel.Tensor computed by a prepared accel Model or
        accel.compute_loss.

        num_items_in_batch: for a loss summed over this micro-batch's items (compute_loss with
        reduction="sum"), the number of items in the whole accumulated global batch (every micro-batch of
        the optimizer step, on every process: sum the local counts with reduce(..., "sum")). The gradient
        is then that of the mean over the full batch, however unevenly the items fall."""
        if _is_torch_tensor(loss):
            self._torch_backward(loss, num_items_in_batch, kwargs)
            return
        if not isinstance(loss, Tensor):
            raise TypeError(f"backward takes a loss (a torch tensor, or an accel.Tensor from a prepared accel "
                            f"Model or accel.compute_loss), not {describe_kind(loss)}")
        if kwargs:
            raise TypeError(f"backward of an accel.Tensor takes no {', '.join(kwargs)}")
        if num_items_in_batch is None:
            check(lib.accel_state_backward(self.pointer, loss.pointer))
        else:
            check(lib.accel_state_backward_with_items(self.pointer, loss.pointer, int(num_items_in_batch)))

    def _torch_backward(self, loss, num_items_in_batch, kwargs):
        """Accelerate's backward on a torch loss: divided by the accumulation steps (or, with
        num_items_in_batch, normalised as accel_state_backward_with_items does), multiplied by the fp16 loss
        scale, then torch's backward, whose hooks synchronise the prepared modules' gradients."""
        if num_items_in_batch is not None:
            if int(num_items_in_batch) <= 0:
                raise ValueError("backward: num_items_in_batch must be > 0")
            loss = loss * (self.num_processes / int(num_items_in_batch))
        elif self.gradient_accumulation_steps != 1:
            loss = loss / self.gradient_accumulation_steps
        if self._loss_scaling:
            loss = self._torch.scaling.scale(loss)
        loss.backward(**kwargs)

    def lomo_backward(self, loss, learning_rate):
        """Accelerate's lomo_backward: the fused backward and update of a prepared Lomo / AdaLomo optimizer
        (the lomo_optim package), which steps each parameter inside backward. One process only: on several,
        UnsupportedError, since LOMO would update every parameter before accel averages its gradient."""
        fused = [prepared.optimizer for prepared in (self._torch_objects.optimizers if self._torch_objects else ())
                 if type(prepared.optimizer).__name__ in ("Lomo", "AdaLomo")
                 and type(prepared.optimizer).__module__.split(".")[0] == "lomo_optim"]
        if not fused:
            raise ValueError("No LOMO optimizer found, please use `Lomo` or `AdaLomo` optimizer from `lomo_optim` "
                             "package")
        if learning_rate is None:
            raise ValueError("lomo_backward needs the learning rate (learning_rate)")
        if self.num_processes > 1:
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                                   "lomo_backward on several processes: LOMO updates each parameter during "
                                   "backward, before accel averages its gradient over the processes")
        fused[0].fused_backward(loss=loss, lr=learning_rate)

    @property
    def optimizer_step_was_skipped(self):
        """True when a prepared optimizer skipped its last step (an fp16 overflow)."""
        accel_skipped = any(optimizer.step_was_skipped for optimizer in self._accel_optimizers)
        return accel_skipped or (self._torch_objects is not None and self._torch_objects.optimizer_step_was_skipped())

    @contextlib.contextmanager
    def autocast(self, cache_enabled=False, autocast_handler=None):
        """Prepared models always run forward under the state's mixed precision, with or without this
        block. The block adds the same for code outside forward: the library's own operations in it (a loss
        from compute_loss), and torch code when torch is loaded: autocast to bf16 (CPU or CUDA) or fp16
        (CUDA). fp16 on the CPU is the loss scaler alone (LibTorch 1.13 has no fp16 CPU autocast): nothing
        then.

        autocast_handler: an AutocastKwargs for this block (default: the one given in kwargs_handlers), whose
        enabled and cache_enabled go to torch.autocast. enabled=False runs the block's torch code in float32,
        inside an outer autocast too; the library's operations in it then stay as the enclosing block has
        them (the library's scope cannot be switched off inside another). cache_enabled=True is
        Accelerate's deprecated spelling of AutocastKwargs(cache_enabled=True) (a FutureWarning)."""
        if cache_enabled:
            warnings.warn("Passing `cache_enabled=True` to `accelerator.autocast` is deprecated and will be removed "
                          "in v0.23.0. Please use the `AutocastKwargs` class instead and pass it to the `Accelerator` "
                          "as a `kwarg_handler`.", FutureWarning)
            if self.autocast_handler is None:
                self.autocast_handler = AutocastKwargs()
            self.autocast_handler.cache_enabled = True
        handler = self.autocast_handler if autocast_handler is None else autocast_handler
        enabled = handler is None or handler.enabled
        if enabled:
            check(lib.accel_state_autocast_begin(self.pointer))
        try:
            torch = sys.modules.get("torch")
            device_type = self.device.split(":")[0]
            dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(self.mixed_precision)
            if torch is None or dtype is None or (device_type == "cpu" and dtype != "bfloat16"):
                yield
            else:
                with torch.autocast(device_type=device_type, dtype=getattr(torch, dtype), enabled=enabled,
                                    cache_enabled=None if handler is None else handler.cache_enabled):
                    yield
        finally:
            if enabled:
                check(lib.accel_state_autocast_end(self.pointer))

    @contextlib.contextmanager
    def profile(self, profile_handler=None):
        """Accelerate's profile: the block runs under torch.profiler, and the torch.profiler.profile is what
        the with statement gives (call its step() per iteration when a schedule is set). profile_handler: a
        ProfileKwargs (default: the one given in kwargs_handlers, else ProfileKwargs()). With its
        output_trace_dir, each process then writes its Chrome trace there as profile_<process index>.json,
        and waits for the others."""
        handler = profile_handler or self.profile_handler or ProfileKwargs()
        with handler.build() as profiler:
            yield profiler
        if handler.output_trace_dir is None:
            return
        os.makedirs(handler.output_trace_dir, exist_ok=True)
        profiler.export_chrome_trace(os.path.join(handler.output_trace_dir, f"profile_{self.process_index}.json"))
        self.wait_for_everyone()

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model):
        """Accelerate's trigger_sync_in_backward: the next backward of model (a prepared torch module)
        synchronises its gradients, averaging over the processes what it and the backwards under no_sync
        accumulated, although model's forward ran under no_sync. Use it around that backward, outside
        no_sync. With one process it does nothing. An accel Model decides at its own forward: it is refused
        (InvalidStateError) with several processes."""
        if self.num_processes > 1:
            # As a new forward would: outside no_sync, the coming backward synchronises.
            self._accel_model(model, "trigger_sync_in_backward").begin_forward(True)
        yield

    @contextlib.contextmanager
    def no_sync(self, model):
        """`with accelerator.no_sync(model):` backwards of forwards run in the block only accumulate
        gradients on this process (no all-reduce); the next synchronising backward averages the sum."""
        handle = self._accel_model(model, "no_sync")
        check(lib.accel_state_no_sync_begin(self.pointer, handle.pointer))
        try:
            yield
        finally:
            check(lib.accel_state_no_sync_end(self.pointer, handle.pointer))

    @contextlib.contextmanager
    def join_uneven_inputs(self, joinables, even_batches=None):
        """Accelerate's join_uneven_inputs, as Accelerate runs it on this kind of state. One process: nothing.
        CPU processes (MULTI_CPU): a UserWarning that joining is only supported for multi-GPU training, and
        nothing else, as Accelerate's does there. Several GPUs: Accelerate overrides the prepared loaders'
        even_batches and runs torch's Join, in which a process out of batches shadows the others' gradient
        all-reduces; the library has neither, so that is UnsupportedError, except where Accelerate's does
        nothing either (even_batches None or True, and the Accelerator's even_batches True)."""
        if self.distributed_type == DistributedType.MULTI_GPU:
            if not (self.even_batches and even_batches in (None, True)):
                raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED,
                                       "join_uneven_inputs with even_batches=False: the library cannot join uneven "
                                       "inputs (no process shadows the gradient all-reduces of the others once out "
                                       "of batches); keep even_batches=True, which gives every process as many "
                                       "batches")
        elif self.distributed_type != DistributedType.NO:
            warnings.warn("Joining uneven inputs is only supported for multi-GPU training, as a result "
                          "`join_uneven_inputs` will have no effect.")
        yield

    def grad_scale(self):
        """The fp16 loss scale as an accel.Tensor (0-d float32 on the device, updated in place; 1 without
        fp16 loss scaling): what a loss is multiplied by before a backward the library does not run."""
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_state_grad_scale(self.pointer, out))
        return Tensor(out[0])

    def unscale_model_gradients(self, model):
        """Divides a prepared model's gradients by the loss scale; True when one holds inf or NaN. Once
        per optimizer step, before clipping; nothing without fp16 loss scaling."""
        found_inf = ffi.new("int *")
        check(lib.accel_state_unscale_gradients(self.pointer, model.pointer, found_inf))
        return bool(found_inf[0])

    def update_grad_scale(self, found_inf):
        """GradScaler.update after an optimizer step taken (found_inf False) or skipped (True)."""
        check(lib.accel_state_update_grad_scale(self.pointer, int(bool(found_inf))))

    def clip_grad_norm_(self, parameters, max_norm, norm_type=2.0):
        """Unscales fp16 gradients, then clips the gradients to a total norm of max_norm; returns the norm
        before clipping. parameters: torch parameters (model.parameters(), as Accelerate) or a prepared
        torch module, giving a torch tensor; or an accel Model, giving a float. A prepared torch module's
        whole set of trainable parameters is clipped by the library (torch's arithmetic), others by
        torch.nn.utils.clip_grad_norm_."""
        if isinstance(parameters, Model):
            total = ffi.new("double *")
            check(lib.accel_state_clip_grad_norm(self.pointer, parameters.pointer, max_norm, norm_type, total))
            return total[0]
        import torch
        listed, hosted = self._torch_parameters(parameters, "clip_grad_norm_")
        if hosted is None:
            return torch.nn.utils.clip_grad_norm_(listed, max_norm, norm_type)
        total = ffi.new("double *")
        check(lib.accel_state_clip_grad_norm(self.pointer, hosted.model.pointer, max_norm, norm_type, total))
        dtype = next(iter(hosted.grads.values())).dtype if hosted.grads else torch.float32
        return torch.tensor(total[0], dtype=dtype, device=self.device)

    def clip_grad_value_(self, parameters, clip_value):
        """Unscales fp16 gradients, then clamps every gradient to [-clip_value, clip_value] (parameters as
        clip_grad_norm_'s)."""
        if isinstance(parameters, Model):
            check(lib.accel_state_clip_grad_value(self.pointer, parameters.pointer, clip_value))
            return
        import torch
        listed, hosted = self._torch_parameters(parameters, "clip_grad_value_")
        if hosted is None:
            torch.nn.utils.clip_grad_value_(listed, clip_value)
        else:
            check(lib.accel_state_clip_grad_value(self.pointer, hosted.model.pointer, clip_value))

    def _torch_parameters(self, parameters, what):
        """(the parameters as a list, unscaled for this step under fp16; the prepared module whose trainable
        parameters they are exactly, or None)."""
        import torch
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        elif isinstance(parameters, torch.nn.Module):
            parameters = parameters.parameters()
        elif not hasattr(parameters, "__iter__"):
            raise TypeError(f"{what} takes parameters (model.parameters()) or a prepared model, not "
                            f"{describe_kind(parameters)}")
        listed = list(parameters)
        if self._torch_objects is None:
            return listed, None
        self._torch_objects.scaling.unscale(listed)
        trainable = [p for p in listed if p.requires_grad]
        owners = {id(self._hosted_owning(p)) for p in trainable}
        hosted = self._hosted_owning(trainable[0]) if trainable and len(owners) == 1 else None
        if hosted is None or {id(p) for p in trainable} != {id(p) for p in hosted.trainable.values()}:
            return listed, None
        return listed, hosted

    # --- loaders of torch DataLoaders being iterated (Accelerate's GradientState.active_dataloader) ---------

    def _loader_began(self, loader):
        self._active_loaders.append(loader)

    def _loader_ended(self, loader):
        if loader in self._active_loaders:
            self._active_loaders.remove(loader)

    def _active_torch_loader(self):
        return self._active_loaders[-1] if self._active_loaders else None
