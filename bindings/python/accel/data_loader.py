"""accel.DataLoader, a prepared loader (Accelerate's DataLoaderShard / DataLoaderDispatcher): this rank's
batches, on the state's device, as Accelerate would deal them.

Iterating yields one epoch of batches, each a dict of field name to accel.Tensor (zero-copy; .numpy(),
.torch(), or pass them straight to a model). Unlike a torch DataLoader, a loop left early does not
restart the epoch: the next iteration continues it, as accel_loader_next does.

Also Accelerate's accelerate.data_loader names: DataLoaderStateMixin, prepare_data_loader and
skip_first_batches here; the samplers, shards and loader classes over torch's objects in the modules
_TORCH_NAMES lists.
"""
import importlib

from . import state as state_module
from ._library_loader import DataLoader  # noqa: F401 (accel.data_loader's name)
from ._loader_state import DataLoaderStateMixin  # noqa: F401 (accel.data_loader's name)


# Accelerate's accel.data_loader names over torch samplers, datasets and DataLoaders: defined in modules
# that import torch, loaded when first asked for, so that numpy-only programs never import torch.
_TORCH_NAMES = {
    "SeedableRandomSampler": "_torch_data", "BatchSamplerShard": "_torch_data", "IterableDatasetShard": "_torch_data",
    "SkipBatchSampler": "_torch_data", "DataLoaderAdapter": "_torch_adapter", "SkipDataLoader": "_torch_adapter",
    "DataLoaderShard": "_torch_shards", "DataLoaderDispatcher": "_torch_shards",
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
    from . import _torch_prepare
    return _torch_prepare.prepare_data_loader(
        state_module.PartialState()._accelerator, dataloader, device=device, num_processes=num_processes,
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
    kwargs = _torch_loader.kept_kwargs(dataloader)
    if isinstance(dataloader.dataset, torch.utils.data.IterableDataset):
        return _torch_adapter.SkipDataLoader(dataloader.dataset, skip_batches=num_batches,
                                             batch_size=dataloader.batch_size, drop_last=dataloader.drop_last, **kwargs)
    sampler_is_batch_sampler = isinstance(dataloader.sampler, torch.utils.data.BatchSampler)
    batch_sampler = dataloader.sampler if sampler_is_batch_sampler else dataloader.batch_sampler
    return torch.utils.data.DataLoader(dataloader.dataset,
                                       batch_sampler=_torch_data.SkipBatchSampler(batch_sampler, num_batches), **kwargs)
