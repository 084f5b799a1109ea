"""accel's schedulers, through the C ABI (the Python binding), against torch 1.13 itself: each torch
scheduler (StepLR, MultiStepLR, ExponentialLR, OneCycleLR with its momentum, ReduceLROnPlateau) and each
transformers schedule (as torch's LambdaLR over the published formula, written out below; transformers is
not installed) is stepped side by side with accel's over its whole schedule, and every lr and momentum
must be the same double. One run also trains with one_cycle on both sides: the cycled momentum must be
the one the optimizer uses.

Run by ctest (train.torch_schedules) with ACCEL_LIBRARY, and the binding's fixtures (accelerator) as a
plugin (tests/CMakeLists.txt: accel_python_test)."""
import math
from functools import partial

import pytest
import torch

import accel

LR = 0.1
# torch warns of a scheduler stepped before its optimizer; Accelerate silences that warning as well.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def scripted():
    torch.manual_seed(0)
    return torch.jit.script(Linear())


def prepared(accelerator, kind, schedule, optimizer_options, schedule_options):
    """accel's model, optimizer (two groups: weight and bias) and scheduler."""
    model, optimizer, scheduler = accelerator.prepare(
        scripted(), accel.OptimizerSpec(kind, no_decay="*bias", **optimizer_options),
        accel.SchedulerSpec(schedule, **schedule_options))
    assert optimizer.num_groups == 2
    return model, optimizer, scheduler


def torch_optimizer(kind, parameters, **options):
    """torch's optimizer of that kind with one group per parameter, as accel's two."""
    make = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    return make([{"params": [parameter]} for parameter in parameters], **options)


def torch_side(kind, **options):
    parameters = [torch.nn.Parameter(torch.zeros(1)) for _ in range(2)]
    return torch_optimizer(kind, parameters, **options)


def torch_momentum(group):
    return group["betas"][0] if "betas" in group else group["momentum"]


def expect_same_groups(optimizer, reference, step, momentum=False):
    for index, group in enumerate(reference.param_groups):
        assert optimizer.get_lr(index) == group["lr"], f"lr of group {index} at step {step}"
        if momentum:
            assert optimizer.get_momentum(index) == torch_momentum(group), f"momentum of group {index} at step {step}"


def trace(optimizer, scheduler, reference, reference_scheduler, steps, momentum=False):
    start = scheduler.step_count
    expect_same_groups(optimizer, reference, start, momentum)
    for step in range(start + 1, start + steps + 1):
        scheduler.step()
        reference_scheduler.step()
        expect_same_groups(optimizer, reference, step, momentum)
        assert scheduler.get_last_lr() == reference_scheduler.get_last_lr()
    assert scheduler.step_count == start + steps


# --- torch's schedulers --------------------------------------------------------------------------------

@pytest.mark.parametrize("schedule,options,make,steps", [
    ("step", {"step_size": 3, "gamma": 0.5}, lambda o: torch.optim.lr_scheduler.StepLR(o, 3, gamma=0.5), 20),
    ("step", {}, lambda o: torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.1), 6),
    ("multistep", {"milestones": "2, 5,5,9", "gamma": 0.3},
     lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 5, 5, 9], gamma=0.3), 12),
    ("multistep", {"milestones": "4,0"}, lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [4, 0]), 6),
    ("exponential", {"gamma": 0.9}, lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.9), 60),
])
def test_chainable_torch_schedulers(accelerator, schedule, options, make, steps):
    _, optimizer, scheduler = prepared(accelerator, "sgd", schedule, {"lr": LR}, options)
    reference = torch_side("sgd", lr=LR)
    trace(optimizer, scheduler, reference, make(reference), steps)


def test_chainable_schedulers_carry_on_from_an_lr_set_between_steps(accelerator):
    _, optimizer, scheduler = prepared(accelerator, "sgd", "step", {"lr": LR}, {"step_size": 2})
    reference = torch_side("sgd", lr=LR)
    reference_scheduler = torch.optim.lr_scheduler.StepLR(reference, 2)
    scheduler.step()
    reference_scheduler.step()
    optimizer.set_lr(0.7)
    for group in reference.param_groups:
        group["lr"] = 0.7
    trace(optimizer, scheduler, reference, reference_scheduler, 5)


