"""What the Python sides of the training benchmarks share (bench/train_torch_ddp.py on the CPU,
bench/train_torch_gpu.py on a GPU): the sizes, the synthetic batches and the model, so that every side,
C, C++ or Python, trains the same numbers.
"""
import os
import resource
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from make_mlp import MLP  # noqa: E402

BATCH, FEATURES, CLASSES, BATCHES, LR = 64, 784, 10, 4, 0.01
MASK = (1 << 64) - 1


def make_batches(rank):
    """xorshift64*, seeded by the rank, exactly as train_accel.c does."""
    state = 0x9E3779B97F4A7C15 ^ (((rank + 1) * 0xD1B54A32D192ED03) & MASK)

    def draw(count):
        nonlocal state
        out = [0] * count
        s = state
        for i in range(count):
            s ^= s >> 12
            s ^= (s << 25) & MASK
            s ^= s >> 27
            out[i] = (s * 0x2545F4914F6CDD1D) & MASK
        state = s
        return out

    batches = []
    for _ in range(BATCHES):
        x = torch.tensor([v >> 40 for v in draw(BATCH * FEATURES)], dtype=torch.float64)
        x = (x * (1.0 / 16777216.0)).to(torch.float32).reshape(BATCH, FEATURES)
        y = torch.tensor([v % CLASSES for v in draw(BATCH)], dtype=torch.int64)
        batches.append((x, y))
    return batches


def load_mlp(path):
    """examples/make_mlp.py's MLP as a plain nn.Module (what eager PyTorch, DDP and Accelerate users train),
    with the weights of the TorchScript file the C and C++ sides load."""
    model = MLP(FEATURES, 1024, 1024, CLASSES)
    model.load_state_dict(torch.jit.load(path, map_location="cpu").state_dict())
    return model


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
