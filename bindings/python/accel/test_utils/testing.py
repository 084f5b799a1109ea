"""accel.test_utils.testing: Accelerate's test helpers for tests of accel: skip decorators whose conditions
are what this machine really has (packages installed, the device accel runs on), test cases that leave no
process state behind, and helpers to run launched subprocesses.

The device is the one accel's Accelerator uses: "cuda" when the library was built with CUDA and torch sees
a GPU, else "cpu" (accel runs on no other device, so Accelerate's TPU, MPS, NPU, MLU, MUSA and XPU
branches never choose the device here; their require_* decorators still ask torch).
"""
import contextlib
import functools
import inspect
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

import torch

import accel

from ..state import AcceleratorState, PartialState
from ..utils import (gather, is_bnb_available, is_clearml_available, is_comet_ml_available, is_cuda_available,
                     is_datasets_available, is_deepspeed_available, is_dvclive_available, is_import_timer_available,
                     is_mlu_available, is_mps_available, is_musa_available, is_npu_available, is_pandas_available,
                     is_pippy_available, is_schedulefree_available, is_tensorboard_available, is_timm_available,
                     is_torch_version, is_torch_xla_available, is_torchdata_stateful_dataloader_available,
                     is_torchvision_available, is_transformer_engine_available, is_transformers_available,
                     is_triton_available, is_wandb_available, is_xpu_available, str_to_bool)


def get_backend():
    """(device type, device count, memory-allocated function) of the device accel runs on here."""
    if is_cuda_available():
        return "cuda", torch.cuda.device_count(), torch.cuda.memory_allocated
    return "cpu", 1, lambda: 0


torch_device, device_count, memory_allocated_func = get_backend()


def get_launch_command(**kwargs):
    """accel's launcher command line with Accelerate's spelling of its options: each keyword becomes
    --name=value (a True flag --name, False and None left out), after `<launcher> launch`. The launcher is
    $ACCEL_LAUNCHER, else `accel` on PATH.

        get_launch_command(num_processes=2)  # ['accel', 'launch', '--num_processes=2']
    """
    command = [os.environ.get("ACCEL_LAUNCHER", "accel"), "launch"]
    for key, value in kwargs.items():
        if value is True:
            command.append(f"--{key}")
        elif value is not None and value is not False:
            command.append(f"--{key}={value}")
    return command


# One process per device (Accelerate adds --monitor_interval, an option of torchrun's that accel's launcher
# has no counterpart for).
DEFAULT_LAUNCH_COMMAND = get_launch_command(num_processes=device_count)


def parse_flag_from_env(key, default=False):
    """The environment variable key as a bool (yes/no, true/false, 1/0, ...); default when unset."""
    if key not in os.environ:
        return default
    try:
        return bool(str_to_bool(os.environ[key]))
    except ValueError:
        raise ValueError(f"If set, {key} must be yes or no.") from None


_run_slow_tests = parse_flag_from_env("RUN_SLOW", default=False)


def skip(test_case):
    """Skips the test unconditionally."""
    return unittest.skip("Test was skipped")(test_case)


def slow(test_case):
    """Marks a slow test: skipped unless the environment variable RUN_SLOW is true."""
    return unittest.skipUnless(_run_slow_tests, "test is slow")(test_case)


def require_cpu(test_case):
    """Runs only where accel runs on the CPU (no GPU it can use)."""
    return unittest.skipUnless(torch_device == "cpu", "test requires only a CPU")(test_case)


def require_non_cpu(test_case):
    """Runs only where accel has a hardware accelerator (a CUDA GPU)."""
    return unittest.skipUnless(torch_device != "cpu", "test requires a GPU")(test_case)


def require_cuda(test_case):
    """Runs only where accel can use CUDA (and TorchXLA is absent, as Accelerate asks)."""
    return unittest.skipUnless(is_cuda_available() and not is_torch_xla_available(), "test requires a GPU")(test_case)


def require_xpu(test_case):
    return unittest.skipUnless(is_xpu_available(), "test requires a XPU")(test_case)


def require_non_xpu(test_case):
    """Skipped where the device is an XPU (never, with accel)."""
    return unittest.skipUnless(torch_device != "xpu", "test requires a non-XPU")(test_case)


def require_mlu(test_case):
    return unittest.skipUnless(is_mlu_available(), "test require a MLU")(test_case)


def require_musa(test_case):
    return unittest.skipUnless(is_musa_available(), "test require a MUSA")(test_case)


def require_npu(test_case):
    return unittest.skipUnless(is_npu_available(), "test require a NPU")(test_case)


def require_mps(test_case):
    return unittest.skipUnless(is_mps_available(), "test requires a `mps` backend support in `torch`")(test_case)


def require_huggingface_suite(test_case):
    """Runs only with both transformers and datasets installed."""
    return unittest.skipUnless(is_transformers_available() and is_datasets_available(),
                               "test requires the Hugging Face suite")(test_case)


def require_transformers(test_case):
    return unittest.skipUnless(is_transformers_available(), "test requires the transformers library")(test_case)


def require_timm(test_case):
    return unittest.skipUnless(is_timm_available(), "test requires the timm library")(test_case)


