"""accel.test_utils.scripts' test_sync, test_script and test_distributed_data_loop (accel's own checks of what
Accelerate's scripts of those names check), run whole on 1 and 2 processes started by `accel launch --cpu`,
and test_sync's main() through debug_launcher, as Accelerate's tests/test_grad_sync.py runs it. Each script
raises on any failure and prints "<name> on <n> processes" first."""
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import child_environment

from accel import debug_launcher
from accel.test_utils import test_sync

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("name", ["test_sync", "test_script", "test_distributed_data_loop"])
def test_the_script_passes(name, processes):
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", str(processes), "--cpu", "--master-port", "0",
                             "--", sys.executable, "-m", f"accel.test_utils.scripts.{name}"],
                            env=child_environment(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{name} on {processes} processes" in result.stdout


@pytest.mark.parametrize("processes", [1, 2])
def test_sync_runs_under_the_debug_launcher(processes, capfd):
    debug_launcher(test_sync.main, num_processes=processes)
    assert f"test_sync on {processes} processes" in capfd.readouterr().out
