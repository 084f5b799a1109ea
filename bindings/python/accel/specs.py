"""What Accelerator.prepare builds a loader, an optimizer or a scheduler from.

In Accelerate these are a torch DataLoader, optimizer and scheduler made before prepare(); here the
library builds them, so prepare is told what to build. A spec that names no model (optimizer) or
optimizer (scheduler) takes the only one prepared by the same Accelerator.
"""
import dataclasses
import typing


@dataclasses.dataclass
class DataLoaderSpec:
    """A loader over dataset (accel.Dataset), as torch's DataLoader(dataset, batch_size, shuffle, ...).

    batches: a list of lists of dataset indices instead of batch_size/shuffle (dynamic batch sizes, like a
    batch_sampler). prefetch_threads: threads reading batches ahead (torch's num_workers, as threads);
    prefetch_depth: batches read ahead of the one in use; pin_memory: page-locked batches for CUDA copies.
    already_sharded: the iterable dataset yields only this process's share already (a stream reading its
    own shard), so each process batches its own items, nothing sharded again nor dispatched."""

    dataset: typing.Any
    batch_size: int = None
    shuffle: bool = None
    drop_last: bool = None
    batches: list = None
    prefetch_threads: int = None
    prefetch_depth: int = None
    pin_memory: bool = None
    already_sharded: bool = None

    def options(self):
        return {"batch_size": self.batch_size, "shuffle": self.shuffle, "drop_last": self.drop_last,
                "prefetch_threads": self.prefetch_threads, "prefetch_depth": self.prefetch_depth,
                "pin_memory": self.pin_memory, "already_sharded": self.already_sharded}


@dataclasses.dataclass(init=False)
class OptimizerSpec:
    """An optimizer over a prepared model's trainable parameters: kind "sgd", "adam" or "adamw", with
    options lr, momentum, dampening, nesterov, weight_decay, betas (torch's pair, or beta1 and beta2), eps
    and no_decay (glob patterns of parameter names without weight decay, e.g. "*bias,*norm*"). Defaults are
    torch's: weight_decay 0.01 for "adamw" (torch.optim.AdamW's), 0 otherwise; betas (0.9, 0.999)."""

    kind: str
    model: typing.Any
    settings: dict  # the option keywords

    def __init__(self, kind, model=None, **options):
        if "betas" in options:
            if "beta1" in options or "beta2" in options:
                raise TypeError("OptimizerSpec: give betas=(beta1, beta2) or beta1 / beta2, not both")
            betas = options.pop("betas")
            if len(betas) != 2:
                raise ValueError(f"OptimizerSpec: betas is a pair (beta1, beta2), not {betas!r}")
            options["beta1"], options["beta2"] = (float(beta) for beta in betas)
        if kind == "adamw":
            options.setdefault("weight_decay", 0.01)
        self.kind, self.model, self.settings = kind, model, options


@dataclasses.dataclass(init=False)
class SchedulerSpec:
    """A learning-rate schedule: a name (transformers' "linear", "cosine", "cosine_with_restarts",
    "polynomial", "constant", "constant_with_warmup", "inverse_sqrt", "cosine_with_min_lr",
    "warmup_stable_decay", or torch's "step", "multistep", "exponential", "one_cycle",
    "reduce_on_plateau") with its options (capi/accel/scheduler.h lists them, e.g. warmup_steps,
    total_steps, gamma, max_lr, milestones="30,80"), or a function step -> multiplier of the initial lr
    (LambdaLR). Size it in single-process steps, as in Accelerate; a reduce_on_plateau scheduler steps
    with a metric (Scheduler.step(metric))."""

    schedule: typing.Any
    optimizer: typing.Any
    settings: dict  # the option keywords

    def __init__(self, schedule, optimizer=None, **options):
        self.schedule, self.optimizer, self.settings = schedule, optimizer, options
