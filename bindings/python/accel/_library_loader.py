"""accel.DataLoader, the library's loader (accel_loader_t): this rank's batches as dicts of accel.Tensor."""
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
