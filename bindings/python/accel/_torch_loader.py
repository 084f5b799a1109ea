"""Accelerate's DataLoaderShard and DataLoaderDispatcher over torch's DataLoader, and prepare_data_loader,
which makes them as Accelerate's does (a BatchSamplerShard or IterableDatasetShard for the process, the
sampler's generator kept in step on every process, ...). Every epoch runs on a library loader, which keeps
the place in the epoch, so that accumulate() forces a sync on the last batch and gather_for_metrics drops
the padding, as with any accel loader.

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
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler, TensorDataset
from torch.utils.data._utils.collate import default_collate, default_convert

from ._library import lib
from ._torch_adapter import DataLoaderAdapter
from ._torch_batches import Fields
from ._torch_data import BatchSamplerShard, IterableDatasetShard, SeedableRandomSampler, dispatched_batches
from .data_loader import DataLoader as AccelLoader
from .data_loader import DataLoaderStateMixin
from .dataset import Dataset
from .errors import InvalidStateError
from .options import Options
from .state import GradientState, PartialState

# torch DataLoader arguments a prepared loader takes over from the DataLoader it replaces, with their
# defaults (Accelerate 0.34.2's _PYTORCH_DATALOADER_KWARGS less the batching ones, which it rebuilds).
_KEPT_KWARGS = {"num_workers": 0, "collate_fn": None, "pin_memory": False, "timeout": 0, "worker_init_fn": None,
                "multiprocessing_context": None, "generator": None, "prefetch_factor": 2, "persistent_workers": False}

# A library loader over batches planned here: each process's own list, dealt as given.
_GIVEN_BATCHES = {"even_batches": False, "split_batches": False, "dispatch_batches": "false", "shuffle": False,
                  "drop_last": False}

_preparing = []  # the Accelerator whose prepare_data_loader is making loaders now


@contextlib.contextmanager
def _prepared_by(accelerator):
    _preparing.append(accelerator)
    try:
        yield
    finally:
        _preparing.pop()


def _kept_kwargs(dataloader):
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
            from .utils.operations import send_to_device
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
            from .utils.random import synchronize_rng_states
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
        whole = len(self.base_dataloader)
        if self.split_batches:
            return whole
        processes = self._accelerator.num_processes
        return whole // processes if self._drop_last else -(-whole // processes)

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


def _library_plans(dataloader, num_processes, use_seedable_sampler):
    """Whether the library's own sampler gives this map-style loader's orders (see the module's docstring)."""
    batch_sampler = dataloader.batch_sampler
    if type(batch_sampler) is not BatchSampler:
        return False
    sampler = batch_sampler.sampler
    if type(sampler) is SequentialSampler:
        return True
    if type(sampler) is not RandomSampler or sampler.replacement or sampler._num_samples is not None:
        return False
    return use_seedable_sampler or (sampler.generator is None and num_processes > 1)


def prepare_data_loader(accelerator, dataloader, device=None, num_processes=None, process_index=None,
                        split_batches=False, put_on_device=False, rng_types=None, dispatch_batches=None,
                        even_batches=True, slice_fn_for_dispatch=None, use_seedable_sampler=False, data_seed=None,
                        non_blocking=False, use_stateful_dataloader=False):
    """accel.data_loader.prepare_data_loader, for accelerator's state: Accelerate's loader for process
    process_index of num_processes, its epochs on accelerator's library loaders."""
    dataset = dataloader.dataset
    iterable = isinstance(dataset, IterableDataset)
    if dispatch_batches is None:
        dispatch_batches = put_on_device and iterable
    if dispatch_batches and not put_on_device:
        raise ValueError("Using `dispatch_batches=True` requires `put_on_device=True`.")
    num_processes = accelerator.num_processes if num_processes is None else num_processes
    process_index = accelerator.process_index if process_index is None else process_index
    if split_batches:
        _check_split_batch_size(dataloader, num_processes)
    sampler_is_batch_sampler = isinstance(dataloader.sampler, BatchSampler)
    if not iterable and dataloader.batch_sampler is None and not sampler_is_batch_sampler:
        raise ValueError("a DataLoader with batch_size=None (no automatic batching) over a map-style dataset cannot "
                         "be prepared: give it a batch_size, or a BatchSampler as its sampler")
    library = (not iterable and not dispatch_batches and _library_plans(dataloader, num_processes, use_seedable_sampler)
               and (num_processes, process_index) == (accelerator.num_processes, accelerator.process_index))
    batch_sampler = None if iterable else dataloader.sampler if sampler_is_batch_sampler else dataloader.batch_sampler
    sampler = getattr(batch_sampler, "sampler", None)
    if isinstance(sampler, RandomSampler) and use_seedable_sampler:
        sampler = SeedableRandomSampler(sampler.data_source, replacement=sampler.replacement,
                                        num_samples=sampler._num_samples,
                                        generator=getattr(sampler, "generator", torch.Generator()), data_seed=data_seed)
    synchronized_generator = None
    if num_processes != 1 and not dispatch_batches:
        if iterable:
            synchronized_generator = getattr(dataset, "generator", None)
            dataset = IterableDatasetShard(dataset, dataloader.batch_size, dataloader.drop_last, num_processes,
                                           process_index, split_batches)
        else:
            if not use_seedable_sampler and hasattr(sampler, "generator"):
                if sampler.generator is None:
                    sampler.generator = torch.Generator()
                synchronized_generator = sampler.generator
            batch_sampler = BatchSamplerShard(batch_sampler, num_processes, process_index, split_batches, even_batches)
    if rng_types is not None and synchronized_generator is None:
        rng_types = [name for name in rng_types if getattr(name, "value", name) != "generator"]
    kwargs = _kept_kwargs(dataloader)
    if iterable:
        kwargs["drop_last"] = dataloader.drop_last
        kwargs["batch_size"] = (dataloader.batch_size // num_processes if split_batches and not dispatch_batches
                                else dataloader.batch_size)
    common = {"_drop_last": dataloader.drop_last, "_non_blocking": non_blocking,
              "use_stateful_dataloader": use_stateful_dataloader}
    with _prepared_by(accelerator):
        if dispatch_batches:
            del kwargs["generator"]
            loader = DataLoaderDispatcher(dataset, split_batches=split_batches, batch_sampler=batch_sampler,
                                          slice_fn=slice_fn_for_dispatch, **common, **kwargs)
        else:
            shard = {"device": device if put_on_device else None, "rng_types": rng_types,
                     "synchronized_generator": synchronized_generator, **common}
            if sampler_is_batch_sampler:
                loader = DataLoaderShard(dataset, sampler=batch_sampler, batch_size=dataloader.batch_size, **shard,
                                         **kwargs)
            else:
                loader = DataLoaderShard(dataset, batch_sampler=batch_sampler, **shard, **kwargs)
    if isinstance(sampler, SeedableRandomSampler):
        loader.set_sampler(sampler)
    if library:
        original = dataloader.batch_sampler
        loader._use_library_plan({"batch_size": original.batch_size, "drop_last": original.drop_last,
                                  "shuffle": isinstance(original.sampler, RandomSampler),
                                  "dispatch_batches": "false", "split_batches": split_batches,
                                  "even_batches": even_batches, "use_seedable_sampler": use_seedable_sampler,
                                  "data_seed": data_seed})
    return loader


def _check_split_batch_size(dataloader, num_processes):
    """Accelerate's checks that split_batches can split the loader's batches over the processes."""
    batch_size = dataloader.batch_size
    if batch_size is None:
        batch_size = getattr(dataloader.batch_sampler, "batch_size", None)
        if batch_size is None:
            raise ValueError("In order to use `split_batches==True` you must have a `batch_size` attribute either in "
                             "the passed `dataloader` or `dataloader.batch_sampler` objects, and it has to return a "
                             "natural number. Your `dataloader.batch_size` is None and `dataloader.batch_sampler` "
                             f"(`{type(dataloader.batch_sampler)}`) does not have the `batch_size` attribute set.")
    if batch_size > 1 and batch_size % num_processes != 0:
        raise ValueError(f"To use a `DataLoader` in `split_batches` mode, the batch size ({dataloader.batch_size}) "
                         f"needs to be a round multiple of the number of processes ({num_processes}).")


def prepare(accelerator, dataloader):
    """The prepared form of a torch DataLoader: prepare_data_loader with the Accelerator's
    DataLoaderConfiguration, device placement and rng_types, as Accelerator.prepare_data_loader."""
    settings = {key: value for key, value in accelerator._loader_settings.items() if value is not None}
    dispatch = settings.get("dispatch_batches")
    loader = prepare_data_loader(
        accelerator, dataloader, device=accelerator.device, put_on_device=settings.get("device_placement", True),
        rng_types=accelerator._rng_types, dispatch_batches=None if dispatch in (None, "auto") else dispatch == "true",
        split_batches=settings.get("split_batches", False), even_batches=settings.get("even_batches", True),
        use_seedable_sampler=settings.get("use_seedable_sampler", False), data_seed=settings.get("data_seed"),
        non_blocking=settings.get("non_blocking", False))
    loader._is_accelerate_prepared = True  # Accelerate's mark of what its Accelerator prepared
    return loader
