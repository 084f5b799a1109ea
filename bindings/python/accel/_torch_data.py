"""Accelerate's samplers and dataset shards over torch's own samplers and datasets, for accel.data_loader:
SeedableRandomSampler, BatchSamplerShard, IterableDatasetShard, SkipBatchSampler, and the batches
DataLoaderDispatcher deals (dispatched_batches). They give Accelerate's answers (the same indices on the
same ranks; docs: /work/shared/reference/accelerate-semantics.md 1.2-1.11, the same rules
src/data/dealing.cpp follows in the library) for any num_processes and process_index, so they also
serve where the library's loader cannot see the sampler (a sampler of the user's own).
"""
import math

import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler


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
    batch size are needed otherwise)."""

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

    @property
    def total_length(self):
        return len(self.batch_sampler)

    def __len__(self):
        total = len(self.batch_sampler)
        processes = self.num_processes
        if self.split_batches or total % processes == 0:
            return total if self.split_batches else total // processes
        if self.drop_last:
            return total // processes
        if self.even_batches or self.process_index < total % processes:
            return total // processes + 1
        return total // processes

    def __iter__(self):
        return self._split() if self.split_batches else self._deal()

    def _full(self, batch):
        return self.batch_size is None or len(batch) == self.batch_size

    def _split(self):
        share = self.batch_size // self.num_processes
        mine = slice(share * self.process_index, share * (self.process_index + 1))
        first, last = None, []
        for batch in self.batch_sampler:
            first = batch if first is None else first
            last = batch
            if len(batch) == self.batch_size:
                yield batch[mine]
        if self.drop_last or first is None or len(last) == self.batch_size:
            return
        if not self.even_batches:
            if len(last) > mine.start:
                yield last[mine]
            return
        padding = list(first)
        while len(padding) < self.batch_size:
            padding += padding
        yield (list(last) + padding)[mine]

    def _deal(self):
        processes, rank = self.num_processes, self.process_index
        dynamic = self.batch_size is None
        start = []  # the first round: whole batches (dynamic sizes) or their indices, for padding
        mine = None
        index, batch = -1, []
        for index, batch in enumerate(self.batch_sampler):
            if not self.drop_last and index < processes:
                start += [batch] if dynamic else list(batch)
            if index % processes == rank:
                mine = batch
            if index % processes == processes - 1 and self._full(batch):
                yield mine
                mine = None
        if self.drop_last or not start:
            return
        if not self.even_batches:
            if mine:
                yield mine
            return
        if mine and self._full(mine):
            yield mine
        needed = processes if dynamic else processes * self.batch_size
        while len(start) < needed:
            start += start
        if self._full(batch):
            batch, index = [], index + 1
        taken = 0
        while index % processes != 0 or batch:
            if dynamic:
                batch = start[taken]
                taken += 1
            else:
                end = taken + self.batch_size - len(batch)
                batch = list(batch) + start[taken:end]
                taken = end
            if index % processes == rank:
                yield batch
            batch, index = [], index + 1


class IterableDatasetShard(IterableDataset):
    """The items of an iterable dataset that process process_index keeps: every process reads the whole
    stream and keeps its contiguous part of each global batch (batch_size * num_processes items, or
    batch_size with split_batches); without drop_last the last global batch is completed with the first
    one's items."""

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

    def set_epoch(self, epoch):
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self):
        global_batch = self.batch_size * self.num_processes
        if self.drop_last:
            return (len(self.dataset) // global_batch) * self.batch_size
        return math.ceil(len(self.dataset) / global_batch) * self.batch_size

    def __iter__(self):
        generator = getattr(self.dataset, "generator", None)
        if not hasattr(self.dataset, "set_epoch") and isinstance(generator, torch.Generator):
            generator.manual_seed(self.epoch)
        global_batch = self.batch_size if self.split_batches else self.batch_size * self.num_processes
        share = self.batch_size // self.num_processes if self.split_batches else self.batch_size
        mine = slice(self.process_index * share, (self.process_index + 1) * share)
        first, current = None, []
        for item in self.dataset:
            current.append(item)
            if len(current) == global_batch:
                yield from current[mine]
                first = current if first is None else first
                current = []
        if self.drop_last or not current:
            return
        first = list(current) if first is None else first
        while len(current) < global_batch:
            current += first
        yield from current[mine]


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
    indices), as Accelerate's deals them: each step joins num_processes base batches (one with
    split_batches; a last round short of batches too, unless drop_last) and every process takes its equal
    contiguous part; without drop_last, a last step whose rows do not divide evenly is first completed
    with the first num_processes rows of the first step. Returns (this process's batches, the rows of the
    last step before completion: the loader's remainder; -1 when there is no step)."""
    per_step = 1 if split_batches else num_processes
    steps = [[index for batch in base_batches[start:start + per_step] for index in batch]
             for start in range(0, len(base_batches), per_step)]
    if drop_last and not split_batches and len(base_batches) % per_step:
        steps.pop()
    mine = []
    for number, step in enumerate(steps):
        share = len(step) // num_processes
        if number == len(steps) - 1 and not drop_last and len(step) % num_processes:
            step = step + steps[0][:num_processes]
            share += 1
        mine.append(step[share * process_index:share * (process_index + 1)])
    return mine, len(steps[-1]) if steps else -1
