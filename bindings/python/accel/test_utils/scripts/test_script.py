"""The process state and the training loop on every process of a run: the shared state, main_process_first and
the on_*_process decorators, split_between_processes (lists, padding, dicts, tensors), random number
generators synchronised from the main process, prepare_data_loader's shards (in order, shuffled, split,
dispatched), a custom batch sampler kept, the seedable sampler's replays, training by prepare that ends with
the weights one process gets training on the whole batch (with and without split_batches, the seedable
sampler, bf16), set_trigger / check_trigger, and the error for an Accelerator whose state was reset. Run as
a script (`accel launch --nproc-per-node 2 --cpu -m accel.test_utils.scripts.test_script`) or through
main() (debug_launcher(test_script.main)); any failure raises."""
import contextlib
import io
import math
import pathlib
import shutil
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader

from accel import Accelerator
from accel.data_loader import SeedableRandomSampler, prepare_data_loader
from accel.state import AcceleratorState, PartialState
from accel.test_utils.testing import are_the_same_tensors, assert_exception
from accel.test_utils.training import RegressionDataset, RegressionModel
from accel.utils import (DataLoaderConfiguration, broadcast_object_list, gather, is_bf16_available, set_seed,
                         synchronize_rng_states)

EPOCHS = 3


def check_shared_state(accelerator):
    """PartialState and AcceleratorState, made any number of times, describe the Accelerator's process."""
    for state in (PartialState(), AcceleratorState(), AcceleratorState()):
        assert (state.num_processes, state.process_index, state.device) == \
            (accelerator.num_processes, accelerator.process_index, accelerator.device)
        assert f"Num processes: {accelerator.num_processes}" in repr(state)


def shared_folder(accelerator):
    """A new temporary folder the main process makes and names to every process (one machine)."""
    return pathlib.Path(broadcast_object_list([tempfile.mkdtemp() if accelerator.is_main_process else None])[0])


def check_main_process_first(accelerator):
    """Inside main_process_first the main process runs to the end of the block before any other starts it,
    however slow it is."""
    folder = shared_folder(accelerator)
    log = folder / "order.txt"
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            time.sleep(0.1)
        with open(log, "a") as out:
            out.write(f"{accelerator.process_index}\n")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        order = log.read_text().split()
        shutil.rmtree(folder)
        assert order[0] == "0" and sorted(order) == sorted(map(str, range(accelerator.num_processes))), order


def check_decorators(accelerator):
    """The on_*_process decorators run the function on the processes they name only (None elsewhere)."""
    def say(what):
        print(what)
        return what

    def ran(decorated):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            result = decorated("said")
        assert (result == "said") == (output.getvalue() == "said\n"), (result, output.getvalue())
        return result == "said"

    assert ran(accelerator.on_main_process(say)) == accelerator.is_main_process
    assert ran(accelerator.on_local_main_process(say)) == accelerator.is_local_main_process
    assert ran(accelerator.on_last_process(say)) == accelerator.is_last_process
    for index in range(accelerator.num_processes):
        assert ran(accelerator.on_process(say, process_index=index)) == (accelerator.process_index == index)
        assert ran(accelerator.on_local_process(say, local_process_index=index)) == \
            (accelerator.local_process_index == index)


def expected_share(length, accelerator):
    """(start, count) of this process's share of length items: contiguous, in process order, the first
    length % num_processes processes holding one more."""
    each, extra = divmod(length, accelerator.num_processes)
    index = accelerator.process_index
    return index * each + min(index, extra), each + (1 if index < extra else 0)


def check_split_between_processes(accelerator):
    """Each process gets its contiguous share of lists, of every value of a dict alike, and of a tensor's
    rows; with apply_padding every share has the length of the longest, its own items first."""
    n = accelerator.num_processes
    for length in (2 * n, 3 * n - 1, 17):
        items = list(range(length))
        start, count = expected_share(length, accelerator)
        with accelerator.split_between_processes(items) as share:
            assert share == items[start:start + count], (length, share)
        with accelerator.split_between_processes(items, apply_padding=True) as share:
            assert len(share) == math.ceil(length / n) and share[:count] == items[start:start + count], share
    letters = [chr(ord("a") + i) for i in range(8)]
    start, count = expected_share(8, accelerator)
    with accelerator.split_between_processes({"n": list(range(8)), "s": letters, "t": torch.arange(8)}) as share:
        assert share["n"] == list(range(start, start + count)) and share["s"] == letters[start:start + count]
        assert share["t"].tolist() == list(range(start, start + count))
    rows = torch.arange(4 * n).view(n, 4).to(accelerator.device)
    with accelerator.split_between_processes(rows) as share:
        assert share.tolist() == [list(range(4 * accelerator.process_index, 4 * accelerator.process_index + 4))]


