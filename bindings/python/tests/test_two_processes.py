"""Two processes started by `accel launch` (over loopback, on the CPU) run two_process_worker.py; this test
checks what each rank saw: collective results, gather_for_metrics without the padding, and weights that
are the same on both ranks after training from different initial weights."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import child_environment
from tiny_models import MLP, WithUnusedParameter, scripted_bytes

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(HERE.parents[2] / "build" / "bin" / "accel"))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    directory = tmp_path_factory.mktemp("two_processes")
    paths = []
    for name, module, seed in (("rank0", MLP, 0), ("rank1", MLP, 1), ("unused", WithUnusedParameter, 0)):
        paths.append(directory / f"{name}.pt")
        paths[-1].write_bytes(scripted_bytes(module, seed))
    env = child_environment()
    result = subprocess.run([LAUNCHER, "launch", "--nproc-per-node", "2", "--cpu", "--master-port", "0", "--",
                             sys.executable, str(HERE / "two_process_worker.py"), *map(str, paths), str(directory)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads((directory / f"rank{rank}.json").read_text()) for rank in (0, 1)]


def test_both_ranks_joined_one_group(ranks):
    assert [(r["num_processes"], r["distributed_type"], r["backend"], r["is_main_process"]) for r in ranks] == [
        (2, "MULTI_CPU", "gloo+shm", True), (2, "MULTI_CPU", "gloo+shm", False)]


def test_collectives(ranks):
    for seen in ranks:
        assert seen["gather"] == [1, 2, 3, 4]
        assert seen["reduce"] == {"sum": [4, 6], "mean": [2, 3], "max": [3, 4]}
        assert seen["reduce_nested"] == {"loss": 3.0, "parts": [[4, 6], [0, 3, 6]]}
        assert seen["broadcast"] == [1, 1]
        assert seen["all_gather_transposed"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
        assert seen["gather_object"] == ["rank 0", "rank 1"]
        assert seen["gather_rows_differ"] == [0, 0, 1]  # rank 0 has 1 row, rank 1 has 2: no padding needed
        assert "process 0: [1, 1]" in seen["shape_mismatch"] and "process 1: [1, 2]" in seen["shape_mismatch"]
    assert ranks[0]["pad"] == [0, 1, 2] and ranks[1]["pad"] == [0, 1, -1]
    assert [ranks[r]["reduce_scatter"] for r in (0, 1)] == [{"sum": [4, 6], "mean": [2, 3]},
                                                            {"sum": [8, 10], "mean": [4, 5]}]
    assert ranks[1]["main_went_first"]
    # Accelerate's examples: ["A", "B", "C"] padded gives ["A", "B"] and ["C", "C"]; 5 items give 3 and 2.
    assert [ranks[r]["split_letters"] for r in (0, 1)] == [["A", "B"], ["C", "C"]]
    assert [ranks[r]["split_dict"] for r in (0, 1)] == [{"n": [0, 1, 2], "s": "abc"}, {"n": [3, 4], "s": "de"}]


def test_gather_for_metrics_counts_every_sample_once(ranks):
    for seen in ranks:
        assert seen["batches_per_rank"] == 2
        assert seen["gather_for_metrics"] == list(range(7))
        assert seen["predictions"] == 7


def test_weights_are_the_same_on_both_ranks_after_training(ranks):
    assert ranks[0]["initial_weights"] == ranks[1]["initial_weights"]  # prepare sent rank 0's weights
    assert ranks[0]["weights"] == ranks[1]["weights"]  # averaged gradients keep them equal
    assert ranks[0]["weights"] != ranks[0]["initial_weights"]
    assert ranks[0]["steps"] == 12 and ranks[0]["last_loss"] < ranks[0]["first_loss"]


def test_every_step_all_reduced_the_gradients_and_reports_the_cost(ranks):
    for seen in ranks:
        assert seen["grad_syncs"] == 12 and seen["grad_reduce_ms"] > 0


def test_get_state_dict_gathers_a_sharded_torchscript_model_for_the_main_process(ranks):
    first, second = (ranks[r]["sharded_state_dict"] for r in (0, 1))
    assert first["units"] > 0 and second["units"] == first["units"]
    assert first["state_dict_names"] == first["names_saved"] and first["state_dict_equals_saved"]
    assert second["state_dict_names"] == []


def test_unused_parameters_need_find_unused_parameters(ranks):
    for seen in ranks:
        allowed, refused = seen["unused_parameters"]
        assert allowed == "ok" and "unused.weight" in refused
