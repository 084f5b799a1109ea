"""An eager nn.Module trained on 2 processes, by accel (`ddp_identity.py accel STEPS OUT`: the Accelerate
loop with gradient_accumulation_steps STEPS) or by torch's own DistributedDataParallel over Gloo
(`ddp_identity.py ddp 1,3 OUT`: the loop Accelerate runs on it, no_sync and the loss divided by the steps):
same initial weights, same batches per rank, SGD with momentum and AdamW. Each run writes rank 0's final
weights and buffers, by "optimizer/steps", to OUT; the test compares them bit for bit."""
import contextlib
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _training_step import accumulated_step

MODE, ACCUMULATION, OUT = sys.argv[1], [int(steps) for steps in sys.argv[2].split(",")], sys.argv[3]
BATCH, STEPS = 4, 12  # per process; STEPS batches per process per run


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 3))


def make_optimizer(kind, model):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def data():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2 * BATCH * STEPS, 6, generator=generator)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())


def train_accel(kind, steps):
    from accel import Accelerator
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=steps)  # the process's one state
    model = make_model()
    optimizer = make_optimizer(kind, model)
    model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(data(), batch_size=BATCH))
    for x, y in loader:
        accumulated_step(accelerator, model, optimizer, None, F.cross_entropy, x, y)
    return accelerator.unwrap_model(model).state_dict()


def train_ddp(kind, steps):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = make_optimizer(kind, ddp)
    dataset = data()
    batches = [dataset[(index * world + rank) * BATCH:(index * world + rank + 1) * BATCH] for index in range(STEPS)]
    for index, (x, y) in enumerate(batches):
        sync = (index + 1) % steps == 0 or index == len(batches) - 1
        with contextlib.nullcontext() if sync else ddp.no_sync():
            (F.cross_entropy(ddp(x), y) / steps).backward()
        if sync:
            optimizer.step()
            optimizer.zero_grad()
    return model.state_dict()


if MODE == "ddp":
    torch.distributed.init_process_group("gloo")
results = {}
for kind in ("sgd", "adamw"):
    for steps in ACCUMULATION:
        train = train_accel if MODE == "accel" else train_ddp
        results[f"{kind}/{steps}"] = {name: tensor.clone() for name, tensor in train(kind, steps).items()}
if int(os.environ.get("RANK", "0")) == 0:
    torch.save(results, OUT)
