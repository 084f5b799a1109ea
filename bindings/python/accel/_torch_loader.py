"""PreparedLoader, the base of Accelerate's DataLoaderShard and DataLoaderDispatcher (accel._torch_shards)
over torch's DataLoader, which accel._torch_prepare makes as Accelerate's prepare_data_loader does (a
BatchSamplerShard or IterableDatasetShard for the process, the sampler's generator kept in step on every
process, ...). Every epoch runs on a library loader, which keeps the place in the epoch, so that accumulate()
forces a sync on the last batch and gather_for_metrics drops the padding, as with any accel loader.

Who plans which indices a process gets:
- the library (src/data/sharding, its own sampler), for a loader prepared for this process whose sampler is
  torch's SequentialSampler, or RandomSampler without replacement or num_samples and either a seedable
  sampler or, on several processes, no generator of its own (Accelerate's fresh torch.Generator(), synced
  from rank 0 every epoch): the library's orders are torch's to the bit there;
- this module otherwise: each epoch, the loader's own batch sampler is drawn (a BatchSamplerShard gives this
  process's batches; DataLoaderDispatcher deals rank 0's draw with dispatched_batches), and a library loader
  goes over those batches (accel_loader_new_with_batches).
Who reads the samples:
- the library, zero-copy, for a TensorDataset with torch's default collate_fn: batches are the rows of its
  tensors, given back with the dtype, shape, strides and structure default_collate gives (_torch_batches);
- Python otherwise: the DataLoader's own fetch (dataset[i] for each index, or __getitems__, then its
  collate_fn), so any sample structure and collate_fn come out as they would from the DataLoader;
- the library's iterable-dataset loader for an IterableDataset (read through callbacks; dispatched from
  rank 0 by DataLoaderDispatcher): samples must be tensors, arrays or numbers, alone or in a tuple, list or
  dict, collated as torch's default_collate does.
Not carried over: num_workers (batches are read in the calling thread), worker_init_fn, pin_memory for
Python-collated batches, a timeout.
"""
import contextlib
import json
import numbers

import numpy as np
import torch
from torch.utils.data import BatchSampler, IterableDataset, TensorDataset
from torch.utils.data._utils.collate import default_collate, default_convert

from ._library import lib
from ._library_loader import DataLoader as AccelLoader
from ._loader_state import DataLoaderStateMixin
from ._torch_adapter import DataLoaderAdapter
from ._torch_batches import Fields
from ._torch_data import IterableDatasetShard
from .dataset import Dataset
from .errors import InvalidStateError
from .options import Options
from .state import GradientState, PartialState
from .utils.operations import send_to_device

# torch DataLoader arguments a prepared loader takes over from the DataLoader it replaces, with their
# defaults (Accelerate 0.34.2's _PYTORCH_DATALOADER_KWARGS less the batching ones, which it rebuilds).
_KEPT_KWARGS = {"num_workers": 0, "collate_fn": None, "pin_memory": False, "timeout": 0, "worker_init_fn": None,
                "multiprocessing_context": None, "generator": None, "prefetch_factor": 2, "persistent_workers": False}

# A library loader over batches planned here: each process's own list, dealt as given.
_GIVEN_BATCHES = {"even_batches": False, "split_batches": False, "dispatch_batches": "false", "shuffle": False,
                  "drop_last": False}


_preparing = []  # the Accelerator whose prepare_data_loader is making loaders now


@contextlib.contextmanager
def prepared_by(accelerator):
    _preparing.append(accelerator)
    try:
        yield
    finally:
        _preparing.pop()


def kept_kwargs(dataloader):
    return {key: getattr(dataloader, key, default) for key, default in _KEPT_KWARGS.items()}


def _is_default_collate(collate_fn):
    return collate_fn in (None, default_collate)


