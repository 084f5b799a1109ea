"""Datasets of every source, and the prepared loader's batches, epochs and positions (one process); and
torch DataLoaders as Accelerate's loader classes take them: prepared batches exactly default_collate's
(dtype, shape, strides, structure), the classes made directly, pickled, and resumed."""
import json
import pickle
import struct

import numpy as np
import pytest

import accel

try:
    import torch
    from torch.utils.data import BatchSampler, DataLoader, IterableDataset, SequentialSampler, TensorDataset
    from torch.utils.data._utils.collate import default_collate
except ImportError:  # the numpy-only tests above still run
    torch = None
else:  # the check against torch's own batches, shared with accelerate_scripts/collated_batches.py
    from accelerate_scripts._torch_checks import same_as_torchs
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


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


# --- torch DataLoaders --------------------------------------------------------------------------------------

def _contiguous(sample):
    if isinstance(sample, torch.Tensor):
        return sample.contiguous()
    if isinstance(sample, dict):
        return {key: _contiguous(value) for key, value in sample.items()}
    if isinstance(sample, list):
        return [_contiguous(value) for value in sample]
    return sample


class _Stream(IterableDataset):
    def __init__(self, samples):
        self.samples = samples

    def __iter__(self):
        return iter(self.samples)


def _datasets():
    """Datasets of several sample shapes and kinds, by name."""
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(10, 1, 8, 8, generator=generator)
    samples = [{"image": images[i, :, :2, :2], "label": i, "weight": i / 4, "flag": i % 3 == 0} for i in range(10)]
    pairs = [(np.full((1, 3), i, dtype=np.float32), np.int32(i), torch.tensor(i % 2 == 0)) for i in range(10)]
    return {
        "images": TensorDataset(images, torch.arange(10)),
        "channels and bools": TensorDataset(torch.randn(10, 3, 4, 4, generator=generator, dtype=torch.float64),
                                            torch.arange(10) % 2 == 0),
        "vectors and int32 scalars": TensorDataset(torch.randn(10, 5, generator=generator),
                                                   torch.arange(10, dtype=torch.int32)),
        "rows of a transposed tensor": TensorDataset(torch.randn(5, 10, generator=generator).t()),
        "size-1 dims": TensorDataset(torch.randn(10, 1, 1, 3, 1, generator=generator)),
        "dicts": samples,
        "tuples": pairs,
        "streamed dicts": _Stream(samples),
        "streamed tuples": _Stream(pairs),
        "streamed images": _Stream(list(images)),
        "streamed scalars": _Stream(list(range(10))),
    }


@needs_torch
@pytest.mark.parametrize("settings", [{"batch_size": 4}, {"batch_size": 3, "drop_last": True},
                                      {"batch_size": 4, "shuffle": True}, {"batch_size": None}],
                         ids=["batches of 4", "drop_last", "shuffled", "no batching"])
def test_prepared_batches_are_default_collates_to_the_strides(accelerator, settings):
    for name, dataset in _datasets().items():
        streamed = isinstance(dataset, IterableDataset)
        if (streamed and settings.get("shuffle")) or (not streamed and settings["batch_size"] is None):
            continue  # torch refuses to shuffle a stream; accel refuses unbatched map-style loaders (below)
        torch.manual_seed(5)
        expected = list(DataLoader(dataset, **settings))
        if settings["batch_size"] is None:  # torch hands out the sample's own tensors; accel a contiguous copy
            expected = [_contiguous(sample) for sample in expected]
        torch.manual_seed(5)
        prepared = accelerator.prepare(DataLoader(dataset, **settings))
        got = list(prepared)
        assert len(got) == len(expected), name
        for index, (ours, theirs) in enumerate(zip(got, expected)):
            same_as_torchs(ours, theirs, f"{name}, batch {index}")


