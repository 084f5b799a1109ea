"""The library's run: the files libaccel's trackers write (accel_state_init_trackers, accel_state_log,
accel_state_finish_trackers) into logging_dir/run_name, for accel.tracking's TensorBoardTracker, JSONLTracker
and CSVTracker.

An Accelerator state has one such run, holding every format chosen, so each file has one writer: the
trackers of one run share it, and a record logged through one of them goes to every format of the run.
Accelerator.log hands the same record to each tracker in turn; the run writes it once and lets the
other formats' turns pass.
"""
import json
import numbers
import os
import warnings
import weakref

from ._library import ffi, lib
from .errors import InvalidStateError, check
from .options import Options

# Each Accelerator's runs that have not ended: trackers joining one before it starts, and the one started in
# the library, which the next run to start replaces there.
_open_runs = weakref.WeakKeyDictionary()


def finish_open_runs(accelerator):
    """Finishes the accelerator's runs that have not ended (end_training, on every process)."""
    for run in list(_open_runs.get(accelerator, ())):
        run.finish()


def scalars_of(values):
    """values (Accelerate's log dict) as [(name, float)]: numbers, one-element tensors and arrays, and a
    dict of those as "name/key" (TensorBoard's add_scalars); anything else is left out, in second place of
    the result as [(name, type name)]."""
    scalars, left_out = [], []
    for name, value in values.items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, item in items:
            full_name = str(name) if key is None else f"{name}/{key}"
            number = _number_of(item)
            if number is None:
                left_out.append((full_name, type(item).__name__))
            else:
                scalars.append((full_name, number))
    return scalars, left_out


def _number_of(value):
    if isinstance(value, numbers.Real):
        return float(value)
    count = value.numel() if hasattr(value, "numel") else getattr(value, "size", None)  # torch; numpy
    if count == 1 and hasattr(value, "item") and isinstance(value.item(), numbers.Real):
        return float(value.item())
    return None


