"""accel.DataLoader, a prepared loader (Accelerate's DataLoaderShard / DataLoaderDispatcher): this rank's
batches, on the state's device, as Accelerate would deal them.

Iterating yields one epoch of batches, each a dict of field name to accel.Tensor (zero-copy; .numpy(),
.torch(), or pass them straight to a model). Unlike a torch DataLoader, a loop left early does not
restart the epoch: the next iteration continues it, as accel_loader_next does.

Also Accelerate's accelerate.data_loader names: DataLoaderStateMixin, prepare_data_loader and
skip_first_batches here; the samplers, shards and loader classes over torch's objects in the modules
_TORCH_NAMES lists.
"""
import contextlib
import importlib

from ._handle import Handle
from ._library import ffi, lib
from .errors import check
from .tensor import Tensor


def _read_batch(batch):
    """A dict of name to new tensor handle for each entry of a C batch."""
    fields = {}
    for index in range(lib.accel_batch_count(batch)):
        name = ffi.string(lib.accel_batch_name(batch, index))
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_batch_get(batch, name, out))
        fields[name.decode()] = Tensor(out[0])
    return fields


class DataLoader(Handle):
    _free = lib.accel_loader_free

    def __init__(self, state, dataset, options, batches=None):
        """Use Accelerator.prepare. batches: a list of lists of dataset indices (dynamic batch sizes, like a
        batch_sampler), dealt to the ranks as given."""
        out = ffi.new("accel_loader_t **")
        if batches is None:
            check(lib.accel_loader_new(out, state, dataset.pointer, options.pointer))
        else:
            batches = [list(batch) for batch in batches]
            indices = ffi.new("int64_t[]", [index for batch in batches for index in batch])
            sizes = ffi.new("size_t[]", [len(batch) for batch in batches])
            check(lib.accel_loader_new_with_batches(out, state, dataset.pointer, indices, sizes, len(batches),
                                                    options.pointer))
        super().__init__(out[0])
        self.dataset = dataset  # its callbacks must outlive this loader (see accel._callbacks)

    def __iter__(self):
        while True:
            out = ffi.new("accel_batch_t **")
            check(lib.accel_loader_next(self.pointer, out), *self._callbacks())
            if out[0] == ffi.NULL:
                return
            try:
                fields = _read_batch(out[0])
            finally:
                lib.accel_batch_free(out[0])
            yield fields

    def _callbacks(self):
        return [self.dataset.callbacks] if self.dataset.callbacks else []

    def __len__(self):
        """Batches this rank yields in a full epoch (what it really yields, unlike Accelerate's len() in some
        split modes). TypeError for an iterable dataset, whose length is unknown."""
        out = ffi.new("int64_t *")
        check(lib.accel_loader_length(self.pointer, out))
        if out[0] < 0:
            raise TypeError("a loader over an iterable dataset has no length")
        return out[0]

    @property
    def end_of_dataloader(self):
        """True while the batch last yielded is the last of the epoch."""
        return bool(lib.accel_loader_end_of_dataloader(self.pointer))

    @property
    def remainder(self):
        """Real samples in the last global batch (what gather_for_metrics keeps of it); -1 when unknown."""
        return lib.accel_loader_remainder(self.pointer)

    @property
    def epoch(self):
        """The epoch the loader is in, or starts next."""
        return lib.accel_loader_epoch(self.pointer)

    def set_epoch(self, epoch):
        """Between epochs only: the number of the next epoch (it seeds the shuffle)."""
        check(lib.accel_loader_set_epoch(self.pointer, epoch))

    def skip_first_batches(self, num_batches):
        """Between epochs only: the next epoch skips its first num_batches batches of this rank."""
        check(lib.accel_loader_skip_first_batches(self.pointer, num_batches))

    def state_dict(self):
        """The loader's position (epoch, shuffling generator, batches already yielded) as bytes."""
        data = ffi.new("void **")
        size = ffi.new("size_t *")
        check(lib.accel_loader_save_state(self.pointer, data, size))
        return bytes(ffi.buffer(data[0], size[0]))

    def load_state_dict(self, state):
        """Between epochs only: continue from a position state_dict() gave, over the same dataset and
        settings; the next batches are exactly those that remained."""
        check(lib.accel_loader_load_state(self.pointer, ffi.from_buffer(state), len(state)))