def check_rng_synchronisation(accelerator):
    """synchronize_rng_states gives every process the main process's torch generator state, and a
    generator's."""
    torch.manual_seed(accelerator.process_index)
    generator = torch.Generator().manual_seed(accelerator.process_index)
    synchronize_rng_states(["torch"])
    synchronize_rng_states(["generator"], generator=generator)
    assert are_the_same_tensors(torch.get_rng_state()), "torch's generator differs between the processes"
    assert are_the_same_tensors(generator.get_state()), "the generator differs between the processes"


def gathered_epoch(loader):
    """Every process's batches of an epoch, gathered and concatenated in order."""
    return torch.cat([gather(batch) for batch in loader]).cpu().tolist()


def check_prepare_data_loader(accelerator):
    """prepare_data_loader deals every sample once, in the loader's order (or the same shuffle on every
    process): per process or split from the global batch, read on each process or dispatched from the
    main one."""
    n, length = accelerator.num_processes, 32 * accelerator.num_processes
    for split_batches in (False, True):
        for dispatch_batches in (False, True):
            for shuffle in (False, True):
                loader = DataLoader(range(length), batch_size=8 * n if split_batches else 8, shuffle=shuffle)
                prepared = prepare_data_loader(loader, accelerator.device, n, accelerator.process_index,
                                               put_on_device=True, split_batches=split_batches,
                                               dispatch_batches=dispatch_batches)
                seen = gathered_epoch(prepared)
                what = f"split_batches={split_batches}, dispatch_batches={dispatch_batches}, shuffle={shuffle}"
                assert (sorted(seen) if shuffle else seen) == list(range(length)), f"{what}: {seen}"


class ArraySplitBatchSampler:
    """A batch sampler of the user's own (no torch base class): the indices in batch_size-sized parts."""

    def __init__(self, length, batch_size):
        self.indices, self.batch_size = np.arange(length), batch_size

    def __iter__(self):
        yield from np.array_split(np.random.permutation(self.indices), len(self))

    def __len__(self):
        return math.ceil(len(self.indices) / self.batch_size)


def check_custom_batch_sampler_kept(accelerator):
    """A prepared loader keeps the user's batch sampler (wrapped for sharding with several processes)."""
    dataset = list(range(32 * accelerator.num_processes))
    prepared = prepare_data_loader(DataLoader(dataset, batch_sampler=ArraySplitBatchSampler(len(dataset), 8)),
                                   accelerator.device, accelerator.num_processes, accelerator.process_index)
    kept = getattr(prepared.batch_sampler, "batch_sampler", prepared.batch_sampler)
    assert isinstance(kept, ArraySplitBatchSampler), type(kept)


def check_seedable_sampler(_accelerator):
    """With use_seedable_sampler, set_seed and set_epoch replay the same shuffles; with several processes the
    sampler inside the sharding batch sampler is the seedable one."""
    accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True))
    set_seed(42)
    loader = accelerator.prepare(DataLoader(RegressionDataset(length=10, seed=42), batch_size=2, shuffle=True))

    def three_epochs():
        return torch.cat([batch["x"] for _ in range(3) for batch in loader])

    first = three_epochs()
    set_seed(42)
    loader.set_epoch(0)
    assert torch.equal(first, three_epochs()), "the same seed and epoch did not give the same samples"
    if accelerator.num_processes > 1:
        prepared = prepare_data_loader(DataLoader(list(range(10)), batch_size=1, shuffle=True),
                                       use_seedable_sampler=True)
        sampler = prepared.batch_sampler.batch_sampler.sampler
        assert isinstance(sampler, SeedableRandomSampler), type(sampler)


