"""Gradient accumulation with a LambdaLR, as Accelerate runs it: the prepared model, optimizer and scheduler
against an unprepared copy trained on the gathered (global) batches with the accumulation written out by
hand: the loss divided by the accumulation steps, an optimizer step every second batch and on the loader's
last one (5 batches per process: the last step has one micro-batch), and the schedule stepped
num_processes times per optimizer step. Learning rates equal at every batch; weights equal after every
optimizer step."""
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _training_step import accumulated_step
from accel import Accelerator
from accel.utils import set_seed

accelerator = Accelerator(gradient_accumulation_steps=2)
set_seed(42)
processes = accelerator.num_processes
x = torch.randn(40 * processes, 4, generator=torch.Generator().manual_seed(3))
dataset = TensorDataset(x, x @ torch.tensor([[0.5], [-1.0], [2.0], [0.1]]))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
reference = deepcopy(model)


def schedule(step):
    return 1.0 / (1 + step) ** 0.65


optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
reference_scheduler = torch.optim.lr_scheduler.LambdaLR(reference_optimizer, schedule)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, DataLoader(dataset, batch_size=8),
                                                          scheduler)
assert len(loader) == 5
steps = 0
for iteration, (inputs, targets) in enumerate(loader):
    all_inputs, all_targets = accelerator.gather((inputs, targets))
    (F.mse_loss(reference(all_inputs), all_targets) / 2).backward()
    did_step = (iteration + 1) % 2 == 0 or iteration + 1 == len(loader)
    if did_step:
        reference_optimizer.step()
        for _ in range(processes):
            reference_scheduler.step()
        reference_optimizer.zero_grad()
    accumulated_step(accelerator, model, optimizer, scheduler, F.mse_loss, inputs, targets)
    assert accelerator.sync_gradients == did_step, iteration
    assert optimizer.param_groups[0]["lr"] == reference_optimizer.param_groups[0]["lr"], iteration
    if did_step:
        steps += 1
        for parameter, expected in zip(model.parameters(), reference.parameters()):
            assert torch.allclose(parameter, expected, atol=1e-6), (iteration, (parameter - expected).abs().max())
assert steps == 3 and scheduler.scheduler.last_epoch == 3 * processes
accelerator.print(f"accumulation_lambdalr: ok on {processes} processes, lr {scheduler.get_last_lr()[0]:.6f}")
