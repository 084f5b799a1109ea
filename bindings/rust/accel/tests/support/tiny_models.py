#!/usr/bin/python3
"""Writes the TorchScript model the Rust tests load: /usr/bin/python3 tiny_models.py OUTPUT.pt

tiny: 4 features -> Linear(4, 8) -> ReLU -> Linear(8, 3), times a buffer "scale" (ones); forward(x,
shift=None) returns {"logits": [N, 3], "norm": [N] (squared norm of each row)}, shift added to the logits when given. Seeded, so
every rank and every run gets the same weights.
"""
import os
import sys
from typing import Dict, Optional

import torch


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(4, 8)
        self.out = torch.nn.Linear(8, 3)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x: torch.Tensor, shift: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        logits = self.out(torch.relu(self.hidden(x))) * self.scale
        if shift is not None:
            logits = logits + shift
        return {"logits": logits, "norm": (logits * logits).sum(dim=1)}


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} OUTPUT.pt", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    temporary = sys.argv[1] + f".{os.getpid()}.tmp"
    torch.jit.script(Tiny()).save(temporary)
    os.replace(temporary, sys.argv[1])  # another test binary may be reading it
    return 0


if __name__ == "__main__":
    sys.exit(main())