@needs_torch
def test_a_cnns_outputs_and_gradients_over_a_prepared_batch_are_torchs(accelerator):
    # A [32, 1, 8, 8] batch strided (64, 1, 8, 1) is also channels-last to torch 1.13: its convolution then
    # gives a channels-last output, whose BatchNorm sums in another order than over (64, 64, 8, 1).
    images = torch.randn(40, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(2)
    network = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
    ours = next(iter(accelerator.prepare(DataLoader(TensorDataset(images), batch_size=32))))[0]
    theirs = next(iter(DataLoader(TensorDataset(images), batch_size=32)))[0]
    results = []
    for batch in (ours, theirs):
        network.zero_grad()
        output = network(batch)
        output.square().sum().backward()
        results.append((output.detach(), network[0].weight.grad.clone()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@needs_torch
def test_accelerates_loader_classes_made_directly(accelerator):
    from accel.data_loader import DataLoaderDispatcher, DataLoaderShard, DataLoaderStateMixin, SkipDataLoader
    shard = DataLoaderShard(list(range(16)), batch_size=4)
    dispatcher = DataLoaderDispatcher(range(16), batch_size=4)
    skipping = SkipDataLoader(list(range(16)), batch_size=4, skip_batches=2)
    for loader in (shard, dispatcher, skipping):
        assert isinstance(loader, DataLoader) and isinstance(loader, DataLoaderStateMixin)
        assert isinstance(loader.base_dataloader, DataLoader)
    assert isinstance(shard, DataLoaderShard) and isinstance(dispatcher, DataLoaderDispatcher)
    with pytest.raises(AttributeError):
        DataLoaderShard.base_dataloader
    for loader in (shard, dispatcher):
        for _ in range(2):  # every epoch alike
            ends = [(batch.tolist(), loader.end_of_dataloader) for batch in loader]
            assert ends == [([0, 1, 2, 3], False), ([4, 5, 6, 7], False), ([8, 9, 10, 11], False),
                            ([12, 13, 14, 15], True)]
    assert [batch.tolist() for batch in skipping] == [[8, 9, 10, 11], [12, 13, 14, 15]] and len(skipping) == 2
    every_epoch = DataLoaderShard(list(range(6)), batch_size=2, skip_batches=1)
    assert [batch.tolist() for batch in every_epoch] == [[2, 3], [4, 5]] == [batch.tolist() for batch in every_epoch]
    unbatched = DataLoaderShard(list(range(3)), batch_size=None)
    assert list(unbatched) == [0, 1, 2]  # torch's default_convert leaves numbers as they are


@needs_torch
def test_the_gradient_state_follows_the_loader_in_its_epoch(accelerator):
    from accel.data_loader import DataLoaderShard, SkipDataLoader
    state = accelerator.gradient_state
    shard = DataLoaderShard(list(range(10)), batch_size=4)
    assert state.active_dataloader is None
    for index, _ in enumerate(shard):
        assert state.active_dataloader is shard and state.remainder == 10 % 4
        assert state.end_of_dataloader == (index == 2)
        for _ in SkipDataLoader(list(range(4)), batch_size=2, skip_batches=1):
            assert state.active_dataloader is not shard and not state.end_of_dataloader
        assert state.active_dataloader is shard
    assert state.active_dataloader is None
    shard.begin()
    shard.end_of_dataloader = True
    shard.reset()
    assert (shard.end_of_dataloader, shard.remainder) == (False, -1) and state.active_dataloader is shard
    shard.end()
    assert state.active_dataloader is None


@needs_torch
def test_a_batch_sampler_given_as_sampler_without_batch_size(accelerator):
    class Rows:
        """A dataset reading a whole list of indices at once, as the sampler hands them."""

        def __len__(self):
            return 10

        def __getitem__(self, indices):
            return [{"index": index, "square": float(index * index)} for index in indices]

    def make():
        return DataLoader(Rows(), sampler=BatchSampler(SequentialSampler(range(10)), 4, False), batch_size=None,
                          collate_fn=default_collate)

    got = list(accelerator.prepare(make()))
    expected = list(make())
    assert len(got) == len(expected) == 3
    for ours, theirs in zip(got, expected):
        same_as_torchs(ours, theirs)
    with pytest.raises(ValueError, match="batch_size=None"):
        accelerator.prepare(DataLoader(list(range(4)), batch_size=None))


def _rows_of(batches):
    return [(batch[0] if isinstance(batch, list) else batch).tolist() for batch in batches]


@needs_torch
@pytest.mark.parametrize("make", [lambda: DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3),
                                  lambda: DataLoader(list(range(10)), batch_size=3, shuffle=True)],
                         ids=["planned by the library", "planned in Python"])
def test_prepared_loaders_pickle_and_resume_from_their_place(accelerator, make):
    torch.manual_seed(3)
    loader = accelerator.prepare(make())
    iterator = iter(loader)
    first = next(iterator)
    copy = pickle.loads(pickle.dumps(loader))  # mid-epoch: the copy goes on from there
    saved = loader.state_dict()
    rest = list(iterator)
    assert type(copy) is type(loader) and len(loader) == 4
    assert _rows_of(copy) == _rows_of(rest)
    resumed = accelerator.prepare(make())
    resumed.load_state_dict(saved)
    assert _rows_of(resumed) == _rows_of(rest)
    assert resumed.iteration == loader.iteration == 1 and len(_rows_of([first])[0]) == 3
    assert len(_rows_of(pickle.loads(pickle.dumps(loader)))) == 4  # between epochs: a whole epoch


@needs_torch
def test_dispatched_batches_are_accelerates():
    from accel._torch_data import dispatched_batches
    base = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert dispatched_batches(base, 2, 0) == ([[0, 1, 2], [6, 7]], 4)
    assert dispatched_batches(base, 2, 1) == ([[3, 4, 5], [8, 9]], 4)
    uneven = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10]]  # 5 rows in the last step: completed with 0, 1
    assert dispatched_batches(uneven, 2, 1) == ([[3, 4, 5], [9, 10, 0]], 5)
    short_round = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert dispatched_batches(short_round, 2, 1, drop_last=True) == ([[3, 4, 5]], 6)
    assert dispatched_batches(short_round, 2, 1) == ([[3, 4, 5], [8, 0]], 3)  # [6, 7, 8] completed with 0, 1
    assert dispatched_batches([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], 2, 1, split_batches=True) == (
        [[2, 3], [6, 7], [9]], 2)
