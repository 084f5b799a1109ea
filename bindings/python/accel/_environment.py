"""os.environ helpers the layers below accel.utils need too: clear_environment and str_to_bool."""
import contextlib
import os


@contextlib.contextmanager
def clear_environment():
    """Empties os.environ for the block; afterwards the environment is exactly what it was before (what
    the block added is gone, what it removed or changed is back)."""
    saved = os.environ.copy()
    os.environ.clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def str_to_bool(value):
    """Accelerate's str_to_bool: 1 for "y", "yes", "t", "true", "on", "1"; 0 for "n", "no", "f", "false",
    "off", "0" (any case); ValueError otherwise."""
    value = value.lower()
    if value in ("y", "yes", "t", "true", "on", "1"):
        return 1
    if value in ("n", "no", "f", "false", "off", "0"):
        return 0
    raise ValueError(f"invalid truth value {value}")
