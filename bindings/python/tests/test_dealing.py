"""accel.dealing, through which the package's BatchSamplerShard, IterableDatasetShard and dispatcher deal:
Accelerate's vectors, items of any kind (the library deals their positions), the lazy deal keeping only
what a later batch can name, lengths that are the batches really yielded, and bad settings refused."""
import pytest

from accel.dealing import Dealer, deal, deal_all
from accel.errors import AccelError


def _batches(items, batch_size):
    return [items[start:start + batch_size] for start in range(0, len(items), batch_size)]


def test_a_shard_deals_accelerates_batches_of_any_items():
    # accelerate-semantics.md 1.4: range(21), batch 3, 2 processes; rank 1's last batch is padded from the start.
    names = [f"sample{i}" for i in range(21)]
    with Dealer.shard(3, False, 2, 1, False, True) as dealer:
        dealt = list(deal(dealer, _batches(names, 3)))
        assert dealer.length(7, 3) == len(dealt) == 4
    assert dealt == [names[3:6], names[9:12], names[15:18], names[0:3]]


@pytest.mark.parametrize("split_batches, even_batches, drop_last", [
    (False, True, False), (False, False, False), (True, True, False), (True, False, False), (False, True, True)])
def test_the_lazy_deal_of_a_long_epoch_is_the_eager_one(split_batches, even_batches, drop_last):
    items = list(range(1003))
    base = _batches(items, 4)
    if drop_last:
        base = base[:-1]
    for rank in range(2):
        made = lambda: Dealer.shard(4, drop_last, 2, rank, split_batches, even_batches)  # noqa: E731
        with made() as lazy, made() as eager:
            assert list(deal(lazy, iter(base))) == deal_all(eager, base)


def test_an_iterable_shard_pads_the_last_global_batch_from_the_first():
    stream = ["a", "b", "c", "d", "e", "f", "g"]
    with Dealer.iterable(2, False, 2, 1, False) as dealer:
        dealt = list(deal(dealer, ([item] for item in stream)))
        assert dealer.length(len(stream)) == len(dealt)
    assert dealt == [["c", "d"], ["g", "a"]]  # global batches abcd, efg+a; rank 1 keeps the second half


def test_a_dispatch_holds_its_last_step_until_the_epoch_ends_and_reports_the_remainder():
    with Dealer.dispatch(2, 0, False, False) as dealer:
        assert dealer.push([0, 1, 2]) == [] and dealer.push([3, 4, 5]) == []
        assert dealer.push([6, 7, 8]) == []
        assert dealer.push([9]) == [[0, 1, 2]]  # a second whole step: the first was not the last
        assert dealer.finish() == [[6, 7]] and dealer.remainder == 4
        assert dealer.length(4) == 2
    with Dealer.dispatch(2, 1, False, False) as dealer:  # a last step of 3 rows, completed with 0, 1
        assert deal_all(dealer, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]) == [[3, 4, 5], [8, 0]]
        assert dealer.remainder == 3


def test_bad_settings_and_misuse_are_refused_naming_the_problem():
    with pytest.raises(AccelError, match="process_index"):
        Dealer.shard(3, False, 2, 5, False, True)
    with pytest.raises(AccelError, match="round multiple"):
        Dealer.iterable(3, False, 2, 0, True)
    with Dealer.shard(2, False, 1, 0, False, True) as dealer:
        with pytest.raises(AccelError, match="longer than the batch size"):
            dealer.push([0, 1, 2])
        dealer.finish()
        with pytest.raises(AccelError, match="after finish"):
            dealer.push([0])
