"""A torch.utils.data.DataLoader prepared by an Accelerator: this process's batches, as Accelerate's
prepare_data_loader deals them, with the library's loader keeping the place in the epoch (so that
accumulate() forces a sync on the last batch and gather_for_metrics drops the padding, as with any accel
loader).

Who plans which indices each process gets:
- the library (src/data/sharding, the loader's own sampler) for a map-style dataset whose sampler is
  torch's SequentialSampler, or RandomSampler without replacement or num_samples and either a seedable
  sampler or, on several processes, no generator of its own (Accelerate's fresh torch.Generator(), synced
  from rank 0 every epoch): the library's orders are torch's to the bit there;
- this module, with BatchSamplerShard over the loader's own batch sampler, for any other sampler or batch
  sampler, and for RandomSampler on one process (torch's global generator draws its seed there, as it
  does under Accelerate); each epoch's batches (every process's, interleaved as the library deals them)
  then go to a loader over those batches (accel_loader_new_with_batches).
Who reads the samples:
- the library, zero-copy, for a TensorDataset with torch's default collate_fn: batches are the rows of
  its tensors, in the list default_collate makes ([x, y]);
- Python otherwise: dataset[i] for the indices of the batch, then the loader's collate_fn, so any sample
  structure and collate_fn come out as they would from the DataLoader;
- the library's iterable-dataset loader for an IterableDataset (read through callbacks; dispatched from
  rank 0 by default, as Accelerate does): samples must be tensors, arrays or numbers, alone or in a tuple,
  list or dict, collated by torch's default_collate.
Not carried over: num_workers (batches are read in the calling thread), worker_init_fn, pin_memory for
Python-collated batches, a timeout.
"""
import itertools

import numpy as np
import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler, TensorDataset
from torch.utils.data._utils.collate import default_collate, default_convert

from ._torch_data import BatchSamplerShard, ListBatchSampler
from .data_loader import DataLoader as AccelLoader
from .dataset import Dataset
from .options import Options


def _is_default_collate(collate_fn):
    return collate_fn in (None, default_collate)


def _dispatch_setting(accelerator):
    """The DataLoaderConfiguration's dispatch_batches: True, False or None (auto)."""
    value = accelerator._loader_settings.get("dispatch_batches")
    return None if value is None else value == "true"


def _broadcast_generator(accelerator, generator):
    """Every process takes rank 0's generator state (Accelerate's rng_types "generator")."""
    state = generator.get_state()
    accelerator.broadcast(state, from_process=0)
    generator.set_state(state)


class _Fields:
    """A sample's structure flattened into named fields for the library, and rebuilt around batched
    fields as default_collate builds it: a tuple or list gives a list (a named tuple its own type), a dict
    a dict, a lone tensor a tensor."""

    def __init__(self, example):
        self.kind = type(example)
        if isinstance(example, dict):
            self.names = [str(key) for key in example]
            self.keys = list(example)
        elif isinstance(example, (tuple, list)):
            self.names = [str(index) for index in range(len(example))]
            self.keys = None
        else:
            self.names, self.keys = ["0"], None

    def flatten(self, sample):
        if isinstance(sample, dict):
            return {str(key): value for key, value in sample.items()}
        if isinstance(sample, (tuple, list)):
            return {str(index): value for index, value in enumerate(sample)}
        return {"0": sample}

    def rebuild(self, fields):
        values = [fields[name] for name in self.names]
        if issubclass(self.kind, dict):
            return self.kind(zip(self.keys, values))
        if issubclass(self.kind, tuple) and hasattr(self.kind, "_fields"):
            return self.kind(*values)
        if issubclass(self.kind, (tuple, list)):
            return values
        return values[0]


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
                self.fields = _Fields(sample)
            yield self.fields.flatten(sample)


