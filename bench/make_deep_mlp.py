"""Writes a deep MLP for bench/run_zero_memory.sh: IN -> WIDTH (DEPTH layers, ReLU between) -> OUT, as
TorchScript, weights from torch.manual_seed(0). Many mid-sized layers, as real models have, rather than
examples/make_mlp.py's one large layer: gradient buckets then hold a few layers each.

usage: make_deep_mlp.py OUTPUT.pt IN WIDTH DEPTH OUT
"""
import os
import sys

import torch
from torch import nn


def main() -> int:
    if len(sys.argv) != 6 or not all(size.isdigit() and int(size) > 0 for size in sys.argv[2:]):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    inputs, width, depth, outputs = (int(size) for size in sys.argv[2:])
    torch.manual_seed(0)
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
