"""Library errors as exceptions, and exceptions of Python callbacks coming back out of the call that ran
them."""
import traceback

import numpy as np
import pytest

import accel
from accel._library import ffi, lib
from accel.errors import ERROR_CLASSES
from tiny_models import MLP, scripted_bytes


def test_every_error_code_has_its_class():
    codes = {getattr(lib, name): name for name in dir(lib) if name.startswith("ACCEL_ERR_")}
    assert sorted(ERROR_CLASSES) == sorted(codes)
    for code, name in codes.items():
        error = ERROR_CLASSES[code](code, "message")
        assert isinstance(error, accel.AccelError) and error.code == code and error.name == name
        assert ffi.string(lib.accel_error_name(code)).decode() == name


def test_a_library_error_carries_code_and_message():
    with pytest.raises(accel.UnknownOptionError) as raised:
        accel.Options({"batch_sise": 3})
    assert raised.value.code == lib.ACCEL_ERR_UNKNOWN_OPTION and raised.value.name == "ACCEL_ERR_UNKNOWN_OPTION"
    assert "batch_sise" in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_errors_derive_from_the_builtin_a_caller_would_catch():
    with pytest.raises(accel.BadOptionValueError, match="batch_size"):
        accel.Options({"batch_size": "many"})
    assert issubclass(accel.AccelTimeoutError, TimeoutError)
    assert issubclass(accel.OutOfRangeError, IndexError)
    assert issubclass(accel.AccelIOError, OSError)


class _Boom(Exception):
    pass


class _FailingMap:
    def __len__(self):
        return 8

    def __getitem__(self, index):
        if index == 5:
            raise _Boom(f"no sample {index}")
        return {"x": np.full(2, index, dtype=np.float32)}


def _assert_raised_from(raised, function_name):
    """The exception is the callback's own, with the callback's frame in its traceback."""
    frames = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
    assert function_name in frames


@pytest.mark.parametrize("prefetch_threads", [0, 2])
def test_a_get_item_exception_comes_out_of_the_loader(accelerator, prefetch_threads):
    spec = accel.DataLoaderSpec(accel.Dataset.from_map(_FailingMap()), batch_size=2,
                                prefetch_threads=prefetch_threads)
    loader = accelerator.prepare(spec)
    with pytest.raises(_Boom, match="no sample 5") as raised:
        for _ in loader:
            pass
    _assert_raised_from(raised, "__getitem__")
    assert raised.value.__notes__ == ["(accel: accel_loader_next: get_item returned 1 for item 5)"]


def test_a_next_item_exception_comes_out_of_the_loader(accelerator):
    def stream():
        yield {"x": np.zeros(2, dtype=np.float32)}
        raise _Boom("the stream broke")

    class Stream:
        def __iter__(self):
            return stream()

    loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_iterable(Stream()), batch_size=1))
    with pytest.raises(_Boom, match="the stream broke") as raised:
        list(loader)
    _assert_raised_from(raised, "stream")


def test_an_lr_multiplier_exception_comes_out_of_the_call_that_ran_it(accelerator):
    model, optimizer = accelerator.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd", lr=0.1))

    def broken_at_step_zero(step):
        raise _Boom(f"step {step}")

    with pytest.raises(_Boom, match="step 0"):
        accelerator.prepare(accel.SchedulerSpec(broken_at_step_zero))

    def broken_later(step):
        if step == 2:
            raise _Boom("step 2")
        return 1.0

    scheduler = accelerator.prepare(accel.SchedulerSpec(broken_later, optimizer=optimizer))
    scheduler.step()
    with pytest.raises(_Boom, match="step 2") as raised:
        scheduler.step()
    _assert_raised_from(raised, "broken_later")
    assert scheduler.get_last_lr() == [0.1]  # unchanged by the failed step


def test_a_model_error_is_a_torch_error(accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    with pytest.raises(accel.TorchError):
        model(np.zeros((2, 7), dtype=np.float32))  # the MLP takes 4 features


def test_a_collective_after_end_training_is_an_invalid_state(make_accelerator):
    accelerator = make_accelerator()
    accelerator.end_training()
    with pytest.raises(accel.InvalidStateError):
        accelerator.gather(np.zeros(1))
