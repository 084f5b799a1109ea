"""accel.Optimizer, Accelerate's AcceleratedOptimizer: step() and zero_grad() act only on steps that
synchronise gradients; under fp16 a step whose gradients overflowed is skipped and the loss scale backs
off. Made by Accelerator.prepare from an OptimizerSpec."""
from ._handle import Handle
from ._library import ffi, lib
from .errors import check


class Optimizer(Handle):
    _free = lib.accel_optimizer_free

    def __init__(self, model, kind, options):
        """Use Accelerator.prepare(OptimizerSpec(...)). kind: "sgd", "adam" or "adamw"."""
        out = ffi.new("accel_optimizer_t **")
        check(lib.accel_optimizer_new(out, model.pointer, kind.encode(), options.pointer))
        super().__init__(out[0])

    _after_step = None  # under zero_stage 3, the prepared module's release of what a step makes stale

    def step(self):
        check(lib.accel_optimizer_step(self.pointer))
        if self._after_step is not None:
            self._after_step()

    def zero_grad(self):
        check(lib.accel_optimizer_zero_grad(self.pointer))

    @property
    def step_was_skipped(self):
        """True when the last sync step was skipped because fp16 gradients overflowed."""
        return bool(lib.accel_optimizer_step_was_skipped(self.pointer))

    @property
    def num_groups(self):
        """Parameter groups: one, or two when no_decay puts some parameters in a group without decay."""
        return lib.accel_optimizer_num_groups(self.pointer)

    def get_lr(self, group=0):
        out = ffi.new("double *")
        check(lib.accel_optimizer_lr(self.pointer, group, out))
        return out[0]

    def get_momentum(self, group=0):
        """The group's momentum: sgd's momentum, or beta1 for adam and adamw (what a one_cycle schedule
        cycles)."""
        out = ffi.new("double *")
        check(lib.accel_optimizer_momentum(self.pointer, group, out))
        return out[0]

    def get_betas(self, group=0):
        """(beta1, beta2) of an adam or adamw group; InvalidArgumentError for sgd."""
        beta1, beta2 = ffi.new("double *"), ffi.new("double *")
        check(lib.accel_optimizer_betas(self.pointer, group, beta1, beta2))
        return beta1[0], beta2[0]

    def set_lr(self, lr, group=None):
        """Sets the learning rate of one group, or of every group when group is None."""
        for index in range(self.num_groups) if group is None else [group]:
            check(lib.accel_optimizer_set_lr(self.pointer, index, lr))

    @property
    def loss_scale(self):
        """The current fp16 loss scale (1.0 without fp16)."""
        out = ffi.new("double *")
        check(lib.accel_optimizer_loss_scale(self.pointer, out))
        return out[0]


def __getattr__(name):
    # Accelerate's AcceleratedOptimizer, for torch optimizers: in a module that imports torch, loaded on demand.
    if name == "AcceleratedOptimizer":
        from ._torch_optim import AcceleratedOptimizer
        return AcceleratedOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