ONE_CYCLE_CASES = [
    # kind, optimizer options, accel options, torch OneCycleLR keywords
    ("sgd", {"momentum": 0.9}, {}, {}),
    ("sgd", {}, {"anneal_strategy": "linear"}, {"anneal_strategy": "linear"}),  # momentum 0 → cycled anyway
    ("sgd", {"momentum": 0.9}, {"three_phase": True, "pct_start": 0.25},
     {"three_phase": True, "pct_start": 0.25}),
    ("adam", {}, {"base_momentum": 0.7, "max_momentum": 0.9, "div_factor": 10, "final_div_factor": 100},
     {"base_momentum": 0.7, "max_momentum": 0.9, "div_factor": 10.0, "final_div_factor": 100.0}),
    ("adamw", {"beta1": 0.8}, {"three_phase": True, "anneal_strategy": "linear"},
     {"three_phase": True, "anneal_strategy": "linear"}),
    ("adamw", {"beta1": 0.8}, {"cycle_momentum": False}, {"cycle_momentum": False}),
    ("sgd", {"momentum": 0.5}, {"pct_start": 0.1}, {"pct_start": 0.1}),  # the first phase ends before step 0
]


@pytest.mark.parametrize("kind,optimizer_options,options,keywords", ONE_CYCLE_CASES)
@pytest.mark.parametrize("total_steps", [7, 40])
def test_one_cycle_with_its_momentum(accelerator, kind, optimizer_options, options, keywords, total_steps):
    _, optimizer, scheduler = prepared(accelerator, kind, "one_cycle", {"lr": LR, **optimizer_options},
                                       {"max_lr": 0.5, "total_steps": total_steps, **options})
    torch_options = {"lr": LR}
    if "momentum" in optimizer_options:
        torch_options["momentum"] = optimizer_options["momentum"]
    if "beta1" in optimizer_options:
        torch_options["betas"] = (optimizer_options["beta1"], 0.999)
    reference = torch_side(kind, **torch_options)
    reference_scheduler = torch.optim.lr_scheduler.OneCycleLR(reference, max_lr=0.5, total_steps=total_steps,
                                                              **keywords)
    trace(optimizer, scheduler, reference, reference_scheduler, total_steps, momentum=True)
    if options.get("cycle_momentum") is False:
        assert optimizer.get_momentum() == optimizer_options["beta1"]
    # torch refuses a step past total_steps; Accelerate's rule (no split_batches) stops before it.
    with pytest.raises(ValueError, match="The specified number of total steps is"):
        reference_scheduler.step()
    scheduler.step()
    assert scheduler.step_count == total_steps


def test_one_cycle_past_its_end_with_split_batches_fails_as_torch(accelerator):
    _, optimizer, scheduler = prepared(accelerator, "sgd", "one_cycle", {"lr": LR},
                                       {"max_lr": 0.5, "total_steps": 3, "split_batches": True})
    for _ in range(3):
        scheduler.step()
    with pytest.raises(accel.InvalidStateError, match="Tried to step 4 times. The specified number of total steps is 3"):
        scheduler.step()
    assert scheduler.step_count == 3


def test_one_cycle_trains_like_torch_with_the_cycled_momentum(accelerator):
    model, optimizer, scheduler = prepared(accelerator, "sgd", "one_cycle", {"lr": LR, "momentum": 0.9},
                                           {"max_lr": 0.5, "total_steps": 12})
    reference_model = scripted()
    reference = torch_optimizer("sgd", [reference_model.fc.weight, reference_model.fc.bias], lr=LR, momentum=0.9)
    reference_scheduler = torch.optim.lr_scheduler.OneCycleLR(reference, max_lr=0.5, total_steps=12)
    torch.manual_seed(1)
    for _ in range(12):
        x, y = torch.randn(8, 4), torch.randn(8, 3)
        with accelerator.accumulate(model):
            accelerator.backward(accel.compute_loss("mse", model(x), y))
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference_model(x), y).backward()
        reference.step()
        reference_scheduler.step()
        reference.zero_grad()
    weights = model.state_dict()
    assert torch.allclose(torch.as_tensor(weights["fc.weight"].numpy()), reference_model.fc.weight.detach(), atol=1e-6)
    assert torch.allclose(torch.as_tensor(weights["fc.bias"].numpy()), reference_model.fc.bias.detach(), atol=1e-6)


