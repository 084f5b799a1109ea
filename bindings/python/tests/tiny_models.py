"""Tiny TorchScript models for the tests, as bytes (torch.jit.save), with fixed weights (seed)."""
import io

import torch


class MLP(torch.nn.Module):
    """features [N, inputs] -> logits [N, outputs]."""

    def __init__(self, inputs=4, hidden=8, outputs=3):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, hidden)
        self.fc2 = torch.nn.Linear(hidden, outputs)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class DictOutput(torch.nn.Module):
    """forward(x, scale=...) -> {"doubled": 2x * scale, "summed": sum over dim 1}."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))

    def forward(self, x, scale: torch.Tensor):
        return {"doubled": 2 * x * scale * self.weight, "summed": x.sum(dim=1)}


class TupleOutput(torch.nn.Module):
    def forward(self, x):
        return x + 1, x - 1


class WithUnusedParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(4, 3)
        self.unused = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.used(x)


def scripted_bytes(module, seed=0):
    torch.manual_seed(seed)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(module()), buffer)
    return buffer.getvalue()