class TrackerRun:
    """The library's run of one Accelerator in logging_dir/run_name: the formats its trackers chose
    ("tensorboard", "jsonl", "csv"), the configuration written as config.json and whether an earlier run's
    metrics there are removed first (overwrite; otherwise the library resumes after their last step).

    It starts in the library at start() or at its first use, after every tracker of an init_trackers call
    joined it, so each format opens its file once; a format joining or a configuration stored later
    starts it again (resuming what it wrote). As a tracker's .tracker it is what a SummaryWriter is to
    Accelerate's TensorBoardTracker, as far as the library's writer goes: log_dir, add_scalar,
    add_scalars, flush and close."""

    @classmethod
    def joined(cls, accelerator, logging_dir, run_name):
        """The accelerator's run in logging_dir/run_name that has not ended, else a new one, which replaces
        the accelerator's started run in the library when it starts."""
        runs = _open_runs.setdefault(accelerator, [])
        for run in runs:
            if run.logging_dir == os.fspath(logging_dir) and run.run_name == run_name:
                return run
        runs.append(cls(accelerator, logging_dir, run_name))
        return runs[-1]

    def __init__(self, accelerator, logging_dir, run_name):
        self._accelerator_reference = weakref.ref(accelerator)  # weak: _open_runs must not keep it alive
        self.logging_dir = os.fspath(logging_dir)
        self.run_name = run_name
        self.formats = []
        self.overwrite = False
        self.started = self.finished = False
        self._ended_by = None  # why a finished run ended, for the error of its later use
        self._config_json = None
        self._last_step = None  # the highest step this run wrote, for log(step=None)
        self._last_record = None  # (record, formats that had it): Accelerator.log's other turns pass
        self._reported = set()  # names of values left out, warned about once

    @property
    def _accelerator(self):
        accelerator = self._accelerator_reference()
        if accelerator is None:
            raise ValueError(f"the Accelerator of tracker run {self.run_name!r} is gone")
        return accelerator

    @property
    def log_dir(self):
        """The run directory, where the files are (SummaryWriter's log_dir)."""
        return os.path.join(self.logging_dir, self.run_name)

    def add(self, format_name, overwrite=False):
        """Makes format_name ("tensorboard", "jsonl", "csv") one of the run's files; overwrite: remove an
        earlier run's metrics in the directory when the run starts."""
        if overwrite and self.started:
            raise ValueError(f"overwrite=True for {format_name}: the run in {self.log_dir} has already started "
                             "(overwrite applies when a run starts: give it to every tracker of init_trackers)")
        self.overwrite = self.overwrite or bool(overwrite)
        if format_name not in self.formats:
            self.formats.append(format_name)
            if self.started:
                self._start()

    def store_configuration(self, values):
        """values (a dict) becomes config.json in the run directory, written by the library."""
        try:
            config_json = json.dumps(values)
        except (TypeError, ValueError) as error:
            raise TypeError(f"the configuration of run {self.run_name!r} must be JSON (numbers, strings, bools, "
                            f"None, lists and dicts of them): {error}") from None
        if config_json != self._config_json:
            self._config_json = config_json
            if self.started:
                self._start()

    def start(self):
        """Starts the run in the library now (once; later calls do nothing)."""
        if not self.started:
            self._start()

    def _start(self):
        if self.finished:
            raise InvalidStateError(lib.ACCEL_ERR_INVALID_STATE, (
                f"the trackers of run {self.run_name!r} in {self.logging_dir} were {self._ended_by}: init_trackers "
                "starts a new run"))
        settings = {"log_with": ",".join(self.formats), "overwrite": self.overwrite and not self.started}
        config = ffi.NULL if self._config_json is None else self._config_json.encode()
        with Options(settings) as options:
            check(lib.accel_state_init_trackers(self._accelerator.pointer, self.logging_dir.encode(),
                                                self.run_name.encode(), config, options.pointer))
        for previous in list(_open_runs.get(self._accelerator, ())):
            if previous.started and previous is not self:
                # The library closed its files as this run replaced it (a run that fails to start replaces none).
                previous._end(f"replaced by run {self.run_name!r} in {self.logging_dir}")
        self.started = True
        self._last_record = None

    def log(self, values, step=None, format_name=None):
        """Writes the numbers in values at step (None: one after the highest step this run wrote, 0 at
        first) to every format. When the record before was the same values at the same step, handed to
        another format (format_name) than this one, it is already written: nothing is written again."""
        scalars, left_out = scalars_of(values)
        self._warn_left_out(left_out)
        record = (step, tuple((name, value.hex()) for name, value in scalars))
        last = self._last_record
        if format_name is not None and last is not None and last[0] == record and format_name not in last[1]:
            last[1].add(format_name)
            return
        if self.finished or not self.started:
            self._start()  # starts it, or raises naming why it ended
        if step is None:
            step = 0 if self._last_step is None else self._last_step + 1
        names = [ffi.new("char[]", name.encode()) for name, _ in scalars]
        check(lib.accel_state_log(self._accelerator.pointer, ffi.new("const char *[]", names),
                                  ffi.new("double[]", [value for _, value in scalars]), len(names), step))
        self._last_step = step if self._last_step is None else max(self._last_step, step)
        self._last_record = None if format_name is None else (record, {format_name})

    def _warn_left_out(self, left_out):
        for name, kind in left_out:
            if name not in self._reported:
                self._reported.add(name)
                warnings.warn(f"accel's trackers ({', '.join(self.formats)}) write numbers only: {name!r}, a {kind}, "
                              "is not written")

    def finish(self):
        """Closes the run's files (the library's accel_state_finish_trackers); a second call does nothing."""
        if self.started and not self.finished:
            check(lib.accel_state_finish_trackers(self._accelerator.pointer))
        if not self.finished:
            self._end("finished (end_training)")

    def _end(self, why):
        self.finished, self._ended_by = True, why
        accelerator = self._accelerator_reference()
        runs = _open_runs.get(accelerator, []) if accelerator is not None else []
        if self in runs:
            runs.remove(self)

    # SummaryWriter's names, for code that uses get_tracker("tensorboard", unwrap=True) as one.
    def add_scalar(self, tag, scalar_value, global_step=None):
        """Logs one number at global_step (SummaryWriter.add_scalar), to every format of the run."""
        self.log({tag: scalar_value}, global_step)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None):
        """Logs each number as "main_tag/tag" at global_step (SummaryWriter.add_scalars)."""
        self.log({main_tag: tag_scalar_dict}, global_step)

    def flush(self):
        """Nothing to do: the library writes each record to its files as it is logged."""

    def close(self):
        """Closes the run's files, as finish()."""
        self.finish()
