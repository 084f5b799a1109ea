"""Without a seed, a shuffled loader's order is Accelerate's: its sampler gets a fresh torch.Generator()
(torch's default seed), and torch's RandomSampler draws two permutations a pass. The reference is torch
1.13 itself; the loader runs on 1 and 2 processes (shuffle_order_worker.py under `accel launch`)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import child_environment

torch = pytest.importorskip("torch")

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))
SAMPLES, BATCH_SIZE = 12, 2


def torch_orders(epochs):
    sampler = torch.utils.data.RandomSampler(range(SAMPLES), generator=torch.Generator())
    return [list(sampler) for _ in range(epochs)]


@pytest.mark.parametrize("processes", [1, 2])
def test_orders_and_resumed_orders_are_torchs(processes, tmp_path):
    env = child_environment()
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", str(processes), "--cpu", "--master-port", "0",
                             "--", sys.executable, str(HERE / "shuffle_order_worker.py"), str(SAMPLES),
                             str(BATCH_SIZE), str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = torch_orders(3)
    assert len({tuple(order) for order in expected}) == 3  # the epochs differ, so a repeated order fails
    for rank in range(processes):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen["epochs"] == expected
        assert seen["resumed_between_epochs"] == expected[2]
        # Restored after the first step: the rest of epoch 2 (each step gathers BATCH_SIZE per rank).
        assert seen["resumed_mid_epoch"] == expected[2][BATCH_SIZE * processes:]
