"""FSDP's FULL_SHARD, with and without cpu_offload, trained by fsdp_device_worker.py on 2 processes on the CPU and
on a GPU (two processes sharing it through Gloo; skipped without CUDA: CI has none, tests/gpu/check.sh runs it):
the weights of NO_SHARD (data parallelism), bit for bit with the shares on the device, and within 1e-6
offloaded, where the optimizer steps on the host (whose kernels may round otherwise than CUDA's; on the CPU
the shares stay where they are and the weights are the same bits)."""
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import child_environment

torch = pytest.importorskip("torch")

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))


def train(device, mode, out):
    placement = ["--cpu"] if device == "cpu" else []
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", "2", *placement, "--master-port", "0", "--",
                             sys.executable, str(HERE / "fsdp_device_worker.py"), mode, str(out)],
                            env=dict(child_environment(), ACCEL_BACKEND="gloo"), capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return torch.load(out)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_full_shard_with_and_without_cpu_offload_ends_with_no_shards_weights(device, tmp_path):
    whole = train(device, "whole", tmp_path / "whole.pt")
    for mode in ("sharded", "offloaded"):
        weights = train(device, mode, tmp_path / f"{mode}.pt")
        assert sorted(weights) == sorted(whole)
        for name, value in whole.items():
            if mode == "offloaded" and device != "cpu":
                assert (weights[name] - value).abs().max() <= 1e-6, (mode, name)
            else:
                assert torch.equal(weights[name], value), (mode, name)
    torch.manual_seed(0)  # the worker's module before training
    initial = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3)).state_dict()
    assert all(not torch.equal(whole[name], value) for name, value in initial.items()), "nothing trained"