class _IterableSource:
    """An IterableDataset read through the library's callbacks, each sample flattened into fields."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.fields = None

    def set_epoch(self, epoch):
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __iter__(self):
        for sample in self.dataset:
            if self.fields is None:
                self.fields = Fields(sample)
            yield self.fields.flatten(sample)


class PreparedLoader(DataLoaderAdapter, DataLoaderStateMixin):
    """Common to DataLoaderShard and DataLoaderDispatcher: iterating gives one epoch of this process's
    batches (a loop left early is continued by the next, as accel.DataLoader's); end_of_dataloader,
    remainder, begin() / end(), set_epoch, total_batch_size as Accelerate's; skip_first_batches(n) (the next
    epoch skips n batches), state_dict() / load_state_dict() (the place in the epoch, as bytes).
    The library loader behind them: accel_loader."""

    def __init__(self, dataset, skip_batches, use_stateful_dataloader, _drop_last, _non_blocking, **kwargs):
        super().__init__(dataset, use_stateful_dataloader=use_stateful_dataloader, **kwargs)
        self.gradient_state = GradientState()
        self.skip_batches = skip_batches
        self._drop_last = _drop_last
        self._non_blocking = _non_blocking
        self.iteration = 0
        self._accelerator = _preparing[-1] if _preparing else PartialState()._accelerator
        self.accel_loader = None
        self._library_plan = None  # accel_loader_new's settings when the library plans every epoch itself
        self._library_dataset = None  # the accel.Dataset the library reads
        self._iterable_source = None  # _IterableSource of an IterableDataset
        self._fields = None  # Fields of a TensorDataset's rows read by the library
        self._unbatched = False  # batch_size=None: each batch is one sample, given as it is
        self._in_epoch = False
        self._skip_next = None  # skip_first_batches' count, for the next epoch
        self._epoch_batches = None  # planned here: this epoch's batches (lists of dataset indices)
        self._index_keys = False  # planned here: the sampler gives single indices (batch_size=None)
        self._last_rows = -1  # planned here: rows of the last global batch (DataLoaderDispatcher's remainder)

    # --- what Accelerate's loaders expose -----------------------------------------------------------------

    @property
    def _python_plan(self):
        """Whether this module plans the batches (the library then deals them as given, with no remainder
        of its own: gather_for_metrics trims by this loader's)."""
        return self._library_plan is None

    @property
    def total_dataset_length(self):
        return getattr(self.dataset, "total_length", None) or len(self.dataset)

    def set_epoch(self, epoch):
        """The epoch the next pass counts as (it seeds shuffling): passed on to the samplers that take it,
        else to the dataset."""
        self.iteration = epoch
        sampler = self.sampler if isinstance(self.sampler, BatchSampler) else self.batch_sampler
        inner = None
        while sampler is not None:  # wrappers (BatchSamplerShard, SkipBatchSampler) and what they wrap
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            inner = getattr(sampler, "sampler", None) if inner is None else inner
            sampler = getattr(sampler, "batch_sampler", None)
        if hasattr(inner, "set_epoch"):
            inner.set_epoch(epoch)
        elif hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)
        if self._library_plan is not None and not self._in_epoch:
            self.accel_loader.set_epoch(epoch)

    def get_sampler(self):
        """The sampler of indices inside the batch sampler."""
        if isinstance(self.sampler, BatchSampler):
            return getattr(self.sampler, "sampler", None)
        return getattr(self.batch_sampler, "sampler", None)

    def set_sampler(self, sampler):
        """Puts sampler inside the batch sampler (and inside the one a BatchSamplerShard wraps)."""
        if isinstance(self.sampler, BatchSampler):
            self.sampler.sampler = sampler
            return
        self.batch_sampler.sampler = sampler
        if hasattr(self.batch_sampler, "batch_sampler"):
            self.batch_sampler.batch_sampler.sampler = sampler

    def skip_first_batches(self, num_batches):
        """The next epoch skips its first num_batches batches of this process (in place)."""
        if self._in_epoch:  # as the library's loaders
            raise InvalidStateError(lib.ACCEL_ERR_INVALID_STATE,
                                    "skip_first_batches: an epoch is in progress; finish it first")
        self._skip_next = num_batches

    def __len__(self):
        """Batches this process yields in an epoch."""
        if self._library_plan is not None and not isinstance(self.dataset, IterableDataset):
            return len(self.accel_loader) - (self._skip_next or 0)
        return self._length() - (self._skip_next or 0)

    def _length(self):
        return len(self.base_dataloader)

    # --- state ----------------------------------------------------------------------------------------------

    def state_dict(self):
        """The loader's place (epoch, the batches already yielded) as bytes, for load_state_dict."""
        if self._library_plan is not None:
            return self.accel_loader.state_dict()
        in_epoch = self._in_epoch and self.accel_loader is not None
        return json.dumps({"iteration": self.iteration, "batches": self._epoch_batches if in_epoch else None,
                           "index_keys": self._index_keys, "last_rows": self._last_rows,
                           "position": self.accel_loader.state_dict().hex() if in_epoch else None}).encode()

    def load_state_dict(self, state):
        """Between epochs: continue from a place state_dict() gave (the same dataset and settings); the next
        batches are exactly those that remained."""
        if self._library_plan is not None:
            self.accel_loader.load_state_dict(state)  # the next epoch goes on from the place loaded
            self.iteration = self.accel_loader.epoch
            return
        saved = json.loads(bytes(state))
        self.iteration = saved["iteration"]
        self._index_keys, self._last_rows = saved["index_keys"], saved["last_rows"]
        self._in_epoch = saved["batches"] is not None
        if self._in_epoch:
            self._plan_epoch(saved["batches"])
            self.accel_loader.load_state_dict(bytes.fromhex(saved["position"]))

    def __getstate__(self):
        # The library's objects stay behind; the place in the epoch travels as state_dict() bytes.
        state = dict(self.__dict__)
        for name in ("accel_loader", "_library_dataset", "_accelerator", "gradient_state"):
            del state[name]
        state["_place"] = None if self.accel_loader is None else self.state_dict()
        return state

    def __setstate__(self, state):
        place = state.pop("_place")
        self.__dict__.update(state)
        self._accelerator = PartialState()._accelerator
        self.gradient_state = GradientState()
        self.accel_loader = self._library_dataset = None
        if self._library_plan is not None:
            self._use_library_plan(self._library_plan)
        if place is not None:
            self.load_state_dict(place)

    # --- iteration ------------------------------------------------------------------------------------------

    def __iter__(self):
        self.begin()
        if not self._in_epoch:
            self._start_epoch()
        try:
            for fields in self.accel_loader:
                batch = self._batch(fields)
                self.end_of_dataloader = self.accel_loader.end_of_dataloader
                if self._library_plan is not None:
                    self.remainder = self.accel_loader.remainder
                elif self.end_of_dataloader:
                    self._planned_remainder()
                yield batch
        finally:
            self.end()
        self._in_epoch = False
        self._epoch_batches = None
        self.iteration += 1

    def _planned_remainder(self):
        """Overridden where the last batch of a planned epoch sets the remainder."""

    def _start_epoch(self):
        if self._library_plan is not None:
            # The library's count is the epoch's: a checkpoint loaded into it (load_state) moves it.
            self.iteration = self.accel_loader.epoch
        self._synchronize_rngs()
        self.set_epoch(self.iteration)
        # What iter(DataLoader) draws from the loader's generator (the global one by default) when it starts:
        # the random numbers left for the training loop stay Accelerate's.
        torch.empty((), dtype=torch.int64).random_(generator=self.base_dataloader.generator)
        skip = self.skip_batches if self._skip_next is None else self._skip_next
        self._skip_next = None
        if self._library_plan is None:
            self._plan_epoch(self._draw()[skip:])
        elif skip:  # (only then: the place a checkpoint loaded is a skip too)
            self.accel_loader.skip_first_batches(skip)
        self._in_epoch = True

    def _synchronize_rngs(self):
        """Overridden where the epoch starts by taking the main process's generators."""

    def _keys(self):
        """One pass of the DataLoader's index sampler (its batch sampler, or its sampler without batching),
        each key as a list of dataset indices."""
        keys = list(self.base_dataloader._index_sampler)
        self._index_keys = bool(keys) and isinstance(keys[0], numbers.Integral)
        return [[key] if self._index_keys else list(key) for key in keys]

    def _plan_epoch(self, batches):
        """A library loader over this epoch's batches of this process."""
        self._epoch_batches = batches
        if self.accel_loader is not None:
            self.accel_loader.close()
        # The library deals a list of batches round-robin: each batch once per process reaches every process.
        dealt = [batch for batch in batches for _ in range(self._accelerator.num_processes)]
        self.accel_loader = self._new_library_loader(self._map_dataset(), _GIVEN_BATCHES, dealt)

    def _batch(self, fields):
        structure = self._structure()
        if structure is None:
            batch, placed = self._fetched(fields["index"].numpy().tolist()), False
        else:
            batch, placed = structure.rebuild(fields, self._unbatched), self._library_places()
        device = self._target_device()
        if device is not None and not placed:
            batch = send_to_device(batch, device, non_blocking=self._non_blocking)
        return batch

    def _structure(self):
        """The Fields of batches the library read, or None for batches of indices fetched here."""
        return self._iterable_source.fields if self._iterable_source is not None else self._fields

    def _fetched(self, indices):
        """The batch torch's DataLoader makes of these indices: its fetch, then its collate_fn."""
        dataset = self.dataset
        if self.base_dataloader._auto_collation:
            getitems = getattr(dataset, "__getitems__", None)
            samples = getitems(indices) if getitems else [dataset[index] for index in indices]
        else:
            samples = dataset[indices[0] if self._index_keys else indices]
        return self.collate_fn(samples)

    # --- the library's loader ---------------------------------------------------------------------------

    def _target_device(self):
        """Where batches go (None: where they are made)."""
        raise NotImplementedError

    def _library_places(self):
        """Whether the library moves the batches it reads to their device (the state's)."""
        device = self._target_device()
        return device is not None and device == torch.device(self._accelerator.device)

    def _new_library_loader(self, dataset, settings, batches=None):
        reads = self._fields is not None or self._iterable_source is not None
        options = {**settings, "device_placement": reads and self._library_places(),
                   "non_blocking": bool(self._non_blocking)}
        with Options(options) as prepared_options:
            return AccelLoader(self._accelerator.pointer, dataset, prepared_options, batches)

    def _tensor_rows(self):
        """Whether the library reads the batches itself: rows of a TensorDataset's tensors, collated by
        default_collate (their rows stacked)."""
        return (isinstance(self.dataset, TensorDataset) and type(self.dataset).__getitem__ is TensorDataset.__getitem__
                and self.base_dataloader._auto_collation and _is_default_collate(self.collate_fn))

    def _map_dataset(self):
        """The accel.Dataset of a map-style dataset: a TensorDataset's tensors (bool ones as uint8), or the
        indices, whose samples are then fetched here."""
        if self._library_dataset is None:
            if self._tensor_rows():
                tensors = tuple(self.dataset.tensors)
                self._fields = Fields(tensors)
                self._library_dataset = Dataset.from_tensors(self._fields.flatten(tensors))
            else:
                self._library_dataset = Dataset.from_tensors({"index": np.arange(len(self.dataset), dtype=np.int64)})
        return self._library_dataset

    def _use_library_plan(self, settings):
        """The library plans every epoch itself, with these accel_loader_new settings."""
        self._library_plan = settings
        if isinstance(self.dataset, IterableDataset):
            self._library_dataset = Dataset.from_iterable(self._iterable_source)
        self.accel_loader = self._new_library_loader(self._map_dataset() if self._library_dataset is None
                                                     else self._library_dataset, settings)

    def _plan_iterable(self, dispatch):
        """An IterableDataset's samples are read and batched by the library (see the module's docstring):
        dispatched from rank 0, or each process batching the stream it is given (its IterableDatasetShard,
        which the library then keeps the part of, or any other)."""
        collate_fn = self.collate_fn
        if not _is_default_collate(collate_fn) and collate_fn is not default_convert:
            raise ValueError("an IterableDataset whose DataLoader has a collate_fn of its own cannot be prepared (the "
                             "library reads and batches its samples: tensors, arrays or numbers, alone or in a tuple, "
                             "list or dict)")
        dataset = self.dataset
        accelerator = self._accelerator
        settings = {"dispatch_batches": "false", "already_sharded": True}
        if dispatch:
            settings = {"dispatch_batches": "true", "split_batches": self.split_batches}
        elif (isinstance(dataset, IterableDatasetShard) and dataset.num_processes > 1
              and (dataset.num_processes, dataset.process_index) == (accelerator.num_processes,
                                                                     accelerator.process_index)):
            # This process's shard: the library reads the whole stream and keeps the same part of it.
            settings = {"dispatch_batches": "false", "batch_size": dataset.batch_size,
                        "split_batches": dataset.split_batches, "drop_last": dataset.drop_last}
            dataset = dataset.dataset
        self._unbatched = self.base_dataloader.batch_size is None
        self._iterable_source = _IterableSource(dataset)
        self._use_library_plan({"batch_size": self.base_dataloader.batch_size or 1,
                                "drop_last": self.base_dataloader.drop_last, **settings})
