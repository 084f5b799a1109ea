"""Test set-up: the package from this checkout, the library from ACCEL_LIBRARY (ctest sets it; by hand it
defaults to build/lib/libaccel.so of this checkout), and an Accelerator fixture that leaves no process
state behind (a process has one state, and a test may want other settings than the last one)."""
import os
import pathlib
import sys

import pytest

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]
REPOSITORY = PACKAGE_ROOT.parents[1]
sys.path.insert(0, str(PACKAGE_ROOT))
os.environ.setdefault("ACCEL_LIBRARY", str(REPOSITORY / "build" / "lib" / "libaccel.so"))

import accel  # noqa: E402 - after the path set-up above


def child_environment():
    """os.environ for a process a test starts: this checkout's package first on PYTHONPATH, what was there
    kept after it (the GPU check puts cffi and pytest there where the python lacks them)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])))


@pytest.fixture
def make_accelerator():
    """make_accelerator(**kwargs) -> Accelerator(cpu=True, **kwargs), shut down and closed after the test."""
    made = []

    def make(**kwargs):
        kwargs.setdefault("cpu", True)
        made.append(accel.Accelerator(**kwargs))
        return made[-1]

    yield make
    for accelerator in reversed(made):
        if not accelerator.closed and not accelerator._state_was_reset:  # a reset one can only be freed
            accelerator.end_training()
        accelerator.close()


@pytest.fixture
def accelerator(make_accelerator):
    return make_accelerator()


@pytest.fixture
def fresh_state():
    """No Accelerator state before the test nor after it (pytestmark = pytest.mark.usefixtures("fresh_state"))."""
    from accel.state import AcceleratorState
    AcceleratorState._reset_state()
    yield
    AcceleratorState._reset_state()
