"""Accelerate's DataLoaderShard (each process reads its batches) and DataLoaderDispatcher (rank 0 reads)."""
import torch
from torch.utils.data import BatchSampler, IterableDataset

from ._torch_data import dispatched_batches
from .dealing import Dealer
from ._torch_loader import PreparedLoader
from .utils.random import synchronize_rng_states


class DataLoaderShard(PreparedLoader):
    """Each process reads its own batches (Accelerate's DataLoaderShard): those of
    DataLoader(dataset, **kwargs), on device when one is given; rng_types ("generator", "torch", "cuda")
    are taken from the main process at the start of each epoch (synchronized_generator is the "generator");
    every epoch skips its first skip_batches batches."""

    def __init__(self, dataset, device=None, rng_types=None, synchronized_generator=None, skip_batches=0,
                 use_stateful_dataloader=False, _drop_last=False, _non_blocking=False, **kwargs):
        super().__init__(dataset, skip_batches, use_stateful_dataloader, _drop_last, _non_blocking, **kwargs)
        self.device = device
        self.rng_types = rng_types
        self.synchronized_generator = synchronized_generator
        if isinstance(self.dataset, IterableDataset):
            self._plan_iterable(dispatch=False)

    @property
    def total_batch_size(self):
        batch_sampler = self.sampler if isinstance(self.sampler, BatchSampler) else self.batch_sampler
        if getattr(batch_sampler, "split_batches", False):
            return batch_sampler.batch_size
        return batch_sampler.batch_size * getattr(batch_sampler, "num_processes", 1)

    def _target_device(self):
        return None if self.device is None else torch.device(self.device)

    def _synchronize_rngs(self):
        # The library takes the main process's generators itself for the epochs it plans.
        if self.rng_types is not None and self._library_plan is None:
            synchronize_rng_states(self.rng_types, self.synchronized_generator)

    def _draw(self):
        return self._keys()


class DataLoaderDispatcher(PreparedLoader):
    """Rank 0 reads the batches of DataLoader(dataset, **kwargs) and every process gets its part
    (Accelerate's DataLoaderDispatcher): num_processes base batches a step, or one with split_batches,
    each process taking its equal contiguous rows, on the state's device. accel slices the rows itself:
    slice_fn must be None."""

    def __init__(self, dataset, split_batches=False, skip_batches=0, use_stateful_dataloader=False,
                 _drop_last=False, _non_blocking=False, slice_fn=None, **kwargs):
        if slice_fn is not None:
            raise ValueError("DataLoaderDispatcher: accel slices each process's rows itself; a slice_fn of one's own "
                             "is not supported")
        super().__init__(dataset, skip_batches, use_stateful_dataloader, _drop_last, _non_blocking, **kwargs)
        self.split_batches = split_batches
        self.slice_fn = slice_fn
        self._structure_shared = False
        if isinstance(self.dataset, IterableDataset):
            self._plan_iterable(dispatch=True)
        elif self.base_dataloader.batch_sampler is None and not isinstance(self.sampler, BatchSampler):
            raise ValueError("DataLoaderDispatcher over a map-style dataset needs batches to dispatch: a batch_size, "
                             "a batch_sampler, or a BatchSampler as sampler")

    @property
    def total_batch_size(self):
        if self.split_batches:
            return self.dataset.batch_size
        return self.dataset.batch_size * self.dataset.num_processes

    @property
    def total_dataset_length(self):
        return len(self.dataset)

    def _length(self):
        accelerator = self._accelerator
        with Dealer.dispatch(accelerator.num_processes, accelerator.process_index, self.split_batches,
                             self._drop_last) as dealer:
            return dealer.length(len(self.base_dataloader))

    def _target_device(self):
        return torch.device(self._accelerator.device)

    def _draw(self):
        accelerator = self._accelerator
        # As Accelerate's, only rank 0 draws the base batches.
        base = self._keys() if accelerator.process_index == 0 else None
        if accelerator.num_processes > 1:
            base, self._index_keys = accelerator._broadcast_object((base, self._index_keys))
        mine, self._last_rows = dispatched_batches(base, accelerator.num_processes, accelerator.process_index,
                                                   self.split_batches, self._drop_last)
        return mine

    def _planned_remainder(self):
        self.remainder = self._last_rows

    def _structure(self):
        source = self._iterable_source
        if source is not None and not self._structure_shared:
            # Under dispatch only rank 0 reads the stream: at the first batch, every process takes its structure.
            source.fields = self._accelerator._broadcast_object(source.fields)
            self._structure_shared = True
        return super()._structure()
