#!/usr/bin/env python3
"""Writes the seeds of fuzz_model_load into DIR (committed in corpus/model_load/): two small TorchScript
models as torch.jit.save writes them, and the tiny one with its first storage record emptied (the archive
that crashed the first read of a parameter before the loader checked for it) and cut short.

usage: /usr/bin/python3 make_model_seeds.py DIR"""
import os
import sys

import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(6, dtype=torch.float32).reshape(2, 3))
        self.register_buffer("steps", torch.tensor([1, 2], dtype=torch.int64))

    def forward(self, x):
        return x @ self.w.t()


def rewrite(source, target, change):
    """Copies every record of source into target, passing each through change(name, bytes)."""
    reader = torch._C.PyTorchFileReader(source)
    writer = torch._C.PyTorchFileWriter(target)
    for name in reader.get_all_records():
        if name in ("version", ".data/version"):
            continue  # the writer adds its own
        data = change(name, reader.get_record(name))
        writer.write_record(name, data, len(data))
    writer.write_end_of_file()


os.chdir(sys.argv[1])
torch.jit.script(Tiny()).save("tiny.pt")
torch.manual_seed(0)
torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())).save("linear_relu.pt")
rewrite("tiny.pt", "tiny_empty_storage.pt", lambda name, data: b"" if name.endswith("data/0") else data)
rewrite("tiny.pt", "tiny_short_storage.pt", lambda name, data: data[:10] if name.endswith("data/0") else data)
