"""accel.tracking: Accelerate's experiment trackers (accelerate.tracking).

Accelerator(log_with=...) chooses them: "tensorboard", accel's "jsonl" and "csv", "all" (every one of
those), LoggerType values, or GeneralTracker objects of one's own; init_trackers starts them, log writes
to each, end_training finishes them. The named ones are files that the library writes, on the main
process, in logging_dir/project_name (one run for all of them: accel._tracker_run.TrackerRun, which is
also what their .tracker gives). Accelerate's other trackers (wandb, comet_ml, aim, mlflow, clearml,
dvclive) are not available in accel: asking for one is UnsupportedError.
"""
import functools

from . import state as state_module
from ._library import lib
from ._tracker_run import TrackerRun, finish_open_runs
from .errors import UnsupportedError
from .utils.dataclasses import LoggerType

# The trackers whose files the library writes: what "all" means here.
LIBRARY_TRACKERS = ("tensorboard", "jsonl", "csv")


def on_main_process(function):
    """Decorates a tracker's method: when the tracker's main_process_only is true, it runs on the main
    process only (None elsewhere), decided at each call."""

    @functools.wraps(function)
    def on_main_process_only(self, *args, **kwargs):
        if getattr(self, "main_process_only", False):
            return state_module.PartialState().on_main_process(function)(self, *args, **kwargs)
        return function(self, *args, **kwargs)

    return on_main_process_only


def get_available_trackers():
    """The trackers that log_with may name here: the library's (LoggerType values)."""
    return [LoggerType(name) for name in LIBRARY_TRACKERS]


class GeneralTracker:
    """The base of every tracker, and of one's own: a subclass defines name (a str), requires_logging_directory
    (whether its constructor takes the logging folder) and a tracker property (the object it writes
    through), and overrides store_init_configuration, log and finish as it needs (the base ones do
    nothing). main_process_only (default True) is what the on_main_process decorator of its methods
    reads. GeneralTracker(_blank=True) is the do-nothing tracker Accelerator.get_tracker gives where there
    are none (off the main process)."""

    main_process_only = True

    def __init__(self, _blank=False):
        if _blank:
            return
        missing = [f"`{attribute}`" for attribute in ("name", "requires_logging_directory")
                   if not hasattr(self, attribute)]
        if "tracker" not in dir(self):  # a property that may need the constructor's work: not called here
            missing.append("`tracker`")
        if missing:
            raise NotImplementedError(f"the tracker class {type(self).__name__} lacks these required attributes: "
                                      f"{', '.join(missing)}; define them in the class")

    def store_init_configuration(self, values):
        """Records values (a dict of bool, str, int, float or None) as the run's hyperparameters."""

    def log(self, values, step, **kwargs):
        """Logs values (a dict of name to value) at step (None: the tracker's own next step)."""

    def finish(self):
        """Ends the tracker's run (Accelerator.end_training)."""


