"""accel.test_utils, Accelerate's test utilities for accel: skip conditions that follow this machine, the
launch command and the subprocess runner, the test cases that reset the process state, the regression
problem, and the collectives script (test_ops) on one process (tests/accelerate_scripts runs it on two)."""
import gc
import os
import pathlib
import sys
import unittest

import pytest
import torch

import accel
from accel import test_utils
from accel.test_utils import testing
from accel.test_utils.scripts import test_ops


def skipped(decorator):
    """Whether decorator skips the test it decorates."""
    return getattr(decorator(lambda: None), "__unittest_skip__", False)


def test_the_device_is_the_one_accel_runs_on(make_accelerator):
    assert test_utils.torch_device == make_accelerator(cpu=False).device.type
    assert test_utils.device_count == (torch.cuda.device_count() if test_utils.torch_device == "cuda" else 1)
    assert skipped(test_utils.require_cpu) == (test_utils.torch_device != "cpu")
    assert skipped(test_utils.require_non_cpu) == (test_utils.torch_device == "cpu")
    assert skipped(test_utils.require_cuda) == (not accel.utils.is_cuda_available())
    assert skipped(test_utils.require_multi_device) == (test_utils.device_count < 2)
    if test_utils.torch_device == "cpu":
        assert test_utils.memory_allocated_func() == 0


def test_package_conditions_follow_what_is_installed():
    assert skipped(test_utils.require_huggingface_suite) == (
        not (accel.utils.is_transformers_available() and accel.utils.is_datasets_available()))
    assert skipped(testing.require_tensorboard) == (not accel.utils.is_tensorboard_available())
    assert skipped(testing.require_torchdata_stateful_dataloader) == (
        not accel.utils.is_torchdata_stateful_dataloader_available())
    assert not skipped(testing.require_torch_min_version(version="1.0"))
    assert skipped(testing.require_torch_min_version(version="100"))
    assert skipped(testing.require_fsdp) and skipped(test_utils.skip)


def test_slow_tests_run_only_with_run_slow(monkeypatch):
    monkeypatch.setenv("RUN_SLOW", "yes")
    assert testing.parse_flag_from_env("RUN_SLOW") is True
    monkeypatch.setenv("RUN_SLOW", "maybe")
    with pytest.raises(ValueError, match="RUN_SLOW must be yes or no"):
        testing.parse_flag_from_env("RUN_SLOW")
    assert testing.parse_flag_from_env("ACCEL_NO_SUCH_FLAG", default=True) is True
    assert skipped(test_utils.slow) == (not testing._run_slow_tests)


def test_the_launch_command_is_accels(monkeypatch, tmp_path):
    # DEFAULT_LAUNCH_COMMAND was made at import, with this run's ACCEL_LAUNCHER (or `accel` on PATH).
    assert test_utils.DEFAULT_LAUNCH_COMMAND == [os.environ.get("ACCEL_LAUNCHER", "accel"), "launch",
                                                 f"--num_processes={test_utils.device_count}"]
    script = tmp_path / "script.py"
    script.write_text("import os, sys\nprint('rank', os.environ['RANK'])\nprint('to stderr', file=sys.stderr)\n")
    result = test_utils.execute_subprocess_async(test_utils.DEFAULT_LAUNCH_COMMAND + [script], quiet=True)
    assert result.returncode == 0 and "rank 0" in result.stdout and "to stderr" in result.stderr
    monkeypatch.setenv("ACCEL_LAUNCHER", "/opt/accel/bin/accel")
    assert testing.get_launch_command(num_processes=2, cpu=True, mixed_precision=None, debug=False) == [
        "/opt/accel/bin/accel", "launch", "--num_processes=2", "--cpu"]