# Improvements, ties, near-ties on either side of the default rel threshold (1e-4), a NaN, and a long
# plateau that the default patience (10) gives in to.
PLATEAU_METRICS = ([5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 4.3, 3.0, 3.0, 3.0, 3.0, 3.0, 2.9996, 2.0, float("nan"),
                    2.0, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5] + [1.0] * 14)


@pytest.mark.parametrize("options", [
    {},
    {"patience": 1},
    {"patience": 1, "threshold": 0.0},  # a tie with the best is no improvement
    {"mode": "max", "patience": 1, "threshold_mode": "abs", "threshold": 0.0},
    {"patience": 2, "cooldown": 2, "factor": 0.5},
    {"patience": 0, "threshold_mode": "abs", "threshold": 0.5},
    {"patience": 1, "min_lr": 0.02, "eps": 1e-3},
    {"patience": 1, "min_lr": 0.1 - 1e-9},  # a reduction by eps or less is not applied
    {"mode": "max", "patience": 1},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "threshold": 0.1, "cooldown": 1},
])
def test_reduce_on_plateau(accelerator, options):
    _, optimizer, scheduler = prepared(accelerator, "sgd", "reduce_on_plateau", {"lr": LR}, options)
    reference = torch_side("sgd", lr=LR)
    reference_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(reference, **options)
    metrics = PLATEAU_METRICS if options.get("mode") != "max" else [-m for m in PLATEAU_METRICS]
    expect_same_groups(optimizer, reference, 0)
    reductions = 0
    for step, metric in enumerate(metrics, 1):
        before = optimizer.get_lr()
        scheduler.step(metric)
        reference_scheduler.step(metric)
        expect_same_groups(optimizer, reference, step)
        assert scheduler.get_last_lr() == reference_scheduler._last_lr
        reductions += optimizer.get_lr() != before
    assert scheduler.step_count == reference_scheduler.last_epoch == len(metrics)
    if "min_lr" not in options:
        assert reductions > 0  # the metrics do make the schedule move


# --- transformers' schedules, as LambdaLR over the published formulas ------------------------------------

def _warmup(step, warmup):
    return float(step) / float(max(1, warmup))


def constant_with_warmup(step, *, warmup):
    if step < warmup:
        return float(step) / float(max(1.0, warmup))
    return 1.0


def linear(step, *, warmup, total):
    if step < warmup:
        return _warmup(step, warmup)
    return max(0.0, float(total - step) / float(max(1, total - warmup)))


def cosine(step, *, warmup, total, cycles, min_lr_rate=0.0):
    if step < warmup:
        return _warmup(step, warmup)
    progress = float(step - warmup) / float(max(1, total - warmup))
    factor = 0.5 * (1.0 + math.cos(math.pi * float(cycles) * 2.0 * progress))
    factor = factor * (1 - min_lr_rate) + min_lr_rate
    return max(0, factor)


def cosine_with_restarts(step, *, warmup, total, cycles):
    if step < warmup:
        return _warmup(step, warmup)
    progress = float(step - warmup) / float(max(1, total - warmup))
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((float(cycles) * progress) % 1.0))))


def polynomial(step, *, warmup, total, lr_end, power, lr_init):
    if step < warmup:
        return _warmup(step, warmup)
    if step > total:
        return lr_end / lr_init
    pct_remaining = 1 - (step - warmup) / (total - warmup)
    return ((lr_init - lr_end) * pct_remaining ** power + lr_end) / lr_init


def inverse_sqrt(step, *, warmup, timescale):
    if step < warmup:
        return _warmup(step, warmup)
    return 1.0 / math.sqrt((step + timescale - warmup) / timescale)


def wsd(step, *, warmup, stable, decay, warmup_type, decay_type, min_lr_ratio, cycles):
    if step < warmup:
        progress = _warmup(step, warmup)
        factor = {"linear": progress, "cosine": 0.5 * (1.0 - math.cos(math.pi * progress)),
                  "1-sqrt": 1.0 - math.sqrt(1.0 - progress)}[warmup_type]
        return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)
    if step < warmup + stable:
        return 1.0
    if step < warmup + stable + decay:
        progress = float(step - warmup - stable) / float(max(1, decay))
        factor = {"linear": 1.0 - progress, "cosine": 0.5 * (1.0 + math.cos(math.pi * float(cycles) * 2.0 * progress)),
                  "1-sqrt": 1.0 - math.sqrt(progress)}[decay_type]
        return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)
    return min_lr_ratio


