"""accel.launchers (debug_launcher, notebook_launcher: forked processes meeting through the library's
rendezvous) and accel.utils.environment (patch_environment, clear_environment)."""
import json
import multiprocessing
import os
import re
import signal
import socket
import sys

import numpy as np
import pytest
import torch

import accel
from accel import debug_launcher, notebook_launcher
from accel.launchers import LaunchedProcessError
from accel.utils import clear_environment, patch_environment


@pytest.fixture(autouse=True)
def no_process_state():
    """The launchers refuse a process that has a state: an earlier test's PartialState() keeps its
    Accelerator in the shared state, which would be the one refused here."""
    accel.state.PartialState._shared_state.clear()
    live = accel.state._live_accelerator()
    if live is not None:
        live.close()
    yield


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _report_process(directory):
    """A function for the launchers: makes its Accelerator, gathers every rank's index, and writes what it
    saw to directory/rank<index>.json."""
    def report():
        accelerator = accel.Accelerator()
        gathered = accelerator.gather(torch.tensor([float(accelerator.process_index)]))
        seen = {"num_processes": accelerator.num_processes, "process_index": accelerator.process_index,
                "device": str(accelerator.device), "mixed_precision": accelerator.mixed_precision,
                "gathered": gathered.tolist(), "pid": os.getpid(),
                "environment": {key: os.environ.get(key) for key in
                                ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT", "ACCEL_RESTART_COUNT")}}
        (directory / f"rank{accelerator.process_index}.json").write_text(json.dumps(seen))
    return report


def _reports(directory, count):
    return [json.loads((directory / f"rank{rank}.json").read_text()) for rank in range(count)]


def test_debug_launcher_runs_the_function_on_two_cpu_processes_that_meet(tmp_path):
    environment_before = dict(os.environ)
    debug_launcher(_report_process(tmp_path))
    ranks = _reports(tmp_path, 2)
    assert [(r["num_processes"], r["process_index"], r["device"], r["mixed_precision"]) for r in ranks] == [
        (2, 0, "cpu", "no"), (2, 1, "cpu", "no")]
    assert [r["gathered"] for r in ranks] == [[0.0, 1.0], [0.0, 1.0]]
    assert len({r["pid"] for r in ranks} | {os.getpid()}) == 3  # forked processes, not this one
    assert dict(os.environ) == environment_before
    assert accel.state._live_accelerator() is None  # this process made no state


def test_a_function_that_raises_in_one_process_fails_the_launch_naming_that_process():
    def fail_on_rank_one():
        accelerator = accel.Accelerator()
        if accelerator.process_index == 1:
            raise ValueError("rank one fails on purpose")
        accelerator.wait_for_everyone()

    with pytest.raises(LaunchedProcessError) as failure:
        debug_launcher(fail_on_rank_one)
    assert isinstance(failure.value, RuntimeError)
    assert failure.value.process_index == 1 and failure.value.exitcode == 1
    assert str(failure.value).startswith("rank 1 of 2 raised ValueError: rank one fails on purpose\n")
    assert "in fail_on_rank_one" in failure.value.child_traceback


def test_a_process_that_exits_or_is_killed_is_named_with_its_exit_code_or_signal():
    def exit_on_rank_zero():
        if accel.Accelerator().process_index == 0:
            sys.exit(3)

    def killed_on_rank_one():
        if accel.Accelerator().process_index == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(LaunchedProcessError, match=r"^rank 0 of 2 exited with code 3$"):
        debug_launcher(exit_on_rank_zero)
    with pytest.raises(LaunchedProcessError, match=r"^rank 1 of 2 was killed by signal 9$"):
        debug_launcher(killed_on_rank_one)


def test_notebook_launcher_runs_two_cpu_processes_with_the_mixed_precision_asked(tmp_path, capsys):
    port = _free_port()
    notebook_launcher(_report_process(tmp_path), num_processes=2, mixed_precision="bf16", use_port=str(port))
    ranks = _reports(tmp_path, 2)
    assert [(r["num_processes"], r["process_index"], r["mixed_precision"]) for r in ranks] == [
        (2, 0, "bf16"), (2, 1, "bf16")]
    assert [r["gathered"] for r in ranks] == [[0.0, 1.0], [0.0, 1.0]]
    assert {r["environment"]["MASTER_PORT"] for r in ranks} == {str(port)}
    assert "Launching training on 2 CPU processes." in capsys.readouterr().out


def test_notebook_launcher_meets_at_rdzv_endpoint_when_given(tmp_path):
    port = _free_port()
    notebook_launcher(_report_process(tmp_path), num_processes=2, rdzv_endpoint=f"127.0.0.1:{port}")
    assert {r["environment"]["MASTER_PORT"] for r in _reports(tmp_path, 2)} == {str(port)}


def test_notebook_launcher_starts_every_process_again_after_a_failure_up_to_max_restarts(tmp_path):
    report = _report_process(tmp_path)

    def fail_first_attempt():
        if os.environ["ACCEL_RESTART_COUNT"] == "0" and os.environ["RANK"] == "1":
            raise RuntimeError("the first attempt fails")
        report()

    notebook_launcher(fail_first_attempt, num_processes=2, use_port=_free_port(), max_restarts=1)
    assert [r["environment"]["ACCEL_RESTART_COUNT"] for r in _reports(tmp_path, 2)] == ["1", "1"]
    with pytest.raises(LaunchedProcessError, match="the first attempt fails"):
        notebook_launcher(fail_first_attempt, num_processes=2, use_port=_free_port())


def test_notebook_launcher_on_two_nodes_numbers_the_ranks_of_each_node(tmp_path, monkeypatch):
    # Node 1 is a forked process of this one, launching its own process as another machine would.
    monkeypatch.setenv("ACCEL_JOB_KEY", "a secret both nodes share")
    port = _free_port()
    report = _report_process(tmp_path)
    node_one = multiprocessing.get_context("fork").Process(
        target=notebook_launcher, args=(report,), kwargs=dict(num_processes=1, node_rank=1, num_nodes=2, use_port=port))
    node_one.start()
    notebook_launcher(report, num_processes=1, node_rank=0, num_nodes=2, use_port=port)
    node_one.join(60)
    assert node_one.exitcode == 0
    ranks = _reports(tmp_path, 2)
    assert [(r["num_processes"], r["environment"]["RANK"], r["environment"]["LOCAL_RANK"]) for r in ranks] == [
        (2, "0", "0"), (2, "1", "0")]
    assert [r["gathered"] for r in ranks] == [[0.0, 1.0], [0.0, 1.0]]


def test_notebook_launcher_with_one_process_runs_the_function_here(capsys):
    seen = {}

    def record():
        seen.update(pid=os.getpid(), mixed_precision=os.environ.get("ACCEL_MIXED_PRECISION"))

    with patch_environment(accel_mixed_precision="no"):
        notebook_launcher(record, num_processes=1, mixed_precision="fp16")
        assert os.environ["ACCEL_MIXED_PRECISION"] == "no"
    assert seen == {"pid": os.getpid(), "mixed_precision": "fp16"}
    assert capsys.readouterr().out == "Launching training on CPU.\n"


def _two_processes_meet():
    accelerator = accel.Accelerator(cpu=True)
    assert accelerator.num_processes == 2, accelerator.num_processes
    gathered = accelerator.gather(np.array([accelerator.process_index], dtype=np.int64))
    assert gathered.tolist() == [0, 1], gathered


def test_debug_launcher_processes_start_without_the_callers_state(make_accelerator):
    accelerator = make_accelerator()
    debug_launcher(_two_processes_meet, num_processes=2)
    assert accelerator.num_processes == 1
    assert accelerator.reduce(np.array([2.0]), "sum").tolist() == [2.0]  # the caller's state still works


def test_notebook_launcher_refuses_a_process_with_an_accelerator_as_accelerate_does(make_accelerator):
    make_accelerator()
    with pytest.raises(ValueError, match="already has an Accelerator.*only inside the launched function"):
        notebook_launcher(print, num_processes=2)


@pytest.mark.parametrize("option, named", [
    (dict(rdzv_backend="c10d"), "rdzv_backend='c10d'"),
    (dict(rdzv_conf={"timeout": 5}), "rdzv_conf={'timeout': 5}"),
    (dict(log_line_prefix_template="[${rank}]"), "log_line_prefix_template"),
])
def test_notebook_launcher_options_accel_cannot_honour_are_refused_by_name(option, named):
    with pytest.raises(accel.UnsupportedError, match=f"^notebook_launcher: {re.escape(named)}"):
        notebook_launcher(print, num_processes=2, **option)


def test_a_tpu_notebook_is_refused(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "grpc://10.0.0.2:8470")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    with pytest.raises(accel.UnsupportedError, match="TPUs"):
        notebook_launcher(print, num_processes=8)


@pytest.mark.parametrize("arguments, message", [
    (dict(), "specify the number of processes"),
    (dict(num_processes=2, mixed_precision="fp64"), "Unknown mixed_precision mode: fp64"),
    (dict(num_processes=2, node_rank=1), "node_rank must be less than the number of nodes"),
    (dict(num_processes=0), "num_processes must be an int >= 1, not 0"),
    (dict(num_processes=2, use_port="http"), "port 'http' is not a port number"),
    (dict(num_processes=2, rdzv_endpoint="localhost"), "rdzv_endpoint='localhost' is not \"host:port\""),
])
def test_notebook_launcher_arguments_are_checked_before_anything_starts(arguments, message):
    with pytest.raises(ValueError, match=message):
        notebook_launcher(print, **arguments)


def test_patch_environment_sets_upper_cased_strings_and_restores_what_was_there(monkeypatch):
    monkeypatch.setenv("ACCEL_TEST_KEPT", "before")
    monkeypatch.delenv("ACCEL_TEST_NEW", raising=False)
    with patch_environment(accel_test_kept=1, Accel_Test_New=2.5):
        assert (os.environ["ACCEL_TEST_KEPT"], os.environ["ACCEL_TEST_NEW"]) == ("1", "2.5")
        assert "accel_test_kept" not in os.environ
    assert os.environ["ACCEL_TEST_KEPT"] == "before" and "ACCEL_TEST_NEW" not in os.environ
    with pytest.raises(KeyError):
        with patch_environment(accel_test_new="x"):
            raise KeyError("the block fails")
    assert "ACCEL_TEST_NEW" not in os.environ


def test_clear_environment_empties_the_environment_and_puts_it_back(monkeypatch):
    monkeypatch.setenv("ACCEL_TEST_KEPT", "before")
    before = dict(os.environ)
    with clear_environment():
        assert dict(os.environ) == {}
        os.environ["ACCEL_TEST_KEPT"] = "changed"
        os.environ["ACCEL_TEST_ADDED"] = "added"
    assert dict(os.environ) == before


def test_convert_dict_to_env_variables_keeps_the_lines_an_environment_file_can_hold(caplog):
    from accel.utils import convert_dict_to_env_variables
    env = {"KEPT": "1", "SPACED": "a b", "REDIRECTED": "<file", "EMPTY": "", "ALSO_KEPT": "2"}
    with caplog.at_level("WARNING"):
        assert convert_dict_to_env_variables(env) == ["KEPT=1\n", "ALSO_KEPT=2\n"]
    assert [name for name in ("SPACED", "REDIRECTED", "EMPTY") if name in caplog.text] == ["SPACED", "REDIRECTED", "EMPTY"]