def test_a_failing_or_hanging_subprocess_raises_with_its_stderr():
    failing = [sys.executable, "-c", "import sys; print('why', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(RuntimeError, match=r"returncode 3(.|\n)*why"):
        test_utils.execute_subprocess_async(failing, quiet=True, echo=False)
    with pytest.raises(RuntimeError, match="killed|returncode -"):
        test_utils.execute_subprocess_async([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], quiet=True)
    with pytest.raises(RuntimeError, match="timed out after 1 s"):
        test_utils.execute_subprocess_async([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1,
                                            quiet=True)
    with pytest.raises(testing.SubprocessCallException, match="why"):
        testing.run_command(failing)
    assert testing.run_command([sys.executable, "-c", "print('out')"], return_stdout=True) == "out\n"


def test_assertion_helpers():
    with test_utils.assert_exception(ValueError, "bad"):
        raise ValueError("a bad value")
    for block in (lambda: None, lambda: (_ for _ in ()).throw(KeyError("bad"))):
        with pytest.raises(AssertionError):
            with test_utils.assert_exception(ValueError):
                block()
    with pytest.raises(AssertionError, match="Expected message 'good'"):
        with test_utils.assert_exception(ValueError, "good"):
            raise ValueError("a bad value")
    assert test_utils.capture_call_output(print, "hello", end="!") == "hello!"
    script = test_utils.path_in_accelerate_package("test_utils", "scripts", "test_ops.py")
    assert script == pathlib.Path(test_ops.__file__)


def test_the_regression_problem():
    first, again = test_utils.RegressionDataset(seed=42), test_utils.RegressionDataset(seed=42)
    assert len(first) == 64 and first[3]["x"] == again[3]["x"] and first[3]["y"] == again[3]["y"]
    assert first[0]["x"].dtype == first[0]["y"].dtype == torch.zeros(1).numpy().dtype
    residual = torch.tensor(first.y) - (2 * torch.tensor(first.x) + 3)
    assert residual.abs().max() < 0.5 and 0.05 < residual.std() < 0.15  # noise of scale 0.1
    model = test_utils.RegressionModel(a=2, b=3)
    output = test_utils.capture_call_output(model, torch.tensor([1.0, 2.0]))
    assert output == "Model dtype: torch.float32, torch.float32. Input dtype: torch.float32\n"
    assert test_utils.capture_call_output(model, torch.tensor([1.0])) == ""  # the first batch only
    assert model(torch.tensor([1.0, 2.0])).tolist() == [5.0, 7.0]
    assert test_utils.RegressionModel4XPU()(torch.tensor([1.0])).tolist() == [4.0]


class _MakesAccelerators(testing.AccelerateTestCase):
    """Each test makes an Accelerator with other settings and keeps it (the runner keeps the test objects):
    only the tear-down's reset lets the second in."""

    __test__ = False  # run by test_the_test_cases_leave_no_state_behind, not collected on its own

    def test_bf16(self):
        self.accelerator = accel.Accelerator(cpu=True, mixed_precision="bf16")

    def test_fp16(self):
        self.accelerator = accel.Accelerator(cpu=True, mixed_precision="fp16")


class _UsesTheFolder(testing.TempDirTestCase):
    """An emptied folder for each test, and other settings for each (the tear-down's reset again)."""

    __test__ = False

    def test_a(self):
        assert list(self.tmpdir.iterdir()) == []
        (self.tmpdir / "a").mkdir()
        self.accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=2)

    def test_b(self):
        assert list(self.tmpdir.iterdir()) == []
        self.accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=3)


@pytest.mark.parametrize("case", [_MakesAccelerators, _UsesTheFolder])
def test_the_test_cases_leave_no_state_behind(case):
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet).run(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    problems = [text for _, text in result.errors + result.failures]
    del result  # its failed tests hold their Accelerators: let them go before the next test's
    gc.collect()
    assert problems == []


def test_the_collectives_script_on_one_process(make_accelerator, capfd):
    make_accelerator()
    test_ops.main()
    printed = capfd.readouterr().out
    assert "testing gather" in printed and "testing copy_tensor_to_devices" in printed
