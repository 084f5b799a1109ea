"""Accelerate's samplers and dataset shards over torch's own samplers and datasets, for accel.data_loader:
SeedableRandomSampler, BatchSamplerShard, IterableDatasetShard, SkipBatchSampler, and the batches
DataLoaderDispatcher deals (dispatched_batches). They give Accelerate's answers (the same indices on the
same ranks, for any num_processes and process_index) by dealing through the library (accel.dealing: the
code its own loader and `accel shard-plan` run), so they also serve where the library's loader cannot see
the sampler (a sampler of the user's own).
"""
import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler

from .dealing import Dealer, deal, deal_all


class SeedableRandomSampler(RandomSampler):
    """A RandomSampler whose epoch e draws the permutation of a generator seeded with initial_seed + e
    (initial_seed: data_seed, else torch's initial seed when it is made), the same on every process
    without any communication. set_epoch(e) chooses the epoch; a finished pass moves to the next."""

    def __init__(self, *args, data_seed=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch = 0
        self.initial_seed = data_seed if data_seed is not None else torch.random.initial_seed()

    def __iter__(self):
        if self.generator is None:
            self.generator = torch.Generator()
        self.generator.manual_seed(self.initial_seed + self.epoch)
        yield from super().__iter__()
        self.set_epoch(self.epoch + 1)

    def set_epoch(self, epoch):
        self.epoch = epoch


class BatchSamplerShard(BatchSampler):
    """The batches of batch_sampler that process process_index of num_processes yields, as Accelerate deals
    them: whole batches round-robin (or, with split_batches, a contiguous slice of every batch), a batch
    yielded only once every process has a full one, and with even_batches the last round completed with
    indices from the start so every process yields as many batches (drop_last, read from batch_sampler,
    drops the incomplete round instead). A batch_sampler without batch_size (a list of lists) has dynamic
    batch sizes: whole early batches are reused for padding (split_batches and, for even_batches, a
    batch size are needed otherwise). The library deals (accel.dealing); len() is the number of batches
    this process really yields."""

    def __init__(self, batch_sampler, num_processes=1, process_index=0, split_batches=False, even_batches=True):
        batch_size = getattr(batch_sampler, "batch_size", None)
        if split_batches and (batch_size is None or batch_size % num_processes != 0):
            raise ValueError(f"To use `BatchSamplerShard` in `split_batches` mode, the batch size ({batch_size}) "
                             f"needs to be a round multiple of the number of processes ({num_processes}).")
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.batch_size = batch_size
        self.drop_last = getattr(batch_sampler, "drop_last", False)

    def _dealer(self):
        return Dealer.shard(self.batch_size, self.drop_last, self.num_processes, self.process_index,
                            self.split_batches, self.even_batches)

    @property
    def total_length(self):
        return len(self.batch_sampler)

    def __len__(self):
        with self._dealer() as dealer:
            return dealer.length(len(self.batch_sampler), self._last_batch_size())

    def _last_batch_size(self):
        """The size of the base sampler's last batch: read from its sampler's length when it has one, else
        taken as full (0 for dynamic sizes, where it plays no part)."""
        if self.batch_size is None:
            return 0
        try:
            short = len(self.batch_sampler.sampler) % self.batch_size
        except (AttributeError, TypeError):
            short = 0
        return short if short and not self.drop_last else self.batch_size

    def __iter__(self):
        with self._dealer() as dealer:
            yield from deal(dealer, self.batch_sampler)


class IterableDatasetShard(IterableDataset):
    """The items of an iterable dataset that process process_index keeps: every process reads the whole
    stream and keeps its contiguous part of each global batch (batch_size * num_processes items, or
    batch_size with split_batches); without drop_last the last global batch is completed with the first
    one's items. The library deals (accel.dealing); len() is the number of items this process really
    yields."""

    def __init__(self, dataset, batch_size=1, drop_last=False, num_processes=1, process_index=0, split_batches=False):
        if split_batches and batch_size > 1 and batch_size % num_processes != 0:
            raise ValueError(f"To use `IterableDatasetShard` in `split_batches` mode, the batch size ({batch_size}) "
                             f"needs to be a round multiple of the number of processes ({num_processes}).")
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.epoch = 0

    def _dealer(self):
        return Dealer.iterable(self.batch_size, self.drop_last, self.num_processes, self.process_index,
                               self.split_batches)

    def set_epoch(self, epoch):
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self):
        items_per_batch = self.batch_size // self.num_processes if self.split_batches else self.batch_size
        with self._dealer() as dealer:
            return dealer.length(len(self.dataset)) * items_per_batch

    def __iter__(self):
        generator = getattr(self.dataset, "generator", None)
        if not hasattr(self.dataset, "set_epoch") and isinstance(generator, torch.Generator):
            generator.manual_seed(self.epoch)
        with self._dealer() as dealer:
            for batch in deal(dealer, ([item] for item in self.dataset)):
                yield from batch


class SkipBatchSampler(BatchSampler):
    """The batches of batch_sampler after its first skip_batches."""

    def __init__(self, batch_sampler, skip_batches=0):
        self.batch_sampler = batch_sampler
        self.skip_batches = skip_batches

    def __iter__(self):
        for index, batch in enumerate(self.batch_sampler):
            if index >= self.skip_batches:
                yield batch

    @property
    def total_length(self):
        return len(self.batch_sampler)

    def __len__(self):
        return len(self.batch_sampler) - self.skip_batches


def dispatched_batches(base_batches, num_processes, process_index, split_batches=False, drop_last=False):
    """What DataLoaderDispatcher gives process process_index from these base batches (lists of dataset
    indices), as the library deals them (accel.dealing). Returns (this process's batches, the rows of the
    last step before completion: the loader's remainder; -1 when there is no step)."""
    with Dealer.dispatch(num_processes, process_index, split_batches, drop_last) as dealer:
        return deal_all(dealer, base_batches), dealer.remainder
