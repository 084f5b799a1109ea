"""accel.dealing: Accelerate's data rules (BatchSamplerShard, IterableDatasetShard, DataLoaderDispatcher's
slicing) as the library deals them (accel/dealing.h), for the samplers of accel.data_loader: a Dealer is
fed one epoch's base batches, or a stream's item positions, and yields this process's batches."""
from ._handle import Handle
from ._library import ffi, lib
from .errors import check


class Dealer(Handle):
    """One epoch's dealing; make it with shard(), iterable() or dispatch()."""
    _free = lib.accel_dealer_free

    def __init__(self, pointer):
        super().__init__(pointer)
        # accel_dealer_next's out-parameters, made once: a dealer is asked for batches after every push.
        self._next = (ffi.new("int64_t **"), ffi.new("size_t *"), ffi.new("int *"))

    @classmethod
    def _made_by(cls, new, *arguments):
        out = ffi.new("accel_dealer_t **")
        check(new(out, *arguments))
        return cls(out[0])

    @classmethod
    def shard(cls, batch_size, drop_last, num_processes, process_index, split_batches, even_batches):
        """BatchSamplerShard's batches of base batches of batch_size (None: dynamic batch sizes)."""
        return cls._made_by(lib.accel_dealer_new_shard, batch_size or 0, int(bool(drop_last)), num_processes,
                            process_index, int(bool(split_batches)), int(bool(even_batches)))

    @classmethod
    def iterable(cls, batch_size, drop_last, num_processes, process_index, split_batches):
        """IterableDatasetShard's: this process's slice of each global batch, as positions in the stream."""
        return cls._made_by(lib.accel_dealer_new_iterable, batch_size, int(bool(drop_last)), num_processes,
                            process_index, int(bool(split_batches)))

    @classmethod
    def dispatch(cls, num_processes, process_index, split_batches, drop_last):
        """DataLoaderDispatcher's: this process's rows of each step rank 0 reads."""
        return cls._made_by(lib.accel_dealer_new_dispatch, num_processes, process_index, int(bool(split_batches)),
                            int(bool(drop_last)))

    def push(self, indices):
        """Feeds the next base batch (or item positions); returns the batches this process yields now."""
        indices = list(indices)
        check(lib.accel_dealer_push(self.pointer, ffi.new("int64_t[]", indices), len(indices)))
        return self._ready()

    def finish(self):
        """Ends the epoch; returns the batches this process yields after the last base batch."""
        check(lib.accel_dealer_finish(self.pointer))
        return self._ready()

    def _ready(self):
        indices, count, has_batch = self._next
        batches = []
        while True:
            check(lib.accel_dealer_next(self.pointer, indices, count, has_batch))
            if not has_batch[0]:
                return batches
            batches.append(ffi.unpack(indices[0], count[0]))

    def length(self, base_len, last_batch_size=0):
        """Batches this process yields for base_len base batches (stream items, for an iterable dealer), the
        last of last_batch_size indices (needed only by a shard of a fixed batch size)."""
        out = ffi.new("int64_t *")
        check(lib.accel_dealer_length(self.pointer, base_len, last_batch_size, out))
        return out[0]

    @property
    def remainder(self):
        """After finish(): the rows of the last dispatched step before completion; -1 otherwise."""
        out = ffi.new("int64_t *")
        check(lib.accel_dealer_remainder(self.pointer, out))
        return out[0]


def deal(dealer, base_batches):
    """Every batch a shard or iterable dealer yields for these base batches (lists of any items: the dealer
    deals their positions in the stream, mapped back here), in order, then finishes it. Lazily, keeping only
    the items a later batch can still name: those pushed until the first batch was yielded (the padding
    source) and those of the latest push."""
    items, pushed, unpinned = {}, 0, None
    for batch in base_batches:
        positions = range(pushed, pushed + len(batch))
        items.update(zip(positions, batch))
        pushed = positions.stop
        dealt = _named(dealer.push(positions), items)
        if dealt and unpinned is None:
            unpinned = pushed
        elif dealt:
            for position in range(unpinned, positions.start):
                del items[position]
            unpinned = positions.start
        yield from dealt
    yield from _named(dealer.finish(), items)


def deal_all(dealer, base_batches):
    """The list of every batch any dealer (a dispatch dealer too, which holds a step back) yields for these
    base batches (a list of lists of any items)."""
    items = [item for batch in base_batches for item in batch]
    starts = [0]
    for batch in base_batches:
        starts.append(starts[-1] + len(batch))
    dealt = [batch for start, stop in zip(starts, starts[1:]) for batch in dealer.push(range(start, stop))]
    return _named(dealt + dealer.finish(), items)


def _named(batches, items):
    return [[items[position] for position in batch] for batch in batches]
