"""Accelerate's DataLoaderStateMixin: a loader's place in its epoch, as GradientState reads it."""
import contextlib


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
