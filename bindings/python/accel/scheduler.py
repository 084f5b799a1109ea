"""accel.Scheduler, Accelerate's AcceleratedScheduler: it steps only after a real optimizer step, and then
once per process unless split_batches, so a schedule sized in single-process steps keeps its place. Made by
Accelerator.prepare from a SchedulerSpec."""
from ._callbacks import Callbacks
from ._handle import Handle
from ._library import ffi, lib
from .errors import check


class Scheduler(Handle):
    _free = lib.accel_scheduler_free

    def __init__(self, optimizer, schedule, options):
        """schedule: a name with its options (the list, with each one's options, is in
        capi/accel/scheduler.h: transformers' "linear", "cosine", ..., "warmup_stable_decay", torch's "step",
        "multistep", "exponential", "one_cycle", "reduce_on_plateau"), or a function of the step returning
        the multiplier of each group's initial lr (LambdaLR)."""
        out = ffi.new("accel_scheduler_t **")
        self.callbacks = None
        if callable(schedule):
            self.callbacks = Callbacks()

            def multiplier(step, result, _payload):
                result[0] = float(schedule(step))

            pointer = self.callbacks.make("accel_lr_multiplier_fn", multiplier)
            check(lib.accel_scheduler_from_callback(out, optimizer.pointer, pointer, ffi.NULL), self.callbacks)
        else:
            check(lib.accel_scheduler_new(out, optimizer.pointer, schedule.encode(), options.pointer))
        super().__init__(out[0])
        self.optimizer = optimizer

    def step(self, metric=None):
        """One step by Accelerate's rule. metric: what "reduce_on_plateau" watches (torch's
        ReduceLROnPlateau.step(metrics)); the other schedules take none."""
        if metric is not None:
            check(lib.accel_scheduler_step_with_metric(self.pointer, float(metric)))
            return
        check(lib.accel_scheduler_step(self.pointer), *([self.callbacks] if self.callbacks else []))

    def get_last_lr(self):
        """The learning rate of each parameter group after the last step (torch's get_last_lr)."""
        rates = []
        for group in range(self.optimizer.num_groups):
            out = ffi.new("double *")
            check(lib.accel_scheduler_last_lr(self.pointer, group, out))
            rates.append(out[0])
        return rates

    @property
    def step_count(self):
        """Scheduler steps taken."""
        return lib.accel_scheduler_step_count(self.pointer)


def __getattr__(name):
    # Accelerate's AcceleratedScheduler, for torch LR schedulers: in a module that imports torch, on demand.
    if name == "AcceleratedScheduler":
        from ._torch_optim import AcceleratedScheduler
        return AcceleratedScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
