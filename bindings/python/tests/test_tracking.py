"""Trackers (Accelerate's tracking API), print, the progress bar, split_between_processes and send_to_device
on one process."""
import json

import numpy as np
import pytest
import torch

import accel
from accel.tracking import (LOGGER_TYPE_TO_CLASS, CometMLTracker, CSVTracker, GeneralTracker, JSONLTracker,
                            TensorBoardTracker, on_main_process)
from accel.utils import LoggerType, ProjectConfiguration


class RecordingTracker(GeneralTracker):
    """A tracker of one's own, as Accelerate's users write them: it keeps what it was given."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self):
        super().__init__()
        self.calls = []

    @property
    def tracker(self):
        return self.calls

    @on_main_process
    def store_init_configuration(self, values):
        self.calls.append(("config", values))

    @on_main_process
    def log(self, values, step=None, **kwargs):
        self.calls.append(("log", values, step, kwargs))

    def finish(self):
        self.calls.append(("finish",))


def jsonl_records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_tracker_of_ones_own_gets_the_config_the_logs_and_the_finish(make_accelerator):
    recorder = RecordingTracker()
    accelerator = make_accelerator(log_with=recorder)
    accelerator.init_trackers("run", config={"lr": 0.1})
    accelerator.log({"loss": 0.5}, step=3, log_kwargs={"recorder": {"commit": True}, "other": {"commit": False}})
    assert accelerator.trackers == [recorder]
    assert accelerator.get_tracker("recorder") is recorder
    assert accelerator.get_tracker("recorder", unwrap=True) is recorder.calls
    with pytest.raises(ValueError, match="tensorboard is not an available tracker.*recorder"):
        accelerator.get_tracker("tensorboard")
    accelerator.end_training()
    assert recorder.calls == [("config", {"lr": 0.1}), ("log", {"loss": 0.5}, 3, {"commit": True}), ("finish",)]


def test_off_the_main_process_nothing_is_started_or_logged(make_accelerator, monkeypatch):
    recorder = RecordingTracker()
    accelerator = make_accelerator(log_with=[recorder])
    monkeypatch.setattr(accel.Accelerator, "is_main_process", property(lambda self: False))
    accelerator.init_trackers("run", config={"lr": 0.1})
    accelerator.log({"loss": 0.5}, step=0)
    assert recorder.log({"loss": 1.0}, step=1) is None  # main_process_only: the decorator skips it
    assert accelerator.trackers == [] and recorder.calls == []
    blank = accelerator.get_tracker("recorder")
    assert type(blank) is GeneralTracker and blank.log({"loss": 1.0}, step=0) is None


def test_without_log_with_nothing_is_written_anywhere(make_accelerator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    accelerator = make_accelerator(project_dir=tmp_path / "project")
    accelerator.init_trackers("run", config={"lr": 0.1})
    accelerator.log({"loss": 1.0}, step=0)
    accelerator.end_training()
    assert accelerator.trackers == [] and list(tmp_path.iterdir()) == []


def test_library_trackers_write_their_files_in_the_logging_dir_once_each(make_accelerator, tmp_path):
    accelerator = make_accelerator(log_with=["tensorboard", LoggerType.JSONL, "csv"], project_dir=tmp_path)
    accelerator.init_trackers("run", config={"lr": 0.1, "name": "mlp"})
    assert [type(tracker) for tracker in accelerator.trackers] == [TensorBoardTracker, JSONLTracker, CSVTracker]
    for step in range(3):
        accelerator.log({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
    accelerator.log({"loss": 0.125})  # step None: the one after the last
    writer = accelerator.get_tracker("tensorboard", unwrap=True)
    assert writer.log_dir == str(tmp_path / "run")
    writer.add_scalars("accuracy", {"train": 0.5, "test": 0.25}, global_step=4)
    accelerator.end_training()
    run = tmp_path / "run"
    assert [(line["step"], line["loss"]) for line in jsonl_records(run)[:4]] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3),
                                                                                 (3, 0.125)]
    added = jsonl_records(run)[4]  # by the run, as a SummaryWriter's add_scalars
    assert (added["step"], added["accuracy/train"], added["accuracy/test"]) == (4, 0.5, 0.25)
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0] == "step,wall_time,name,value" and len(rows) == 1 + 2 * 3 + 1 + 2
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    assert json.loads((run / "config.json").read_text()) == {"lr": 0.1, "name": "mlp"}


@pytest.mark.parametrize("name, written", [("jsonl", "metrics.jsonl"), ("csv", "metrics.csv"),
                                           (LoggerType.TENSORBOARD, "events.out.tfevents.*")])
def test_each_library_tracker_writes_its_own_file_only(make_accelerator, tmp_path, name, written):
    accelerator = make_accelerator(log_with=name, project_dir=tmp_path)
    accelerator.init_trackers("run")
    accelerator.log({"loss": 1.0}, step=0)
    accelerator.end_training()
    run = tmp_path / "run"
    assert [path.name for path in run.iterdir()] == [path.name for path in run.glob(written)]


def test_all_means_every_library_tracker_and_keeps_ones_own(make_accelerator, tmp_path):
    recorder = RecordingTracker()
    accelerator = make_accelerator(log_with=["all", recorder], project_dir=tmp_path)
    assert accelerator.log_with == [recorder, LoggerType.TENSORBOARD, LoggerType.JSONL, LoggerType.CSV]


def test_a_project_configurations_logging_dir_is_where_files_go(make_accelerator, tmp_path):
    config = ProjectConfiguration(project_dir=str(tmp_path / "project"), logging_dir=str(tmp_path / "logs"))
    accelerator = make_accelerator(log_with="jsonl", project_config=config)
    accelerator.init_trackers("run")
    accelerator.log({"loss": 1.0}, step=0)
    accelerator.end_training()
    assert (tmp_path / "logs" / "run" / "metrics.jsonl").exists() and not (tmp_path / "project").exists()


def test_names_that_are_not_trackers_here_are_refused_clearly(make_accelerator, tmp_path):
    with pytest.raises(ValueError, match="Unsupported logging capability: 'jsonlines'"):
        make_accelerator(log_with="jsonlines", project_dir=tmp_path)
    for name in ("wandb", LoggerType.COMETML, "mlflow"):
        with pytest.raises(accel.UnsupportedError, match=f"the {name} tracker is not available in accel"):
            make_accelerator(log_with=["jsonl", name], project_dir=tmp_path)
    with pytest.raises(accel.UnsupportedError, match="comet_ml"):
        CometMLTracker("run")
    with pytest.raises(ValueError, match="Logging with `tensorboard` requires a `logging_dir`"):
        make_accelerator(log_with="tensorboard")
    with pytest.raises(NotImplementedError, match="`name`, `requires_logging_directory`, `tracker`"):
        type("Incomplete", (GeneralTracker,), {})()


def test_init_kwargs_reach_each_tracker_and_overwrite_restarts_the_run(make_accelerator, tmp_path):
    first = make_accelerator(log_with=["jsonl", "tensorboard"], project_dir=tmp_path)
    with pytest.raises(accel.UnsupportedError, match="TensorBoardTracker has no keyword 'comment'"):
        first.init_trackers("run", init_kwargs={"tensorboard": {"comment": "x"}})
    first.init_trackers("run", init_kwargs={"tensorboard": {"flush_secs": 60}})
    first.log({"loss": 1.0}, step=0)
    first.log({"loss": 0.5}, step=1)
    first.end_training()
    resumed = make_accelerator(log_with="jsonl", project_dir=tmp_path)
    resumed.init_trackers("run")
    resumed.log({"loss": 9.0}, step=1)  # the run resumes after step 1: skipped
    resumed.log({"loss": 0.25}, step=2)
    resumed.end_training()
    assert [line["step"] for line in jsonl_records(tmp_path / "run")] == [0, 1, 2]
    fresh = make_accelerator(log_with="jsonl", project_dir=tmp_path)
    fresh.init_trackers("run", init_kwargs={"jsonl": {"overwrite": True}})
    fresh.log({"loss": 2.0}, step=0)
    fresh.end_training()
    assert [(line["step"], line["loss"]) for line in jsonl_records(tmp_path / "run")] == [(0, 2.0)]
    assert not list((tmp_path / "run").glob("events.out.tfevents.*"))


def test_end_training_finishes_the_library_run(make_accelerator, tmp_path):
    accelerator = make_accelerator(log_with="jsonl", project_dir=tmp_path)
    accelerator.init_trackers("run")
    tracker = accelerator.get_tracker("jsonl")
    accelerator.end_training()
    with pytest.raises(accel.InvalidStateError, match="finished .end_training.: init_trackers starts a new run"):
        tracker.log({"loss": 1.0}, step=0)


def test_a_new_run_replaces_the_last_one_and_one_that_fails_to_start_replaces_none(make_accelerator, tmp_path):
    accelerator = make_accelerator(log_with="jsonl", project_dir=tmp_path)
    accelerator.init_trackers("first")
    first = accelerator.get_tracker("jsonl")
    with pytest.raises(accel.InvalidArgumentError, match="not a single directory name"):
        accelerator.init_trackers("a/b")
    accelerator.log({"loss": 1.0}, step=0)
    accelerator.init_trackers("second")
    assert len(accelerator.trackers) == 1 and accelerator.get_tracker("jsonl") is not first
    accelerator.log({"loss": 2.0}, step=0)
    with pytest.raises(accel.InvalidStateError, match="replaced by run 'second'"):
        first.log({"loss": 3.0}, step=1)
    accelerator.end_training()
    assert [[line["loss"] for line in jsonl_records(tmp_path / run)] for run in ("first", "second")] == [[1.0], [2.0]]


def test_values_that_are_not_numbers_are_left_out_with_a_warning(make_accelerator, tmp_path):
    accelerator = make_accelerator(log_with="jsonl", project_dir=tmp_path)
    accelerator.init_trackers("run")
    with pytest.warns(UserWarning, match="'note', a str, is not written"):
        accelerator.log({"loss": torch.tensor(0.5), "count": np.int64(3), "note": "text"}, step=0)
    with pytest.raises(accel.InvalidArgumentError, match="negative"):
        accelerator.log({"loss": 1.0}, step=-1)
    accelerator.end_training()
    assert [(line["loss"], line["count"]) for line in jsonl_records(tmp_path / "run")] == [(0.5, 3.0)]


def test_trackers_made_by_themselves_share_the_run_of_their_folder(make_accelerator, tmp_path):
    make_accelerator()
    board, lines = TensorBoardTracker("run", tmp_path), JSONLTracker("run", tmp_path)
    assert board.tracker is lines.tracker and board.logging_dir == str(tmp_path / "run")
    for tracker in (board, lines):  # what Accelerator.log does: one record, in each file once
        tracker.log({"loss": 1.0}, step=0)
    board.finish()
    assert [line["step"] for line in jsonl_records(tmp_path / "run")] == [0]
    assert len(list((tmp_path / "run").glob("events.out.tfevents.*"))) == 1


def test_logger_type_names_the_trackers_as_accelerates_does():
    assert "tensorboard" in LoggerType and LoggerType.TENSORBOARD in LoggerType and "nope" not in LoggerType
    assert str(LoggerType.COMETML) == "comet_ml" and "jsonl" in LoggerType.list()
    assert set(LOGGER_TYPE_TO_CLASS) == set(LoggerType.list()) - {"all"}


def test_print_and_progress_bar_write_to_stdout(accelerator, capfd):
    accelerator.print("hello", 42)
    with accel.ProgressBar(accelerator, 4, "train") as bar:
        for _ in range(4):
            bar.update(1, loss=0.5)
    out = capfd.readouterr().out
    assert out.startswith("hello 42\n")
    assert "100% [####################] 4/4" in out and "loss 0.5" in out


def test_one_process_keeps_every_item_and_tensors_stay_put(accelerator):
    with accelerator.split_between_processes([1, 2, 3], apply_padding=True) as mine:
        assert mine == [1, 2, 3]
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    with accelerator.split_between_processes(rows) as mine:
        assert mine.tolist() == rows.tolist()
    placed = accelerator.send_to_device(torch.arange(4.0))
    assert isinstance(placed, torch.Tensor) and placed.tolist() == [0.0, 1.0, 2.0, 3.0]
    array = np.arange(3, dtype=np.float32)
    assert np.shares_memory(accelerator.send_to_device(array), array)
