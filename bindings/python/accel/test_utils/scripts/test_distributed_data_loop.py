"""How prepared torch DataLoaders deal batches to every process of a run: with even_batches every process gets
as many full batches (the last global batch completed from the start of the dataset), without it the batches
in turn as they come; join_uneven_inputs as Accelerate has it on this kind of state; an Accelerator pickled
with its loaders; every sample of the dataset gathered exactly once by gather_for_metrics from sequential,
shuffled, batch-sampled and BatchSampler-as-sampler loaders; a loader resumed mid-epoch from its state_dict,
and from a checkpoint written by save_state, giving the very batches the interrupted epoch had left. Run as
a script (`accel launch --nproc-per-node 2 --cpu -m accel.test_utils.scripts.test_distributed_data_loop`) or
through main() (debug_launcher(test_distributed_data_loop.main)); any failure raises."""
import math
import pathlib
import pickle
import shutil
import tempfile
import warnings

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler, TensorDataset
from torch.utils.data import default_collate

from accel import Accelerator
from accel.errors import UnsupportedError
from accel.test_utils.testing import assert_exception
from accel.utils import DataLoaderConfiguration, DistributedType, broadcast_object_list

NUM_SAMPLES = 22
BATCH_SIZE = 4


class IndexedDataset(Dataset):
    """NUM_SAMPLES samples {"index": i, "label": i % 2}; a list of indices gives the list of their samples
    (what a BatchSampler given as the sampler asks for)."""

    def __len__(self):
        return NUM_SAMPLES

    def __getitem__(self, index):
        if isinstance(index, int):
            return {"index": index, "label": index % 2}
        return [self[i] for i in index]


class Stream(IterableDataset):
    """The given values, one at a time."""

    def __init__(self, values):
        self.values = values

    def __iter__(self):
        yield from self.values


def prepared_loader(accelerator, dataset_size, batch_size):
    """A prepared loader over TensorDataset(0 ... dataset_size - 1), in order."""
    return accelerator.prepare(DataLoader(TensorDataset(torch.arange(dataset_size)), batch_size=batch_size))


def expected_batch_sizes(dataset_size, batch_size, accelerator, even_batches):
    """The sizes of this process's batches. The loader's own batches are dealt in turn; with even_batches
    (and several processes) every process gets as many, each full."""
    whole, rest = divmod(dataset_size, batch_size)
    batches = [batch_size] * whole + ([rest] if rest else [])
    processes = accelerator.num_processes
    if even_batches and processes > 1:
        return [batch_size] * math.ceil(len(batches) / processes)
    return batches[accelerator.process_index::processes]


def check_batch_sizes(accelerator, even_batches):
    for dataset_size, batch_size in ((3, 1), (7, 2), (10, 3)):
        sizes = [len(batch[0]) for batch in prepared_loader(accelerator, dataset_size, batch_size)]
        expected = expected_batch_sizes(dataset_size, batch_size, accelerator, even_batches)
        assert sizes == expected, f"{dataset_size} samples by {batch_size}: batches of {sizes}, not {expected}"


def check_even_batches(accelerator):
    """Every process gets as many batches, each full (Accelerate's default even_batches)."""
    check_batch_sizes(accelerator, even_batches=True)


def check_uneven_batches(_accelerator):
    """even_batches=False: the loader's batches in turn, the last ones short or missing on some processes."""
    check_batch_sizes(Accelerator(dataloader_config=DataLoaderConfiguration(even_batches=False)), even_batches=False)


