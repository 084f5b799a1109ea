#!/usr/bin/python3
"""Writes a TorchScript MLP IN-H1-H2-OUT with ReLU, the model the demo and the training benchmark train.

    /usr/bin/python3 examples/make_mlp.py OUTPUT.pt IN H1 H2 OUT
    /usr/bin/python3 examples/make_mlp.py build/demo/digits_mlp.pt 64 128 128 10      (./dev demo)
    /usr/bin/python3 examples/make_mlp.py build/bench/train_mlp.pt 784 1024 1024 10   (./dev bench train)

forward(x) takes float32 features [N, IN] and returns logits [N, OUT]. The weights are initialised with
torch.manual_seed(0), so every run writes the same model. Parameter names: fc1.weight, fc1.bias,
fc2.weight, fc2.bias, fc3.weight, fc3.bias.
"""
import os
import sys

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, inputs: int, hidden1: int, hidden2: int, outputs: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def main() -> int:
    if len(sys.argv) != 6 or not all(size.isdigit() and int(size) > 0 for size in sys.argv[2:]):
        print(f"usage: {sys.argv[0]} OUTPUT.pt IN H1 H2 OUT (positive sizes)", file=sys.stderr)
        return 2
    path = sys.argv[1]
    torch.manual_seed(0)
    model = torch.jit.script(MLP(*(int(size) for size in sys.argv[2:])))
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = path + ".tmp"
    model.save(temporary)
    os.replace(temporary, path)  # never leave a half-written model behind
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