TRANSFORMERS_CASES = [
    ("constant", {}, lambda step: 1),
    ("constant_with_warmup", {"warmup_steps": 5}, partial(constant_with_warmup, warmup=5)),
    ("linear", {"warmup_steps": 3, "total_steps": 17}, partial(linear, warmup=3, total=17)),
    ("cosine", {"warmup_steps": 4, "total_steps": 30}, partial(cosine, warmup=4, total=30, cycles=0.5)),
    ("cosine", {"total_steps": 30, "num_cycles": 2.0}, partial(cosine, warmup=0, total=30, cycles=2.0)),
    ("cosine_with_restarts", {"warmup_steps": 2, "total_steps": 31, "num_cycles": 3},
     partial(cosine_with_restarts, warmup=2, total=31, cycles=3)),
    ("cosine_with_restarts", {"total_steps": 13}, partial(cosine_with_restarts, warmup=0, total=13, cycles=1)),
    ("polynomial", {"warmup_steps": 3, "total_steps": 20, "power": 2.0, "lr_end": 0.01},
     partial(polynomial, warmup=3, total=20, lr_end=0.01, power=2.0, lr_init=LR)),
    ("polynomial", {"total_steps": 9}, partial(polynomial, warmup=0, total=9, lr_end=1e-7, power=1.0, lr_init=LR)),
    ("inverse_sqrt", {"warmup_steps": 4}, partial(inverse_sqrt, warmup=4, timescale=4)),
    ("inverse_sqrt", {}, partial(inverse_sqrt, warmup=0, timescale=10000)),
    ("inverse_sqrt", {"warmup_steps": 2, "timescale": 7}, partial(inverse_sqrt, warmup=2, timescale=7)),
    ("cosine_with_min_lr", {"warmup_steps": 2, "total_steps": 20, "min_lr": 0.01},
     partial(cosine, warmup=2, total=20, cycles=0.5, min_lr_rate=0.01 / LR)),
    ("cosine_with_min_lr", {"total_steps": 20, "min_lr_rate": 0.2, "num_cycles": 1.5},
     partial(cosine, warmup=0, total=20, cycles=1.5, min_lr_rate=0.2)),
    ("warmup_stable_decay", {"warmup_steps": 4, "num_stable_steps": 5, "num_decay_steps": 7},
     partial(wsd, warmup=4, stable=5, decay=7, warmup_type="linear", decay_type="cosine", min_lr_ratio=0, cycles=0.5)),
    ("warmup_stable_decay", {"warmup_steps": 3, "total_steps": 20, "num_decay_steps": 6, "min_lr_ratio": 0.1,
                             "warmup_type": "cosine", "decay_type": "1-sqrt"},
     partial(wsd, warmup=3, stable=11, decay=6, warmup_type="cosine", decay_type="1-sqrt", min_lr_ratio=0.1,
             cycles=0.5)),
    ("warmup_stable_decay", {"warmup_steps": 5, "num_stable_steps": 0, "num_decay_steps": 9, "min_lr_ratio": 0.05,
                             "warmup_type": "1-sqrt", "decay_type": "linear"},
     partial(wsd, warmup=5, stable=0, decay=9, warmup_type="1-sqrt", decay_type="linear", min_lr_ratio=0.05,
             cycles=0.5)),
    ("warmup_stable_decay", {"num_stable_steps": 2, "num_decay_steps": 8, "num_cycles": 1.0},
     partial(wsd, warmup=0, stable=2, decay=8, warmup_type="linear", decay_type="cosine", min_lr_ratio=0, cycles=1.0)),
]


@pytest.mark.parametrize("schedule,options,multiplier", TRANSFORMERS_CASES,
                         ids=[f"{case[0]}-{index}" for index, case in enumerate(TRANSFORMERS_CASES)])
def test_transformers_schedules(accelerator, schedule, options, multiplier):
    _, optimizer, scheduler = prepared(accelerator, "adamw", schedule, {"lr": LR}, options)
    reference = torch_side("adamw", lr=LR)
    total = options.get("total_steps", 0) or 25
    trace(optimizer, scheduler, reference, torch.optim.lr_scheduler.LambdaLR(reference, multiplier), total + 5)