class PreparedLoader:
    """Common to DataLoaderShard and DataLoaderDispatcher (Accelerate's classes): iterate for one epoch of
    this process's batches; len() is what this process yields in an epoch; end_of_dataloader and remainder
    as Accelerate's; set_epoch, skip_first_batches, state_dict and load_state_dict as accel.DataLoader's.
    The DataLoader's settings are readable as attributes (dataset, batch_size, drop_last, collate_fn,
    sampler, batch_sampler)."""

    def __init__(self, accelerator, dataloader):
        self._accelerator = accelerator
        self.base_dataloader = dataloader
        self.dataset = dataloader.dataset
        self.batch_size = dataloader.batch_size
        self.drop_last = dataloader.drop_last
        self.collate_fn = dataloader.collate_fn
        self.sampler = dataloader.sampler
        self.batch_sampler = dataloader.batch_sampler
        self.device = torch.device(accelerator.device)
        self.iteration = 0
        self.split_batches = bool(accelerator._loader_settings.get("split_batches"))
        self._settings = {key: value for key, value in accelerator._loader_settings.items() if value is not None}
        self._device_placement = self._settings.get("device_placement", True)
        self.accel_loader = None  # made by the subclass's plan
        self._skip = 0
        self._fields = None  # _Fields of a TensorDataset or an iterable dataset read by the library
        self._python_plan = False  # batches planned here (BatchSamplerShard), one library loader per epoch

    # --- what Accelerate's loaders expose -----------------------------------------------------------------

    @property
    def end_of_dataloader(self):
        return self.accel_loader is not None and self.accel_loader.end_of_dataloader

    @property
    def remainder(self):
        if self._python_plan:
            return -1 if self.drop_last or self.batch_size is None else len(self.dataset) % self.total_batch_size
        return -1 if self.accel_loader is None else self.accel_loader.remainder

    @property
    def total_batch_size(self):
        size = self.batch_size or getattr(self.batch_sampler, "batch_size", None) or 1
        return size if self.split_batches else size * self._accelerator.num_processes

    @property
    def total_dataset_length(self):
        return getattr(self.dataset, "total_length", None) or len(self.dataset)

    def __len__(self):
        if self._python_plan:
            return len(self._shard(self._accelerator.process_index, self.batch_sampler)) - self._skip
        return len(self.accel_loader)

    def set_epoch(self, epoch):
        self.iteration = epoch
        if self.accel_loader is not None and not self._python_plan:
            self.accel_loader.set_epoch(epoch)

    def skip_first_batches(self, num_batches):
        if self._python_plan:
            self._skip = num_batches
        else:
            self.accel_loader.skip_first_batches(num_batches)

    def state_dict(self):
        return self.accel_loader.state_dict()

    def load_state_dict(self, state):
        self.accel_loader.load_state_dict(state)

    # --- iteration ------------------------------------------------------------------------------------------

    def __iter__(self):
        # What a torch DataLoader's iterator draws from its generator (the global one by default) when it
        # starts: the same random numbers stay for the training loop as under Accelerate.
        torch.empty((), dtype=torch.int64).random_(generator=self.base_dataloader.generator)
        if hasattr(self.dataset, "set_epoch") and not isinstance(self.dataset, IterableDataset):
            self.dataset.set_epoch(self.iteration)
        if self._python_plan:
            self._start_planned_epoch()
        self._accelerator._loader_began(self)
        try:
            for batch in self.accel_loader:
                yield self._batch(batch)
        finally:
            self._accelerator._loader_ended(self)
        self.iteration += 1

    def _batch(self, fields):
        if self._fields is not None:
            return self._fields.rebuild({name: tensor.torch() for name, tensor in fields.items()})
        indices = fields["index"].numpy().tolist()
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(indices) if getitems else [self.dataset[index] for index in indices]
        batch = self.collate_fn(samples)
        if self._device_placement and self.device.type != "cpu":
            from .utils.operations import send_to_device
            batch = send_to_device(batch, self.device, non_blocking=bool(self._settings.get("non_blocking")))
        return batch

    # --- planning ----------------------------------------------------------------------------------------------

    def _new_accel_loader(self, dataset, settings, batches=None):
        options = {**self._settings, **settings}
        with Options(options) as prepared_options:
            return AccelLoader(self._accelerator.pointer, dataset, prepared_options, batches)

    def _index_dataset(self):
        return Dataset.from_tensors({"index": np.arange(len(self.dataset), dtype=np.int64)})

    def _shard(self, rank, batch_sampler):
        accelerator = self._accelerator
        if accelerator.num_processes == 1:
            return batch_sampler
        return BatchSamplerShard(batch_sampler, accelerator.num_processes, rank, self.split_batches,
                                 self._settings.get("even_batches", True))

    def _start_planned_epoch(self):
        """This epoch's batches, planned here from one pass of the loader's batch sampler: every process's
        share, interleaved as the library deals a list of batches, so each gets its own."""
        accelerator = self._accelerator
        generator = self._synchronized_generator
        if generator is not None and accelerator.num_processes > 1:
            _broadcast_generator(accelerator, generator)
        if hasattr(self.batch_sampler, "set_epoch"):
            self.batch_sampler.set_epoch(self.iteration)
        sampler = getattr(self.batch_sampler, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.iteration)
        drawn = ListBatchSampler([list(batch) for batch in self.batch_sampler],
                                 getattr(self.batch_sampler, "batch_size", None),
                                 getattr(self.batch_sampler, "drop_last", False))
        shares = [list(self._shard(rank, drawn)) for rank in range(accelerator.num_processes)]
        shares[accelerator.process_index] = shares[accelerator.process_index][self._skip:]
        self._skip = 0
        interleaved = [batch for round_ in itertools.zip_longest(*shares) for batch in round_ if batch is not None]
        if self.accel_loader is not None:
            self.accel_loader.close()
        self.accel_loader = self._new_accel_loader(
            self._index_dataset(), {"device_placement": False, "even_batches": False, "split_batches": False,
                                    "dispatch_batches": "false", "shuffle": False, "drop_last": False},
            interleaved)


