"""Python functions handed to the library as C callbacks, with their exceptions carried back out.

A C callback can only say "failed" (a non-zero return), and the library then fails the call that ran it
with ACCEL_ERR_CALLBACK. A Callbacks object keeps the exception the Python code raised; errors.check
raises that exception, with its own traceback, from the accel call instead of a generic CallbackError.

The object also keeps alive what the library holds pointers to: the cffi callbacks. The trampolines are
closures, so the library's payload argument is not needed (NULL is passed). Whoever owns a library
object that calls back (dataset, loader, scheduler) keeps a reference to the Callbacks, so the Python side
outlives the C side whatever order the handles are freed in.
"""
import threading

from ._library import ffi


class Callbacks:
    def __init__(self):
        self._lock = threading.Lock()  # get_item may run on several prefetch threads at once
        self._exception = None
        self._keep = []

    def make(self, c_type, function):
        """A C function pointer of c_type that runs function(*args) and returns 0, or stores what it
        raised (BaseException included: a KeyboardInterrupt must not be lost) and returns 1."""

        def trampoline(*args):
            try:
                function(*args)
                return 0
            except BaseException as raised:  # noqa: B036 - handed back to the caller by errors.check
                with self._lock:
                    if self._exception is None:
                        self._exception = raised
                return 1

        pointer = ffi.callback(c_type, trampoline)
        self._keep.append(pointer)
        return pointer

    def take_exception(self):
        """The first exception raised since the last call, or None; clears it."""
        with self._lock:
            raised, self._exception = self._exception, None
            return raised
