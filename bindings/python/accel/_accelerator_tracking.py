"""The Accelerator's tracking glue: the trackers log_with chose, started, found and logged to."""
from . import tracking


class TrackingMixin:
    """init_trackers, get_tracker and log, over accel.tracking."""

    def init_trackers(self, project_name, config=None, init_kwargs={}):
        """Starts every tracker log_with chose (accel.tracking): the library's files (tensorboard, jsonl,
        csv) in logging_dir/project_name, on the main process; config (a dict) goes to each tracker's
        store_init_configuration (the library writes config.json); init_kwargs[name]: keywords for the
        tracker called name (the library's take overwrite=True: remove what an earlier run logged there,
        instead of resuming after its last step)."""
        self.trackers = tracking.start_trackers(self, project_name, config, init_kwargs)

    def get_tracker(self, name, unwrap=False):
        """The tracker called name (its .tracker when unwrap; for the library's trackers, the run that writes
        their files); ValueError if there is none of that name. Off the main process, where there are no
        trackers, a GeneralTracker that does nothing."""
        return tracking.find_tracker(self.trackers, name, unwrap)

    def log(self, values, step=None, log_kwargs={}):
        """Logs values (a dict of name to number) at step to every tracker, on the main process;
        log_kwargs[name]: keywords for the log of the tracker called name."""
        if self.is_main_process:
            for tracker in self.trackers:
                tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))