def check_join_uneven_inputs(accelerator):
    """join_uneven_inputs as Accelerate has it on this state: nothing on one process; on CPU processes a
    warning that it has no effect; on several GPUs nothing while even_batches holds, and UnsupportedError
    where Accelerate would join uneven inputs (accel cannot). A training step runs inside."""
    model = accelerator.prepare(torch.nn.Linear(1, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.join_uneven_inputs([model]):
            model(torch.ones(2, 1, device=accelerator.device)).sum().backward()
    said = [str(warning.message) for warning in caught if issubclass(warning.category, UserWarning)]
    if accelerator.distributed_type == DistributedType.MULTI_CPU:
        assert any("only supported for multi-GPU" in message for message in said), said
    else:
        assert not any("join_uneven_inputs" in message for message in said), said
    if accelerator.distributed_type == DistributedType.MULTI_GPU:
        with assert_exception(UnsupportedError, "even_batches=False"):
            with accelerator.join_uneven_inputs([model], even_batches=False):
                pass


def check_pickled_accelerator(accelerator):
    """An Accelerator pickled with a prepared loader comes back on the same state, and its loader deals the
    same batches."""
    loader = prepared_loader(accelerator, 32, 4)
    copy = pickle.loads(pickle.dumps(accelerator))
    for name in ("num_processes", "process_index", "device", "distributed_type", "mixed_precision"):
        assert getattr(copy, name) == getattr(accelerator, name), name
    assert [batch[0].tolist() for batch in copy._dataloaders[-1]] == [batch[0].tolist() for batch in loader]


def sample_loaders():
    """The ways a DataLoader may choose IndexedDataset's batches: in order, shuffled, by a batch sampler,
    and by a BatchSampler given as the sampler (batch_size=None)."""
    dataset = IndexedDataset()
    yield "sequential", DataLoader(dataset, batch_size=BATCH_SIZE)
    yield "shuffled", DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
    yield "batch_sampler", DataLoader(dataset, batch_sampler=BatchSampler(RandomSampler(dataset), BATCH_SIZE, False))
    batches = BatchSampler(RandomSampler(dataset), BATCH_SIZE, False)
    yield "BatchSampler as sampler", DataLoader(dataset, sampler=batches, batch_size=None, collate_fn=default_collate)


def check_every_sample_once(accelerator):
    """gather_for_metrics over an epoch gives each sample of the dataset exactly once, however the loader
    chooses its batches (the samples completing the last global batch are left out)."""
    for name, loader in sample_loaders():
        gathered = []
        for batch in accelerator.prepare(loader):
            indices, _labels = accelerator.gather_for_metrics((batch["index"], batch["label"]))
            gathered.extend(indices.tolist())
        assert sorted(gathered) == list(range(NUM_SAMPLES)), f"{name}: {sorted(gathered)}"


def resumable_loaders(accelerator):
    """Prepared loaders over 32 samples per process, 4 per batch: a stream (dispatched from the main process)
    of a fixed shuffle of the values, and a shuffled map-style dataset."""
    values = torch.randperm(32 * accelerator.num_processes, generator=torch.Generator().manual_seed(0))
    yield "stream", accelerator.prepare(DataLoader(Stream(values), batch_size=BATCH_SIZE))
    yield "shuffled", accelerator.prepare(DataLoader(TensorDataset(values), batch_size=BATCH_SIZE, shuffle=True))


def first_value(batch):
    """The tensor of a batch, whether the loader collates a stream's values or TensorDataset's tuples."""
    return batch[0] if isinstance(batch, (list, tuple)) else batch


def check_resume(accelerator, save, restore):
    """For each resumable loader: save() after the second batch of an epoch, run the epoch to its end,
    restore(), and the loader deals the batches that came after the second again, on every process."""
    for name, loader in resumable_loaders(accelerator):
        left = []
        for index, batch in enumerate(loader):
            if index == 1:
                saved = save(loader)
            elif index > 1:
                left.append(first_value(batch).tolist())
        restore(loader, saved)
        resumed = [first_value(batch).tolist() for batch in loader]
        assert resumed == left, f"{name}: resumed with {resumed}, not {left}"
        assert len(left) > 0, name


def stateful_accelerator():
    return Accelerator(dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=True))


def check_resume_from_state_dict(_accelerator):
    """A loader's state_dict, loaded back with load_state_dict, resumes its epoch where it was taken."""
    check_resume(stateful_accelerator(), lambda loader: loader.state_dict(),
                 lambda loader, state: loader.load_state_dict(state))


def check_resume_from_save_state(_accelerator):
    """save_state with use_stateful_dataloader holds each loader's place; load_state resumes there. A
    checkpoint is one folder every process writes its part into: the main process names it."""
    accelerator = stateful_accelerator()
    folder = [tempfile.mkdtemp() if accelerator.is_main_process else None]
    directory = pathlib.Path(broadcast_object_list(folder)[0]) / "checkpoint"
    try:
        check_resume(accelerator, lambda _loader: accelerator.save_state(directory),
                     lambda _loader, _saved: accelerator.load_state(directory))
    finally:
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            shutil.rmtree(directory.parent)


def main():
    accelerator = Accelerator()
    accelerator.print(f"test_distributed_data_loop on {accelerator.num_processes} processes")
    for check in (check_even_batches, check_uneven_batches, check_join_uneven_inputs, check_pickled_accelerator,
                  check_every_sample_once, check_resume_from_state_dict, check_resume_from_save_state):
        accelerator.print(check.__name__)
        check(accelerator)
    accelerator.end_training()


if __name__ == "__main__":
    main()