class DataLoaderStateMixin:
    """Accelerate's DataLoaderStateMixin: end_of_dataloader (True while the last batch of the epoch is in
    use) and remainder (the real samples of the last global batch, what gather_for_metrics keeps of it;
    -1 when unknown), and begin() / end() around each epoch, between which the loader is GradientState's
    active_dataloader. A subclass has gradient_state (a GradientState), dataset, _drop_last and
    total_batch_size, as Accelerate's have."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.end_of_dataloader = False
        cls.remainder = -1

    def reset(self):
        self.end_of_dataloader = False
        self.remainder = -1

    def begin(self):
        """Starts an epoch: reset(), the remainder of a sized dataset (unless _drop_last), and the loader
        becomes the active one."""
        self.reset()
        with contextlib.suppress(Exception):  # an unsized dataset, a batch sampler without batch_size: -1
            if not self._drop_last:
                length = getattr(self.dataset, "total_dataset_length", len(self.dataset))
                self.remainder = length % self.total_batch_size
        self._tracking_accelerator()._loader_began(self)

    def end(self):
        """Ends an epoch: the loader is no longer the active one."""
        self._tracking_accelerator()._loader_ended(self)

    def _tracking_accelerator(self):
        """The Accelerator whose GradientState lists the loader in an epoch: the one that prepared it, else
        the process's."""
        accelerator = self.__dict__.get("_accelerator")
        return accelerator if accelerator is not None else self.gradient_state._accelerator


# Accelerate's accel.data_loader names over torch samplers, datasets and DataLoaders: defined in modules
# that import torch, loaded when first asked for, so that numpy-only programs never import torch.
_TORCH_NAMES = {
    "SeedableRandomSampler": "_torch_data", "BatchSamplerShard": "_torch_data", "IterableDatasetShard": "_torch_data",
    "SkipBatchSampler": "_torch_data", "DataLoaderAdapter": "_torch_adapter", "SkipDataLoader": "_torch_adapter",
    "DataLoaderShard": "_torch_loader", "DataLoaderDispatcher": "_torch_loader",
}


def __getattr__(name):
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f".{_TORCH_NAMES[name]}", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def prepare_data_loader(dataloader, device=None, num_processes=None, process_index=None, split_batches=False,
                        put_on_device=False, rng_types=None, dispatch_batches=None, even_batches=True,
                        slice_fn_for_dispatch=None, use_seedable_sampler=False, data_seed=None, non_blocking=False,
                        use_stateful_dataloader=False):
    """Accelerate's prepare_data_loader: the DataLoaderShard (or DataLoaderDispatcher: dispatch_batches,
    by default for an IterableDataset when put_on_device) giving process process_index of num_processes
    (by default this process of the running state) its share of a torch DataLoader's batches, on device
    with put_on_device. slice_fn_for_dispatch must be None (accel slices the rows itself)."""
    from . import _torch_loader
    from .state import PartialState
    return _torch_loader.prepare_data_loader(
        PartialState()._accelerator, dataloader, device=device, num_processes=num_processes,
        process_index=process_index, split_batches=split_batches, put_on_device=put_on_device, rng_types=rng_types,
        dispatch_batches=dispatch_batches, even_batches=even_batches, slice_fn_for_dispatch=slice_fn_for_dispatch,
        use_seedable_sampler=use_seedable_sampler, data_seed=data_seed, non_blocking=non_blocking,
        use_stateful_dataloader=use_stateful_dataloader)


def skip_first_batches(dataloader, num_batches=0):
    """A loader whose next epoch skips its first num_batches batches: a prepared loader itself (in place);
    for a torch DataLoader, one over SkipBatchSampler (an IterableDataset's: a SkipDataLoader, which reads
    and drops them)."""
    if hasattr(dataloader, "skip_first_batches"):
        dataloader.skip_first_batches(num_batches)
        return dataloader
    import torch
    from . import _torch_adapter, _torch_data, _torch_loader
    kwargs = _torch_loader._kept_kwargs(dataloader)
    if isinstance(dataloader.dataset, torch.utils.data.IterableDataset):
        return _torch_adapter.SkipDataLoader(dataloader.dataset, skip_batches=num_batches,
                                             batch_size=dataloader.batch_size, drop_last=dataloader.drop_last, **kwargs)
    sampler_is_batch_sampler = isinstance(dataloader.sampler, torch.utils.data.BatchSampler)
    batch_sampler = dataloader.sampler if sampler_is_batch_sampler else dataloader.batch_sampler
    return torch.utils.data.DataLoader(dataloader.dataset,
                                       batch_sampler=_torch_data.SkipBatchSampler(batch_sampler, num_batches), **kwargs)
