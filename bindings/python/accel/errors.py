"""Exceptions: one class per ACCEL_ERR_* code, under AccelError, and the check every call goes through.

Each class also derives from the built-in exception a Python programmer would catch for that kind of
failure (ValueError, TimeoutError, ...). Names are the code's name in CamelCase; the three whose name is
already a built-in (TimeoutError, EnvironmentError, IOError) get an Accel prefix instead of shadowing it.
"""
import builtins

from ._library import ffi, lib


class AccelError(Exception):
    """A failed accel call: .code is the ACCEL_ERR_* value, .name its symbolic name, and the message is the
    library's own (accel_error_last)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.name = ffi.string(lib.accel_error_name(code)).decode()


class InvalidArgumentError(AccelError, ValueError):
    """ACCEL_ERR_INVALID_ARGUMENT: a value outside what the function accepts."""


class NullArgumentError(AccelError, ValueError):
    """ACCEL_ERR_NULL_ARGUMENT: a required handle or out-parameter is NULL."""


class UnknownOptionError(AccelError, ValueError):
    """ACCEL_ERR_UNKNOWN_OPTION: an option key that does not exist (or belongs to another object)."""


class BadOptionValueError(AccelError, ValueError):
    """ACCEL_ERR_BAD_OPTION_VALUE: an option value of the wrong type or out of range."""


class DtypeError(AccelError, TypeError):
    """ACCEL_ERR_DTYPE: a dtype the operation does not support."""


class ShapeMismatchError(AccelError, ValueError):
    """ACCEL_ERR_SHAPE_MISMATCH: shapes differ across processes (or from what is expected)."""


class DistributedOperationException(Exception):
    """Accelerate's error for a collective that cannot work as called (accel.utils.operations has it under
    that name). accel raises CollectiveShapeMismatchError, which is one."""


class CollectiveShapeMismatchError(ShapeMismatchError, DistributedOperationException):
    """ACCEL_ERR_SHAPE_MISMATCH from a collective (gather, gather_for_metrics, reduce, broadcast,
    pad_across_processes) whose tensors differ between the processes: the library compares them before every
    collective, so code catching Accelerate's DistributedOperationException (which Accelerate raises only in
    its debug mode) catches it too."""


class AccelTimeoutError(AccelError, builtins.TimeoutError):
    """ACCEL_ERR_TIMEOUT: a rendezvous or collective did not complete in time."""


class PeerFailedError(AccelError, ConnectionError):
    """ACCEL_ERR_PEER_FAILED: another process failed or went away during a collective."""


class InvalidStateError(AccelError, RuntimeError):
    """ACCEL_ERR_INVALID_STATE: the object cannot do this now (shut down, broken group, already prepared)."""


class StateResetError(InvalidStateError, AttributeError):
    """An Accelerator used after AcceleratorState._reset_state() retired the state it was made on. Also an
    AttributeError, which Accelerate raises there (its shared state object has lost its attributes)."""


class AccelEnvironmentError(AccelError, RuntimeError):
    """ACCEL_ERR_ENVIRONMENT: a launch variable (RANK, WORLD_SIZE, ...) is missing or wrong."""


class AccelIOError(AccelError, OSError):
    """ACCEL_ERR_IO: a file or socket operation failed."""


class CallbackError(AccelError, RuntimeError):
    """ACCEL_ERR_CALLBACK: a callback returned non-zero. Python callbacks never surface as this: their own
    exception is raised instead."""


class UnsupportedError(AccelError, NotImplementedError):
    """ACCEL_ERR_UNSUPPORTED: not available in this build or on this device."""


class OutOfRangeError(AccelError, IndexError):
    """ACCEL_ERR_OUT_OF_RANGE: an index outside its bounds."""


class TorchError(AccelError, RuntimeError):
    """ACCEL_ERR_TORCH: LibTorch reported an error; the message is LibTorch's."""


class OutOfMemoryError(AccelError, MemoryError):
    """ACCEL_ERR_OUT_OF_MEMORY: an allocation failed."""


class InternalError(AccelError, RuntimeError):
    """ACCEL_ERR_INTERNAL: a bug in accel; please report it."""


ERROR_CLASSES = {
    lib.ACCEL_ERR_INVALID_ARGUMENT: InvalidArgumentError,
    lib.ACCEL_ERR_NULL_ARGUMENT: NullArgumentError,
    lib.ACCEL_ERR_UNKNOWN_OPTION: UnknownOptionError,
    lib.ACCEL_ERR_BAD_OPTION_VALUE: BadOptionValueError,
    lib.ACCEL_ERR_DTYPE: DtypeError,
    lib.ACCEL_ERR_SHAPE_MISMATCH: ShapeMismatchError,
    lib.ACCEL_ERR_TIMEOUT: AccelTimeoutError,
    lib.ACCEL_ERR_PEER_FAILED: PeerFailedError,
    lib.ACCEL_ERR_INVALID_STATE: InvalidStateError,
    lib.ACCEL_ERR_ENVIRONMENT: AccelEnvironmentError,
    lib.ACCEL_ERR_IO: AccelIOError,
    lib.ACCEL_ERR_CALLBACK: CallbackError,
    lib.ACCEL_ERR_UNSUPPORTED: UnsupportedError,
    lib.ACCEL_ERR_OUT_OF_RANGE: OutOfRangeError,
    lib.ACCEL_ERR_TORCH: TorchError,
    lib.ACCEL_ERR_OUT_OF_MEMORY: OutOfMemoryError,
    lib.ACCEL_ERR_INTERNAL: InternalError,
}


def last_error_message():
    """accel_error_last(): the message of the last failed call on this thread."""
    return ffi.string(lib.accel_error_last()).decode(errors="replace")


def check(code, *callbacks):
    """Raises the exception for a non-zero return code. When a callback failed (ACCEL_ERR_CALLBACK), the
    exception a Python callback among `callbacks` (accel._callbacks.Callbacks) raised comes out instead,
    with its traceback, and the library's message is attached as a note."""
    if code == lib.ACCEL_OK:
        return
    message = last_error_message()
    if code == lib.ACCEL_ERR_CALLBACK:
        for callback in callbacks:
            raised = callback.take_exception()
            if raised is not None:
                raised.add_note(f"(accel: {message})")
                raise raised
    raise ERROR_CLASSES.get(code, AccelError)(code, message)


def check_collective(code):
    """check() for a collective's return code: a shape mismatch between the processes is a
    CollectiveShapeMismatchError."""
    if code == lib.ACCEL_ERR_SHAPE_MISMATCH:
        raise CollectiveShapeMismatchError(code, last_error_message())
    check(code)
