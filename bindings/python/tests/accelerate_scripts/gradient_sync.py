"""Gradient synchronisation, as Accelerate's test_sync checks it: a prepared model's gradients against those
of a copy trained on the gathered (global) batch. Under no_sync they stay local (they differ from the
global ones on several processes); without it, and on the steps accumulate() synchronises, they equal them.
And a module prepared after an earlier one was dropped comes back prepared."""
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel.utils import set_seed


def step_model(model, inputs, targets, accelerator):
    model.train()
    loss = F.mse_loss(model(inputs), targets)
    accelerator.backward(loss)


def grads_equal(model, prepared):
    return [torch.allclose(p.grad, q.grad, atol=1e-6) for p, q in zip(model.parameters(), prepared.parameters())]


def data(length=64):
    x = torch.randn(length, 3, generator=torch.Generator().manual_seed(5))
    return TensorDataset(x, x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3)


accelerator = Accelerator(gradient_accumulation_steps=2)
set_seed(42)
model = torch.nn.Linear(3, 1)
prepared = deepcopy(model)
prepared, loader = accelerator.prepare(prepared, DataLoader(data(), batch_size=8))
inputs, targets = next(iter(loader))
for iteration in range(4):
    all_inputs, all_targets = accelerator.gather((inputs, targets))
    step_model(model, all_inputs, all_targets, accelerator)
    if iteration % 2 == 0:
        with accelerator.no_sync(prepared):
            step_model(prepared, inputs, targets, accelerator)
    else:
        step_model(prepared, inputs, targets, accelerator)
    in_sync = iteration % 2 == 1 or accelerator.num_processes == 1
    assert all(grads_equal(model, prepared)) if in_sync else not any(grads_equal(model, prepared)), iteration
    torch.manual_seed(1337 + iteration)
    inputs, targets = inputs[torch.randperm(len(inputs))], targets[torch.randperm(len(targets))]

# accumulate(): gradients are averaged on every second step and on the loader's last batch only.
set_seed(42)
model = torch.nn.Linear(3, 1)
prepared, loader = accelerator.prepare(deepcopy(model), DataLoader(data(40), batch_size=4))
synced = []
for iteration, (inputs, targets) in enumerate(loader):
    all_inputs, all_targets = accelerator.gather((inputs, targets))
    step_model(model, all_inputs, all_targets, accelerator)
    with accelerator.accumulate(prepared):
        step_model(prepared, inputs, targets, accelerator)
    synced.append(accelerator.sync_gradients)
    if accelerator.sync_gradients or accelerator.num_processes == 1:
        assert all(grads_equal(model, prepared)), iteration
    else:
        assert not any(grads_equal(model, prepared)), iteration
    if accelerator.sync_gradients:
        for parameter in list(model.parameters()) + list(prepared.parameters()):
            parameter.grad.zero_()
expected = [(i + 1) % 2 == 0 or i == len(loader) - 1 for i in range(len(loader))]
assert synced == expected, (synced, expected)

# A module made after a prepared one's wrapper was dropped is prepared too: Python gives a new object the
# freed one's id, which once made prepare take the new module for the dropped wrapper and hand it back as it
# was (no gradient sync at all).
for attempt in range(20):
    fresh = torch.nn.Linear(3, 1)
    prepared = accelerator.prepare(fresh)
    assert accelerator.num_processes == 1 or prepared is not fresh, f"module {attempt} came back unprepared"
    del prepared, fresh
accelerator.print(f"gradient_sync: ok on {accelerator.num_processes} processes, syncs {synced}")
