"""Writes a deep MLP for bench/run_zero_memory.sh: IN -> WIDTH (DEPTH layers, ReLU between) -> OUT, as
TorchScript, weights from torch.manual_seed(0). Many mid-sized layers, as real models have, rather than
examples/make_mlp.py's one large layer: gradient buckets then hold a few layers each.

With "residual" after OUT: IN -> WIDTH, then DEPTH - 1 residual layers (x = x + relu(layer(x)), an
nn.ModuleList looped over, which TorchScript unrolls), then -> OUT: a forward that is no chain of children.
With "residual-gate": the same, the first layer's output times a parameter of the root's own (gate, WIDTH
elements, as a positional embedding or a class token is the model's own): a forward that reads a parameter
outside every submodule it calls.

usage: make_deep_mlp.py OUTPUT.pt IN WIDTH DEPTH OUT [residual|residual-gate]
"""
import os
import sys

import torch
from torch import nn


class ResidualMLP(nn.Module):
    def __init__(self, inputs, width, depth, outputs):
        super().__init__()
        self.first = nn.Linear(inputs, width)
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth - 1)])
        self.last = nn.Linear(width, outputs)

    def forward(self, x):
        x = torch.relu(self.first(x))
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return self.last(x)


class GatedResidualMLP(ResidualMLP):
    def __init__(self, inputs, width, depth, outputs):
        super().__init__(inputs, width, depth, outputs)
        self.gate = nn.Parameter(torch.ones(width))

    def forward(self, x):
        x = torch.relu(self.first(x)) * self.gate
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return self.last(x)


def main() -> int:
    residual = len(sys.argv) == 7 and sys.argv[6] in ("residual", "residual-gate")
    if len(sys.argv) != (7 if residual else 6) or not all(size.isdigit() and int(size) > 0 for size in sys.argv[2:6]):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    inputs, width, depth, outputs = (int(size) for size in sys.argv[2:6])
    torch.manual_seed(0)
    if residual:
        kind = GatedResidualMLP if sys.argv[6] == "residual-gate" else ResidualMLP
        model = torch.jit.script(kind(inputs, width, depth, outputs))
    else:
        layers = [nn.Linear(inputs, width), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, outputs))
        model = torch.jit.script(nn.Sequential(*layers))
    temporary = sys.argv[1] + ".tmp"
    model.save(temporary)
    os.replace(temporary, sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