class _LibraryTracker(GeneralTracker):
    """A tracker whose file the library writes, as one format of the run logging_dir/run_name. The
    trackers of one init_trackers call share the run; one made by itself joins the process's Accelerator's
    run in the same folder (or makes a new one), which starts at its first use. Every record logged goes
    to each format of the run.

    Keywords (init_kwargs={name: {...}}): overwrite=True removes the metrics an earlier run left in the run
    folder (otherwise the library resumes after their last step and skips steps up to it)."""

    requires_logging_directory = True
    _writer_keywords = ()  # keywords of Accelerate's writer that accel accepts: nothing to do for them here

    def __init__(self, run_name, logging_dir, **kwargs):
        self._join(TrackerRun.joined(state_module.PartialState()._accelerator, logging_dir, run_name), kwargs)

    @classmethod
    def _in_run(cls, run, **kwargs):
        """The tracker of this format in run (Accelerator.init_trackers builds all of a run's at once)."""
        tracker = cls.__new__(cls)
        tracker._join(run, kwargs)
        return tracker

    def _join(self, run, kwargs):
        unknown = sorted(set(kwargs) - {"overwrite", *self._writer_keywords})
        if unknown:
            accepted = ", ".join(("overwrite", *self._writer_keywords))
            raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
                f"{type(self).__name__} has no keyword {', '.join(map(repr, unknown))} in accel (the library writes "
                f"its file; it takes {accepted})"))
        super().__init__()
        self.run = run
        self.run_name = run.run_name
        self.logging_dir = run.log_dir
        run.add(self.name, kwargs.get("overwrite", False))

    @property
    def tracker(self):
        """The library's run (accel._tracker_run.TrackerRun): log_dir, add_scalar, add_scalars, flush, close."""
        return self.run

    @on_main_process
    def store_init_configuration(self, values):
        """values (a dict) is written as config.json in the run folder."""
        self.run.store_configuration(values)

    @on_main_process
    def log(self, values, step=None):
        """Writes the numbers in values (numbers, one-element tensors or arrays, and dicts of them as
        "name/key") at step; other values are left out with a warning. step None: one after the highest
        step the run wrote (0 at first)."""
        self.run.log(values, step, self.name)

    def finish(self):
        """Closes the run's files (those of the other formats of the run too)."""
        self.run.finish()


class TensorBoardTracker(_LibraryTracker):
    """TensorBoard: an event file (events.out.tfevents.*) of scalars in logging_dir/run_name, written by
    the library, not by torch.utils.tensorboard. Its tracker is the library's run, not a SummaryWriter (see
    _LibraryTracker); the configuration goes to config.json (no hparams). SummaryWriter's flush_secs and
    max_queue are accepted: each record is written as it is logged."""

    name = "tensorboard"
    _writer_keywords = ("flush_secs", "max_queue")


class JSONLTracker(_LibraryTracker):
    """accel's metrics.jsonl in logging_dir/run_name: {"step":..,"wall_time":..,"<name>":<value>,..} per log."""

    name = "jsonl"


class CSVTracker(_LibraryTracker):
    """accel's metrics.csv in logging_dir/run_name: step, wall_time, name, value, a row per number logged."""

    name = "csv"


def unsupported_tracker(name):
    """The error for one of Accelerate's trackers that accel does not have."""
    return UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
        f"the {name} tracker is not available in accel: its trackers are {', '.join(LIBRARY_TRACKERS)} (files the "
        "library writes) and GeneralTracker subclasses of one's own"))


class _UnavailableTracker(GeneralTracker):
    """One of Accelerate's trackers that accel has not: making one is UnsupportedError naming it."""

    requires_logging_directory = False

    def __init__(self, *args, **kwargs):
        raise unsupported_tracker(self.name)


class WandBTracker(_UnavailableTracker):
    name = "wandb"


class CometMLTracker(_UnavailableTracker):
    name = "comet_ml"


class AimTracker(_UnavailableTracker):
    name = "aim"


class MLflowTracker(_UnavailableTracker):
    name = "mlflow"


class ClearMLTracker(_UnavailableTracker):
    name = "clearml"


class DVCLiveTracker(_UnavailableTracker):
    name = "dvclive"


LOGGER_TYPE_TO_CLASS = {tracker.name: tracker for tracker in (
    AimTracker, CometMLTracker, MLflowTracker, TensorBoardTracker, WandBTracker, ClearMLTracker, DVCLiveTracker,
    JSONLTracker, CSVTracker)}


