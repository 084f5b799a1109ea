"""prepare_data_loader: which of Accelerate's loaders a torch DataLoader becomes for a process, and how."""
import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler

from ._torch_data import BatchSamplerShard, IterableDatasetShard, SeedableRandomSampler
from ._torch_loader import kept_kwargs, prepared_by
from ._torch_shards import DataLoaderDispatcher, DataLoaderShard


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
    kwargs = kept_kwargs(dataloader)
    if iterable:
        kwargs["drop_last"] = dataloader.drop_last
        kwargs["batch_size"] = (dataloader.batch_size // num_processes if split_batches and not dispatch_batches
                                else dataloader.batch_size)
    common = {"_drop_last": dataloader.drop_last, "_non_blocking": non_blocking,
              "use_stateful_dataloader": use_stateful_dataloader}
    with prepared_by(accelerator):
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
