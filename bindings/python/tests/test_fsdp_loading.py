"""FSDP's cpu_ram_efficient_loading under FULL_SHARD: prepare shards the model a unit at a time, so no process
ever holds it whole on its device, and a process that built it on the meta device never holds it at all.
fsdp_loading_worker.py measures what prepare adds to each process's memory at the peak, on 2 processes on the CPU
(resident memory) and on a GPU (device memory; two processes sharing it through Gloo; skipped without CUDA: CI has
none, tests/gpu/check.sh runs it), against the share of the model and three units (FSDP's bound for a forward;
on the CPU the main process's against three units, its own parameters' memory going as its share comes)."""
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import child_environment

torch = pytest.importorskip("torch")

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_prepare_holds_a_share_and_a_unit_at_a_time(device):
    placement = ["--cpu"] if device == "cpu" else []
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", "2", *placement, "--master-port", "0", "--",
                             sys.executable, str(HERE / "fsdp_loading_worker.py")],
                            env=dict(child_environment(), ACCEL_BACKEND="gloo"), capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("prepare added") == 2, result.stdout
    assert f"fsdp_loading_worker: ok on {device}" in result.stdout, result.stdout