def _library_plans(dataloader, accelerator):
    """Whether the library's own sampler gives this loader's orders (see the module's docstring)."""
    batch_sampler = dataloader.batch_sampler
    if type(batch_sampler) is not BatchSampler:
        return False
    sampler = batch_sampler.sampler
    if type(sampler) is SequentialSampler:
        return True
    if type(sampler) is not RandomSampler or sampler.replacement or sampler._num_samples is not None:
        return False
    if accelerator._loader_settings.get("use_seedable_sampler"):
        return True
    return sampler.generator is None and accelerator.num_processes > 1


class DataLoaderShard(PreparedLoader):
    """Each process reads its own batches (Accelerate's DataLoaderShard)."""

    def __init__(self, accelerator, dataloader):
        super().__init__(accelerator, dataloader)
        if dataloader.batch_sampler is None:
            raise ValueError("a DataLoader with batch_size=None (no automatic batching) over a map-style dataset "
                             "cannot be prepared: give it a batch_size")
        self._synchronized_generator = None
        if _library_plans(dataloader, accelerator):
            batch_sampler = dataloader.batch_sampler
            settings = {"batch_size": batch_sampler.batch_size, "drop_last": batch_sampler.drop_last,
                        "shuffle": isinstance(batch_sampler.sampler, RandomSampler), "dispatch_batches": "false"}
            if self._tensor_rows(dataloader):
                self.accel_loader = self._new_accel_loader(self._tensor_dataset(), settings)
            else:
                self.accel_loader = self._new_accel_loader(self._index_dataset(),
                                                           {**settings, "device_placement": False})
            return
        self._python_plan = True
        sampler = getattr(dataloader.batch_sampler, "sampler", None)
        if accelerator.num_processes > 1 and hasattr(sampler, "generator"):
            if sampler.generator is None:
                sampler.generator = torch.Generator()
            rng_types = accelerator._rng_types
            self._synchronized_generator = sampler.generator if "generator" in rng_types else None

    def _tensor_rows(self, dataloader):
        return isinstance(self.dataset, TensorDataset) and _is_default_collate(dataloader.collate_fn)

    def _tensor_dataset(self):
        tensors = self.dataset.tensors
        self._fields = _Fields(tuple(tensors))
        return Dataset.from_tensors({str(index): tensor for index, tensor in enumerate(tensors)})


class DataLoaderDispatcher(PreparedLoader):
    """Rank 0 reads each global batch and sends every process its part (Accelerate's
    DataLoaderDispatcher): the default for an IterableDataset."""

    def __init__(self, accelerator, dataloader, dispatch):
        super().__init__(accelerator, dataloader)
        settings = {"batch_size": dataloader.batch_size or 1, "drop_last": dataloader.drop_last,
                    "dispatch_batches": "true" if dispatch else "false"}
        if isinstance(self.dataset, IterableDataset):
            if not _is_default_collate(dataloader.collate_fn) and dataloader.collate_fn is not default_convert:
                raise ValueError("an IterableDataset whose DataLoader has a collate_fn of its own cannot be prepared "
                                 "(the library reads and batches its samples: tensors, arrays or numbers, alone or in "
                                 "a tuple, list or dict)")
            source = _IterableSource(self.dataset)
            self._source = source
            self.accel_loader = self._new_accel_loader(Dataset.from_iterable(source), settings)
            return
        self._synchronized_generator = None
        if isinstance(self.dataset, TensorDataset) and _is_default_collate(dataloader.collate_fn):
            self._fields = _Fields(tuple(self.dataset.tensors))
            tensors = {str(index): tensor for index, tensor in enumerate(self.dataset.tensors)}
            self.accel_loader = self._new_accel_loader(Dataset.from_tensors(tensors), {
                **settings, "shuffle": isinstance(dataloader.sampler, RandomSampler)})
        else:
            raise ValueError("dispatch_batches=True for a map-style dataset is supported for a TensorDataset with "
                             "the default collate_fn only")

    def _batch(self, fields):
        if self._fields is None and hasattr(self, "_source"):
            # Under dispatch only rank 0 reads the stream: the others learn the samples' structure from it.
            self._fields = self._accelerator._broadcast_object(self._source.fields)
        return super()._batch(fields)


def prepare(accelerator, dataloader):
    """The prepared form of a torch DataLoader (Accelerate's prepare_data_loader with the Accelerator's
    DataLoaderConfiguration)."""
    dispatch = _dispatch_setting(accelerator)
    iterable = isinstance(dataloader.dataset, IterableDataset)
    if dispatch is None:
        dispatch = iterable
    if iterable:
        return DataLoaderDispatcher(accelerator, dataloader, dispatch)
    if dispatch:
        return DataLoaderDispatcher(accelerator, dataloader, True)
    return DataLoaderShard(accelerator, dataloader)
