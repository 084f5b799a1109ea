#!/usr/bin/python3
"""Writes the TorchScript model that examples/train_digits.c trains: an MLP 64-128-128-10 with ReLU.

    /usr/bin/python3 examples/make_digits_model.py build/demo/digits_mlp.pt

forward(x) takes float32 pixels [N, 64] scaled to [0, 1] and returns logits [N, 10]. The weights are
initialised with torch.manual_seed(0), so every run writes the same model and the demo is reproducible.
Parameter names: fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias.
"""
import os
import sys

import torch
from torch import nn


class DigitsMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} OUTPUT.pt", file=sys.stderr)
        return 2
    path = sys.argv[1]
    torch.manual_seed(0)
    model = torch.jit.script(DigitsMLP())
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
