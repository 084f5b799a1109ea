"""accel.logging: Accelerate's get_logger, a logger that knows the processes.

    logger = get_logger(__name__)
    logger.info("once, from the main process of each node")
    logger.info("from every process", main_process_only=False)
    logger.info("every process, one after the other", main_process_only=False, in_order=True)
"""
import logging
import os

from . import state


class MultiProcessAdapter(logging.LoggerAdapter):
    """A logging.LoggerAdapter whose calls take two more keywords: main_process_only (default True: only the
    local main process of each node logs) and in_order (every process logs in turn, process 0 first, with a
    barrier between turns: collective, so every process must make the call)."""

    @staticmethod
    def _state():
        if state._live_accelerator() is None:
            raise RuntimeError("You must initialize the accelerate state by calling either `PartialState()` or "
                               "`Accelerator()` before using the logging utility.")
        return state.PartialState()

    def log(self, level, msg, *args, **kwargs):
        main_process_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        # The record names the caller of logger.info(...) and the like, not this method (logging skips its
        # own frames but not ours); a stacklevel the caller gives still wins.
        kwargs.setdefault("stacklevel", 2)
        if not self.isEnabledFor(level):
            return
        state = self._state()
        if main_process_only:
            if state.local_process_index == 0:
                msg, kwargs = self.process(msg, kwargs)
                self.logger.log(level, msg, *args, **kwargs)
        elif in_order:
            for turn in range(state.num_processes):
                if turn == state.process_index:
                    msg, kwargs = self.process(msg, kwargs)
                    self.logger.log(level, msg, *args, **kwargs)
                state.wait_for_everyone()
        else:
            msg, kwargs = self.process(msg, kwargs)
            self.logger.log(level, msg, *args, **kwargs)

    def warning_once(self, *args, **kwargs):
        """warning, only the first time these arguments are given (Accelerate caches the same way)."""
        key = repr((args, sorted(kwargs.items())))
        if key not in _warned:
            _warned.add(key)
            self.warning(*args, **{"stacklevel": 3, **kwargs})  # the record names warning_once's caller


_warned = set()


def get_logger(name, log_level=None):
    """A MultiProcessAdapter over logging.getLogger(name). log_level (or the ACCELERATE_LOG_LEVEL environment
    variable when None) sets the logger's level, as Accelerate's does; neither leaves logging's."""
    if log_level is None:
        log_level = os.environ.get("ACCELERATE_LOG_LEVEL", None)
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})
