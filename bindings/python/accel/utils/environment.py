"""accel.utils.environment: Accelerate's patch_environment and clear_environment, context managers that
change os.environ for the length of a block and put it back as it was afterwards, and the helpers that read
and write environment settings."""
import contextlib
import logging
import os

logger = logging.getLogger(__name__)

# What would break a line of an environment file (or a shell reading it).
_FORBIDDEN_IN_ENVIRONMENT_FILES = (";", "\n", "<", ">", " ")


@contextlib.contextmanager
def patch_environment(**kwargs):
    """Sets each keyword as an environment variable for the block: the name upper-cased, the value
    str()-ed. Afterwards each one is back to the value it had, or removed if it was not set before.

        with patch_environment(master_port=29501):
            os.environ["MASTER_PORT"]  # "29501"
    """
    previous = {}
    for key, value in kwargs.items():
        key = key.upper()
        if key in os.environ:
            previous[key] = os.environ[key]
        os.environ[key] = str(value)
    try:
        yield
    finally:
        for key in kwargs:
            key = key.upper()
            if key in previous:
                os.environ[key] = previous[key]
            else:
                os.environ.pop(key, None)


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


def convert_dict_to_env_variables(current_env):
    """Accelerate's convert_dict_to_env_variables: "KEY=value\\n" lines for an environment file, one per entry
    with a non-empty key and value free of ';', newlines, '<', '>' and spaces; the others are left out with a
    warning naming them."""
    lines = []
    for key, value in current_env.items():
        if key and value and not any(char in key + value for char in _FORBIDDEN_IN_ENVIRONMENT_FILES):
            lines.append(f"{key}={value}\n")
        else:
            logger.warning(f"WARNING: Skipping {key}={value} as it contains forbidden characters or missing values.")
    return lines