def require_torchvision(test_case):
    return unittest.skipUnless(is_torchvision_available(), "test requires the torchvision library")(test_case)


def require_triton(test_case):
    return unittest.skipUnless(is_triton_available(), "test requires the triton library")(test_case)


def require_schedulefree(test_case):
    return unittest.skipUnless(is_schedulefree_available(), "test requires the schedulefree library")(test_case)


def require_bnb(test_case):
    return unittest.skipUnless(is_bnb_available(), "test requires the bitsandbytes library")(test_case)


def require_tpu(test_case):
    return unittest.skipUnless(is_torch_xla_available(check_is_tpu=True), "test requires TPU")(test_case)


def require_non_torch_xla(test_case):
    """Skipped where TorchXLA is installed."""
    return unittest.skipUnless(not is_torch_xla_available(), "test requires an env without TorchXLA")(test_case)


def require_single_device(test_case):
    """Runs only with exactly one device for accel beside the CPU."""
    return unittest.skipUnless(torch_device != "cpu" and device_count == 1,
                               "test requires a hardware accelerator")(test_case)


def require_single_gpu(test_case):
    """Runs only with exactly one CUDA GPU that accel can use."""
    return unittest.skipUnless(torch_device == "cuda" and device_count == 1, "test requires a GPU")(test_case)


def require_single_xpu(test_case):
    return unittest.skipUnless(is_xpu_available() and torch.xpu.device_count() == 1, "test requires a XPU")(test_case)


def require_multi_device(test_case):
    """Runs only with several devices for accel (GPUs)."""
    return unittest.skipUnless(device_count > 1, "test requires multiple hardware accelerators")(test_case)


def require_multi_gpu(test_case):
    """Runs only with several CUDA GPUs that accel can use."""
    return unittest.skipUnless(torch_device == "cuda" and device_count > 1, "test requires multiple GPUs")(test_case)


def require_multi_xpu(test_case):
    return unittest.skipUnless(is_xpu_available() and torch.xpu.device_count() > 1,
                               "test requires multiple XPUs")(test_case)


def require_deepspeed(test_case):
    """Runs only with the DeepSpeed package installed (accel's own ZeRO stages 1 and 2 need none)."""
    return unittest.skipUnless(is_deepspeed_available(), "test requires DeepSpeed")(test_case)


def require_fsdp(test_case):
    """Skipped: accel has no FSDP (Accelerate runs these tests on torch >= 1.12)."""
    return unittest.skip("test requires FSDP, which accel does not have")(test_case)


def require_torch_min_version(test_case=None, version=None):
    """Runs only on torch >= version; require_torch_min_version(version="2.0") decorates too."""
    if test_case is None:
        return functools.partial(require_torch_min_version, version=version)
    return unittest.skipUnless(is_torch_version(">=", version), f"test requires torch version >= {version}")(test_case)


def require_tensorboard(test_case):
    return unittest.skipUnless(is_tensorboard_available(), "test requires Tensorboard")(test_case)


def require_wandb(test_case):
    return unittest.skipUnless(is_wandb_available(), "test requires wandb")(test_case)


def require_comet_ml(test_case):
    return unittest.skipUnless(is_comet_ml_available(), "test requires comet_ml")(test_case)


def require_clearml(test_case):
    return unittest.skipUnless(is_clearml_available(), "test requires clearml")(test_case)


def require_dvclive(test_case):
    return unittest.skipUnless(is_dvclive_available(), "test requires dvclive")(test_case)


def require_pandas(test_case):
    return unittest.skipUnless(is_pandas_available(), "test requires pandas")(test_case)


def require_pippy(test_case):
    return unittest.skipUnless(is_pippy_available(), "test requires pippy")(test_case)


def require_import_timer(test_case):
    return unittest.skipUnless(is_import_timer_available(), "test requires tuna interpreter")(test_case)


def require_transformer_engine(test_case):
    return unittest.skipUnless(is_transformer_engine_available(), "test requires transformers engine")(test_case)


def require_trackers(test_case):
    """Runs only with wandb or tensorboard installed and comet_ml not (as Accelerate asks)."""
    available = (is_wandb_available() or is_tensorboard_available()) and not is_comet_ml_available()
    return unittest.skipUnless(available, "test requires at least one tracker to be available and for `comet_ml` "
                                          "to not be installed")(test_case)


def require_torchdata_stateful_dataloader(test_case):
    return unittest.skipUnless(is_torchdata_stateful_dataloader_available(),
                               "test requires torchdata.stateful_dataloader")(test_case)


def _reset_process_state():
    """Ends the process's accel state, so that the next test may make an Accelerator with other settings (a
    process has one state)."""
    AcceleratorState._reset_state(True)
    PartialState._reset_state()


