"""Handles are freed by close(), by `with`, or by garbage collection, in any order."""
import gc

import numpy as np
import pytest

import accel
from tiny_models import MLP, scripted_bytes


def _dataset():
    return accel.Dataset.from_tensors({"x": np.arange(8, dtype=np.float32).reshape(4, 2),
                                       "y": np.arange(4)})


def test_with_closes_and_a_closed_object_refuses_use():
    with _dataset() as dataset:
        assert len(dataset) == 4
    assert dataset.closed
    with pytest.raises(ValueError, match="Dataset is closed"):
        len(dataset)


def test_a_loader_outlives_its_dataset_and_its_accelerator(make_accelerator):
    accelerator = make_accelerator()
    dataset = _dataset()
    loader = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=2))
    dataset.close()
    accel.Accelerator.__del__(accelerator)  # what garbage collection does: the state handle only
    assert [batch["y"].numpy().tolist() for batch in loader] == [[0, 1], [2, 3]]


def test_a_loader_keeps_python_callbacks_alive():
    class Squares:
        def __len__(self):
            return 3

        def __getitem__(self, index):
            return {"x": np.array([index * index], dtype=np.int64)}

    with accel.Accelerator(cpu=True) as accelerator:
        loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_map(Squares()), batch_size=3))
        gc.collect()  # the Dataset object is gone; its callbacks must not be
        assert [batch["x"].numpy().ravel().tolist() for batch in loader] == [[0, 1, 4]]
        accelerator.end_training()


def test_an_optimizer_and_scheduler_outlive_the_model_handle(accelerator):
    model, optimizer, scheduler = accelerator.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd", lr=0.5),
                                                      accel.SchedulerSpec("constant"))
    model.close()
    optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr() == [0.5]


def test_closing_the_accelerator_closes_what_it_prepared():
    accelerator = accel.Accelerator(cpu=True)
    model, loader = accelerator.prepare(scripted_bytes(MLP), _dataset())
    accelerator.end_training()
    accelerator.close()
    assert accelerator.closed and model.closed and loader.closed
    assert repr(accelerator) == "accel.Accelerator(closed)"