def filter_trackers(log_with, logging_dir=None):
    """Accelerate's filter_trackers: what Accelerator(log_with=...) keeps, in order and without repeats.
    log_with is None (no tracker), or a name, LoggerType or GeneralTracker object, or a list of them;
    "all" stands for every tracker available here (the objects given are kept). ValueError for what is not
    a tracker, and for a library tracker without logging_dir; UnsupportedError for Accelerate's trackers
    that accel has not."""
    if log_with is None:
        return []
    chosen = list(log_with) if isinstance(log_with, (list, tuple)) else [log_with]
    for item in chosen:
        if not isinstance(item, GeneralTracker) and item not in LoggerType:
            raise ValueError(f"Unsupported logging capability: {item!r}. Choose between "
                             f"{', '.join(LIBRARY_TRACKERS)}, 'all' and GeneralTracker objects")
    if any(not isinstance(item, GeneralTracker) and LoggerType(item) is LoggerType.ALL for item in chosen):
        chosen = [item for item in chosen if isinstance(item, GeneralTracker)] + get_available_trackers()
    kept = []
    for item in chosen:
        if not isinstance(item, GeneralTracker):
            item = LoggerType(item)
            if str(item) not in LIBRARY_TRACKERS:
                raise unsupported_tracker(str(item))
            if logging_dir is None:
                raise ValueError(f"Logging with `{item}` requires a `logging_dir` to be passed in: give the "
                                 "Accelerator a project_dir, or a ProjectConfiguration with project_dir or logging_dir")
            if item in kept:
                continue
        kept.append(item)
    return kept


def start_trackers(accelerator, project_name, config=None, init_kwargs=None):
    """Accelerate's init_trackers for accelerator: a tracker for each name in its log_with (init_kwargs[name]:
    its keywords), next to the GeneralTracker objects given there; config (when given) goes to each
    tracker's store_init_configuration; then the library's run in accelerator.logging_dir/project_name
    starts. Returns what accelerator.trackers becomes on the main process: the trackers it had (less those
    of a run that ended or is started again here) and these. Elsewhere the library only checks the
    arguments and accelerator.trackers stays as it is (empty), as Accelerate starts trackers on the main
    process only."""
    init_kwargs = init_kwargs or {}
    run = None
    started = []
    for chosen in accelerator.log_with:
        if isinstance(chosen, GeneralTracker):
            started.append(chosen)
            continue
        if run is None:
            run = TrackerRun.joined(accelerator, accelerator.logging_dir, project_name)
        started.append(LOGGER_TYPE_TO_CLASS[str(chosen)]._in_run(run, **init_kwargs.get(str(chosen), {})))
    if accelerator.is_main_process and config is not None:
        for tracker in started:
            tracker.store_init_configuration(config)
    for tracker in started:
        if isinstance(tracker, _LibraryTracker):
            tracker.run.start()
    if not accelerator.is_main_process:
        return accelerator.trackers
    kept = [tracker for tracker in accelerator.trackers
            if not (isinstance(tracker, _LibraryTracker) and (tracker.run.finished or tracker.run is run))]
    return kept + started


def find_tracker(trackers, name, unwrap=False):
    """Accelerate's get_tracker: the tracker called name among trackers (its .tracker when unwrap);
    ValueError when there is none of that name; with no trackers at all (off the main process), a
    do-nothing GeneralTracker."""
    if not trackers:
        return GeneralTracker(_blank=True)
    for tracker in trackers:
        if tracker.name == name:
            return tracker.tracker if unwrap else tracker
    raise ValueError(f"{name} is not an available tracker stored inside the `Accelerator` (it has "
                     f"{', '.join(tracker.name for tracker in trackers)})")


def end_trackers(accelerator):
    """Finishes each of accelerator.trackers, then the library's run, where one was started (every process
    has one: there, the library checked init_trackers' arguments)."""
    for tracker in accelerator.trackers:
        tracker.finish()
    finish_open_runs(accelerator)


def logging_dir_of(project_config, project_dir):
    """Accelerate's Accelerator.logging_dir: the ProjectConfiguration's logging_dir (which defaults to its
    project_dir), else project_dir (None: file-writing trackers cannot be chosen)."""
    logging_dir = None if project_config is None else project_config.logging_dir
    return project_dir if logging_dir is None else logging_dir
