"""Accelerate's DataLoaderAdapter, the base of its loaders, and SkipDataLoader: wrappers around a torch
DataLoader that pass for one.
"""
from torch.utils.data import DataLoader

from ._loader_state import DataLoaderStateMixin
from .state import GradientState


def _unpickled(cls):
    """An empty instance for pickle to fill (cls, not the base class __class__ reports)."""
    return cls.__new__(cls)


class DataLoaderAdapter:
    """base_dataloader is torch's DataLoader(dataset, batch_sampler=batch_sampler, **kwargs): its settings
    read through (loader.batch_size, .sampler, .collate_fn, ...), len() is its length, and
    isinstance(loader, torch.utils.data.DataLoader) holds, as under Accelerate (__class__ reports the
    base's class, for code that checks for a DataLoader). use_stateful_dataloader is kept as given: accel
    has no torchdata, and its prepared loaders have a state_dict() of their own."""

    def __init__(self, dataset, use_stateful_dataloader=False, batch_sampler=None, **kwargs):
        self.use_stateful_dataloader = use_stateful_dataloader
        self.base_dataloader = DataLoader(dataset, batch_sampler=batch_sampler, **kwargs)

    def __getattr__(self, name):
        # Only reached for what the wrapper lacks; base_dataloader itself may not be there yet (unpickling).
        if name == "base_dataloader":
            raise AttributeError(name)
        return getattr(self.base_dataloader, name)

    @property
    def __class__(self):
        return self.base_dataloader.__class__

    def __len__(self):
        return len(self.base_dataloader)

    def __reduce__(self):
        # pickle's default would rebuild __class__, the base's class: rebuilt as the wrapper's own.
        return _unpickled, (type(self),), self.__getstate__()

    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, state):
        self.__dict__.update(state)


class SkipDataLoader(DataLoaderAdapter, DataLoaderStateMixin):
    """A DataLoader whose every epoch reads and drops its first skip_batches batches (Accelerate's
    SkipDataLoader; len() counts what is left). Its batches are the DataLoader's own, read by torch."""

    def __init__(self, dataset, skip_batches=0, use_stateful_dataloader=False, **kwargs):
        super().__init__(dataset, use_stateful_dataloader=use_stateful_dataloader, **kwargs)
        self.skip_batches = skip_batches
        self.gradient_state = GradientState()

    def __iter__(self):
        self.begin()
        for index, batch in enumerate(self.base_dataloader):
            if index >= self.skip_batches:
                yield batch
        self.end()

    def __len__(self):
        return len(self.base_dataloader) - self.skip_batches
