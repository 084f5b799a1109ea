"""A checkpoint saved on 2 processes resumes on 1 (and 1 on 2) through Accelerate's API, the global batch
kept: the steps after the resume are those an uninterrupted run on the new number of processes takes, so
every remaining sample comes once, in order (resume_world_size_worker.py under `accel launch`). Another
global batch is refused naming both, and a loader whose place cannot move says why."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import child_environment

pytest.importorskip("torch")

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))
TOTAL, SAVED_AFTER = 8, 3


def _launch(processes, *arguments, seedable=True):
    return subprocess.run([LAUNCHER, "launch", "--nproc-per-node", str(processes), "--cpu", "--master-port", "0",
                           "--", sys.executable, str(HERE / "resume_world_size_worker.py"), *map(str, arguments)],
                          env={**child_environment(), "RESUME_SEEDABLE": "1" if seedable else "0"},
                          capture_output=True, text=True, timeout=120)


def _ok(result):
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("saved_on, resumed_on", [((2, 3), (1, 6)), ((1, 6), (2, 3))])
def test_the_resumed_steps_are_an_uninterrupted_runs(saved_on, resumed_on, tmp_path):
    (from_processes, from_batch), (to_processes, to_batch) = saved_on, resumed_on
    _ok(_launch(to_processes, "order", to_batch, TOTAL, tmp_path / "straight.json"))
    _ok(_launch(from_processes, "save", from_batch, SAVED_AFTER, tmp_path / "checkpoint"))
    _ok(_launch(to_processes, "resume", to_batch, TOTAL - SAVED_AFTER, tmp_path / "checkpoint", tmp_path / "resumed.json"))
    straight = json.loads((tmp_path / "straight.json").read_text())
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    assert straight[:SAVED_AFTER] != resumed[:SAVED_AFTER]  # a resume that started over would fail below
    assert resumed == straight[SAVED_AFTER:]


def test_another_global_batch_is_refused_naming_both(tmp_path):
    _ok(_launch(2, "save", 3, SAVED_AFTER, tmp_path / "checkpoint"))
    refused = _launch(1, "resume", 3, 1, tmp_path / "checkpoint", tmp_path / "resumed.json")
    assert refused.returncode != 0
    assert "saved mid-epoch by 2 processes taking 6 samples a step; this run has 1 taking 3" in refused.stderr


def test_a_loader_torch_shuffles_on_one_process_says_why_its_place_does_not_move(tmp_path):
    # Unseeded, the shuffle is the library's on 2 processes and torch's on 1 (as Accelerate's there).
    _ok(_launch(2, "save", 3, SAVED_AFTER, tmp_path / "checkpoint", seedable=False))
    refused = _launch(1, "resume", 6, 1, tmp_path / "checkpoint", tmp_path / "resumed.json", seedable=False)
    assert refused.returncode != 0
    assert "InvalidArgumentError" in refused.stderr and "use_seedable_sampler=True" in refused.stderr
