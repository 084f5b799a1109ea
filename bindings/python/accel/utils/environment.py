"""accel.utils.environment: Accelerate's patch_environment and clear_environment, context managers that
change os.environ for the length of a block and put it back as it was afterwards, and the helpers that read
and write environment settings."""
import contextlib
import os

from .._loggers import library_logger
from .._environment import clear_environment, str_to_bool  # noqa: F401 (accel.utils names)

logger = library_logger(__name__)

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
