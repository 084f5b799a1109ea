"""Trackers, print, the progress bar, split_between_processes and send_to_device on one process."""
import json

import numpy as np
import pytest
import torch

import accel


def test_trackers_write_every_sink_and_end_training_closes_them(accelerator, tmp_path):
    accelerator.init_trackers("run", config={"lr": 0.1}, project_dir=tmp_path)
    for step in range(3):
        accelerator.log({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
    accelerator.end_training()
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(line["step"], line["loss"]) for line in lines] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    assert (tmp_path / "run" / "metrics.csv").read_text().startswith("step,wall_time,name,value\n")
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == {"lr": 0.1}


def test_log_without_trackers_and_bad_names_are_errors(accelerator, tmp_path):
    with pytest.raises(accel.InvalidStateError, match="init_trackers"):
        accelerator.log({"loss": 1.0}, step=0)
    accelerator.init_trackers("run", project_dir=tmp_path, log_with="jsonl")
    with pytest.raises(accel.InvalidArgumentError, match="negative"):
        accelerator.log({"loss": 1.0}, step=-1)
    with pytest.raises(accel.BadOptionValueError, match="wandb"):
        accelerator.init_trackers("run", project_dir=tmp_path, log_with="wandb")


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
