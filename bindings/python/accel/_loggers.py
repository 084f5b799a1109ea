"""The loggers accel's own modules write to, under Accelerate's names (accel.utils.modeling writes to
"accelerate.utils.modeling"), so that a logging configuration written for Accelerate applies unchanged."""
import logging


def library_logger_name(module_name):
    """Accelerate's name for the logger of accel's module module_name ("accel...")."""
    return "accelerate" + module_name[len("accel"):]


def library_logger(module_name):
    return logging.getLogger(library_logger_name(module_name))
