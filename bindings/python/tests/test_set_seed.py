"""Accelerator.set_seed seeds LibTorch's default CPU generator as torch.manual_seed does: the numbers torch
draws afterwards are those torch.manual_seed(seed) gives (torch 1.13 computes the reference at test
time), on every rank, or with seed + rank when device_specific; a seedable loader made afterwards without
data_seed starts from the seed. Two processes run set_seed_worker.py."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import accel
from conftest import child_environment

torch = pytest.importorskip("torch")

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))
SEED = 1234


def torch_draws(seed):
    torch.manual_seed(seed)
    return {"initial_seed": seed, "randn": torch.randn(4).tolist()}


def test_two_ranks_draw_torchs_numbers(tmp_path):
    env = child_environment()
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", "2", "--cpu", "--master-port", "0", "--",
                             sys.executable, str(HERE / "set_seed_worker.py"), str(SEED), str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen["shared"] == torch_draws(SEED)
        assert seen["device_specific"] == torch_draws(SEED + rank)
    assert torch_draws(SEED) != torch_draws(SEED + 1)  # so a rank that ignored device_specific fails


def test_a_seedable_loader_without_data_seed_starts_from_the_seed(make_accelerator):
    accelerator = make_accelerator(dataloader_config=accel.DataLoaderConfiguration(use_seedable_sampler=True))
    accelerator.set_seed(21)
    loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_tensors({"y": np.arange(10)}),
                                                      batch_size=10, shuffle=True))
    # Accelerate's SeedableRandomSampler: epoch e is randperm under a generator seeded torch.initial_seed() + e.
    expected = [torch.randperm(10, generator=torch.Generator().manual_seed(21 + epoch)).tolist() for epoch in (0, 1)]
    assert expected[0] != expected[1]
    assert [[batch["y"].numpy().tolist() for batch in loader][0] for _ in (0, 1)] == expected