class TempDirTestCase(unittest.TestCase):
    """A test case with one temporary folder for the whole class, self.tmpdir (a Path), emptied before each
    test (unless clear_on_setup is False) and removed after the last. Unlike Accelerate's, each test's
    tear-down also resets the process state, as AccelerateTestCase's does: accel's process has one state,
    so an Accelerator left by one test would hold the next one to its settings."""

    clear_on_setup = True

    @classmethod
    def setUpClass(cls):
        cls.tmpdir = Path(tempfile.mkdtemp())

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.tmpdir):
            shutil.rmtree(cls.tmpdir)

    def setUp(self):
        if self.clear_on_setup:
            for path in self.tmpdir.glob("**/*"):
                if path.is_file():
                    path.unlink()
                elif path.is_dir():
                    shutil.rmtree(path)

    def tearDown(self):
        super().tearDown()
        _reset_process_state()


class AccelerateTestCase(unittest.TestCase):
    """A test case whose tear-down resets the process state (AcceleratorState and PartialState), so that
    each test starts with none."""

    def tearDown(self):
        super().tearDown()
        _reset_process_state()


class MockingTestCase(unittest.TestCase):
    """A test case that starts mocks for each test: call self.add_mocks(mock_or_list) at the end of setUp,
    after super().setUp(); each is stopped when the test ends."""

    def add_mocks(self, mocks):
        """Starts mocks (a mock patcher or a list of them) and stops each when the test ends."""
        self.mocks = mocks if isinstance(mocks, (tuple, list)) else [mocks]
        for patcher in self.mocks:
            patcher.start()
            self.addCleanup(patcher.stop)


def are_the_same_tensors(tensor):
    """Whether every process holds the same tensor (collective: every process must call it)."""
    tensor = tensor[None].clone().to(AcceleratorState().device)
    tensors = gather(tensor).cpu()
    tensor = tensor[0].cpu()
    return all(torch.equal(tensors[i], tensor) for i in range(tensors.shape[0]))


class _RunOutput:
    """What execute_subprocess_async gives back: returncode, and stdout and stderr as lists of lines."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def _tee(stream, lines, sink, label, quiet):
    """Reads stream's lines into lines, echoing each to sink after label unless quiet."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip()
        lines.append(line)
        if not quiet:
            print(label, line, file=sink)


def execute_subprocess_async(cmd, env=None, stdin=None, timeout=180, quiet=False, echo=True):
    """Runs cmd (a list; Path items become strings) and gives back a _RunOutput, its output echoed line by
    line as it comes ("stdout:" / "stderr:" labels) unless quiet. RuntimeError with the command and its
    stderr when it fails. Unlike Accelerate's, a command killed by a signal fails too, and one still running
    after timeout seconds is killed and fails."""
    cmd = [str(part) if isinstance(part, Path) else part for part in cmd]
    if echo:
        print("\nRunning: ", " ".join(cmd))
    process = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = [], []
    readers = [threading.Thread(target=_tee, args=(process.stdout, out, sys.stdout, "stdout:", quiet)),
               threading.Thread(target=_tee, args=(process.stderr, err, sys.stderr, "stderr:", quiet))]
    for reader in readers:
        reader.start()
    try:
        returncode = process.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        process.kill()
        returncode, timed_out = process.wait(), True
    for reader in readers:
        reader.join()
    process.stdout.close()
    process.stderr.close()
    if returncode != 0 or timed_out:
        what = f"timed out after {timeout} s" if timed_out else f"failed with returncode {returncode}"
        stderr = "\n".join(err)
        raise RuntimeError(f"'{' '.join(cmd)}' {what}\n\nThe combined stderr from workers follows:\n{stderr}")
    return _RunOutput(returncode, out, err)


class SubprocessCallException(Exception):
    """run_command's command failed; the message holds its output."""


def run_command(command, return_stdout=False, env=None):
    """Runs command (a list; Path items become strings), its stderr into its stdout; returns that output
    (decoded) when return_stdout. SubprocessCallException with the output when the command fails."""
    command = [str(part) if isinstance(part, Path) else part for part in command]
    try:
        output = subprocess.check_output(command, stderr=subprocess.STDOUT,
                                         env=os.environ.copy() if env is None else env)
    except subprocess.CalledProcessError as error:
        raise SubprocessCallException(f"Command `{' '.join(command)}` failed with the following error:\n\n"
                                      f"{error.output.decode()}") from error
    return output.decode("utf-8") if return_stdout else None


def path_in_accelerate_package(*components):
    """A path inside the installed accel package (Accelerate's name: tests find their scripts with it)."""
    return Path(inspect.getfile(accel)).parent.joinpath(*components)


@contextlib.contextmanager
def assert_exception(exception_class, msg=None):
    """Asserts that the block raises exception_class (a subclass counts), with msg in its message when
    given; AssertionError when it raises something else or nothing."""
    try:
        yield
    except Exception as error:
        assert isinstance(error, exception_class), f"Expected exception of type {exception_class} but got {type(error)}"
        if msg is not None:
            assert msg in str(error), f"Expected message '{msg}' to be in exception but got '{str(error)}'"
    else:
        raise AssertionError(f"Expected exception of type {exception_class} but ran without issue.")


def capture_call_output(func, *args, **kwargs):
    """What func(*args, **kwargs) prints to sys.stdout, as a string (an exception passes through)."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        func(*args, **kwargs)
    return captured.getvalue()
