"""Datasets of every source, and the prepared loader's batches, epochs and positions (one process)."""
import json
import struct

import numpy as np
import pytest

import accel


def _rows(count):
    return {"x": np.arange(count * 2, dtype=np.float32).reshape(count, 2), "y": np.arange(count)}


def _labels(loader):
    return [batch["y"].numpy().tolist() for batch in loader]


def test_batches_are_dicts_of_tensors_and_the_epoch_ends(accelerator):
    loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_tensors(_rows(5)), batch_size=2))
    assert len(loader) == 3 and loader.epoch == 0
    seen = []
    for batch in loader:
        assert sorted(batch) == ["x", "y"] and isinstance(batch["x"], accel.Tensor)
        seen.append((batch["y"].numpy().tolist(), loader.end_of_dataloader))
    assert seen == [([0, 1], False), ([2, 3], False), ([4], True)]
    assert loader.remainder == 1 and loader.epoch == 1  # one real sample in the last global batch


def test_a_bare_dataset_gives_batches_of_one(accelerator):
    assert _labels(accelerator.prepare(accel.Dataset.from_tensors(_rows(2)))) == [[0], [1]]


def test_drop_last_and_explicit_batches(accelerator):
    dataset = accel.Dataset.from_tensors(_rows(5))
    dropping, listed = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=2, drop_last=True),
                                           accel.DataLoaderSpec(dataset, batches=[[4], [0, 2, 1]]))
    assert _labels(dropping) == [[0, 1], [2, 3]]
    assert _labels(listed) == [[4], [0, 2, 1]]


def test_a_seedable_sampler_repeats_its_order(make_accelerator):
    config = accel.DataLoaderConfiguration(use_seedable_sampler=True, data_seed=7)
    accelerator = make_accelerator(dataloader_config=config)
    dataset = accel.Dataset.from_tensors(_rows(16))
    first, second = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=16, shuffle=True),
                                        accel.DataLoaderSpec(dataset, batch_size=16, shuffle=True))
    order = _labels(first)[0]
    assert sorted(order) == list(range(16)) and order != list(range(16))
    assert _labels(second)[0] == order
    assert _labels(first)[0] != order  # the next epoch is seeded data_seed + 1


def test_set_epoch_skip_first_batches_and_resume(accelerator):
    dataset = accel.Dataset.from_tensors(_rows(6))
    loader = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=2))
    loader.set_epoch(3)
    accelerator.skip_first_batches(loader, 1)
    assert _labels(loader) == [[2, 3], [4, 5]] and loader.epoch == 4

    iterator = iter(loader)
    next(iterator)
    saved = loader.state_dict()
    iterator.close()
    resumed = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=2))
    resumed.load_state_dict(saved)
    assert _labels(resumed) == [[2, 3], [4, 5]] and resumed.epoch == 5
    with pytest.raises(accel.InvalidArgumentError):
        resumed.load_state_dict(b"not a state")


def test_a_map_dataset_with_scalar_fields(accelerator):
    class Squares:
        def __len__(self):
            return 3

        def __getitem__(self, index):
            return {"value": index * index, "row": np.full(2, index, dtype=np.float32)}

    loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_map(Squares()), batch_size=3))
    (batch,) = list(loader)
    assert batch["value"].numpy().tolist() == [0, 1, 4] and batch["row"].shape == (3, 2)


def test_an_iterable_dataset_is_told_each_epoch(accelerator):
    class Counting:
        def __init__(self):
            self.epochs = []

        def set_epoch(self, epoch):
            self.epochs.append(epoch)

        def __iter__(self):
            return iter({"y": np.int64(i)} for i in range(3))

    stream = Counting()
    dataset = accel.Dataset.from_iterable(stream)
    loader = accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=2))
    assert _labels(loader) == [[0, 1], [2]] and _labels(loader) == [[0, 1], [2]]
    assert stream.epochs == [0, 1]
    with pytest.raises(TypeError):
        len(loader)
    with pytest.raises(TypeError):
        len(dataset)


def test_npy_and_safetensors_datasets(tmp_path, accelerator):
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
    np.save(tmp_path / "y.npy", np.array([7, 8, 9]))
    from_npy = accel.Dataset.from_npy({"x": tmp_path / "x.npy", "y": str(tmp_path / "y.npy")})
    assert _labels(accelerator.prepare(accel.DataLoaderSpec(from_npy, batch_size=3))) == [[7, 8, 9]]

    labels = np.array([4, 5], dtype=np.int64)
    header = json.dumps({"y": {"dtype": "I64", "shape": [2], "data_offsets": [0, labels.nbytes]}}).encode()
    (tmp_path / "data.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + labels.tobytes())
    from_file = accel.Dataset.from_safetensors(tmp_path / "data.safetensors")
    assert len(from_file) == 2
    assert _labels(accelerator.prepare(accel.DataLoaderSpec(from_file, batch_size=2))) == [[4, 5]]
    with pytest.raises(accel.AccelIOError):
        accel.Dataset.from_safetensors(tmp_path / "missing.safetensors")


def test_samples_must_be_mappings(accelerator):
    class Tuples:
        def __len__(self):
            return 1

        def __getitem__(self, index):
            return (np.zeros(1),)

    loader = accelerator.prepare(accel.Dataset.from_map(Tuples()))
    with pytest.raises(TypeError, match="mapping of field name"):
        list(loader)