def shuffled_loader(dataset, batch_size, generator, use_seedable_sampler):
    """A shuffling DataLoader drawing its orders from generator (through a SeedableRandomSampler, or torch's
    RandomSampler)."""
    if use_seedable_sampler:
        sampler = SeedableRandomSampler(generator=generator, data_source=dataset, num_samples=len(dataset))
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def train(model, loader, optimizer, backward, generator):
    """EPOCHS epochs of SGD on the mean squared error, from seed 42 (torch's and generator's)."""
    set_seed(42)
    generator.manual_seed(42)
    for _ in range(EPOCHS):
        for batch in loader:
            model.zero_grad()
            backward(torch.nn.functional.mse_loss(model(batch["x"]), batch["y"]))
            optimizer.step()


def trained_weights(accelerator, dataset, batch_size, use_seedable_sampler):
    """(a, b) of a RegressionModel trained by accelerator's prepare on batch_size-sample batches."""
    generator = torch.Generator()
    model = RegressionModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader, model, optimizer = accelerator.prepare(shuffled_loader(dataset, batch_size, generator,
                                                                   use_seedable_sampler), model, optimizer)
    train(model, loader, optimizer, accelerator.backward, generator)
    model = accelerator.unwrap_model(model).cpu()
    return model.a.detach(), model.b.detach()


def check_training_matches_one_process(use_seedable_sampler):
    """Training by prepare, 8 samples per process (or split from the global batch), ends with the weights
    that one process gets training on every process's samples at once; so does bf16, this model's
    operations staying float32 under autocast."""
    config = {"use_seedable_sampler": use_seedable_sampler}
    per_process = Accelerator(dataloader_config=DataLoaderConfiguration(**config))
    n = per_process.num_processes
    dataset = RegressionDataset(length=32 * n, seed=42)
    generator = torch.Generator()
    reference = RegressionModel()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    train(reference, shuffled_loader(dataset, 8 * n, generator, use_seedable_sampler), optimizer,
          lambda loss: loss.backward(), generator)
    assert are_the_same_tensors(reference.a) and are_the_same_tensors(reference.b)
    runs = [("per process", per_process, 8),
            ("split", Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True, **config)), 8 * n)]
    for name, accelerator, batch_size in runs:
        a, b = trained_weights(accelerator, dataset, batch_size, use_seedable_sampler)
        assert torch.allclose(reference.a, a) and torch.allclose(reference.b, b), \
            f"{name}: ({a}, {b}) != ({reference.a}, {reference.b})"
    if is_bf16_available():
        AcceleratorState._reset_state()
        accelerator = Accelerator(mixed_precision="bf16", dataloader_config=DataLoaderConfiguration(**config))
        a, b = trained_weights(accelerator, dataset, 8, use_seedable_sampler)
        assert torch.allclose(reference.a, a) and torch.allclose(reference.b, b), f"bf16: ({a}, {b})"


def check_trigger(accelerator):
    """set_trigger on one process makes check_trigger true on all, once."""
    assert accelerator.check_trigger() is False
    if accelerator.is_last_process:
        accelerator.set_trigger()
    assert accelerator.check_trigger() is True
    assert accelerator.check_trigger() is False


def check_reset_state_refuses_old_accelerator():
    """After AcceleratorState._reset_state(), an Accelerator made before cannot prepare: an AttributeError
    (Accelerate's kind) saying so."""
    AcceleratorState._reset_state()
    accelerator = Accelerator()
    AcceleratorState._reset_state()
    with assert_exception(AttributeError, "AcceleratorState._reset_state()"):
        accelerator.prepare(torch.nn.Linear(1, 1))


def main():
    accelerator = Accelerator()
    accelerator.print(f"test_script on {accelerator.num_processes} processes")
    for check in (check_shared_state, check_main_process_first, check_decorators, check_split_between_processes,
                  check_rng_synchronisation, check_prepare_data_loader, check_custom_batch_sampler_kept,
                  check_seedable_sampler):
        accelerator.print(check.__name__)
        check(accelerator)
    for use_seedable_sampler in (False, True):
        # PartialState's print: the run before reset the state this Accelerator was made on.
        PartialState().print(f"check_training_matches_one_process: use_seedable_sampler={use_seedable_sampler}")
        check_training_matches_one_process(use_seedable_sampler)
    accelerator = Accelerator()  # the bf16 runs reset the state main() began with
    accelerator.print("check_trigger")
    check_trigger(accelerator)
    accelerator.print("check_reset_state_refuses_old_accelerator")
    check_reset_state_refuses_old_accelerator()
    PartialState().destroy_process_group()


if __name__ == "__main__":
    main()
