"""Gradient synchronisation of a prepared torch module on every process of a run, checked against a plain copy
of the module that sees every process's batch at once (what one process training on the global batch
computes): no_sync (nothing to hold back with one process; with several, local gradients until the next
synchronising backward), several forwards under no_sync whose backwards come later (trigger_sync_in_backward
synchronising the last), accumulate with gradient_accumulation_steps=2 under every combination of
split_batches, dispatch_batches and sync_each_batch, the same with an optimizer and an LR scheduler (the
weights and learning rate equal to the copy's after every step), and GradientState's view of a loop over a
prepared loader nested in another's. Run as a script (`accel launch --nproc-per-node 2 --cpu -m
accel.test_utils.scripts.test_sync`) or through main() (debug_launcher(test_sync.main)); any failure raises.

A process has one accel state, whose accumulation settings are fixed: each accumulation set-up resets it
(AcceleratorState._reset_state) and makes its own Accelerator, where Accelerate's scripts make a second
Accelerator that replaces the first one's GradientAccumulationPlugin."""
import copy
import itertools

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from accel import Accelerator
from accel.state import AcceleratorState
from accel.test_utils.training import RegressionDataset, RegressionModel
from accel.utils import DataLoaderConfiguration, GradientAccumulationPlugin, set_seed

ACCUMULATION_STEPS = 2


def training_setup(accelerator, with_optimizer=False):
    """(reference, reference optimizer, reference scheduler), then the prepared (model, optimizer,
    scheduler) and a prepared loader of 80 regression samples, 16 per batch (8 per process with
    split_batches, which needs a multiple of the processes); the reference is an unprepared copy of the same
    initial model. Without with_optimizer the optimizers and schedulers are None."""
    set_seed(42)
    model = RegressionModel()
    reference = copy.deepcopy(model)
    batch_size = 8 * accelerator.num_processes if accelerator.split_batches else 16
    loader = DataLoader(RegressionDataset(length=80), batch_size=batch_size)
    if not with_optimizer:
        prepared_model, prepared_loader = accelerator.prepare(model, loader)
        return (reference, None, None), (prepared_model, None, None), prepared_loader
    optimizers = [torch.optim.AdamW(params=m.parameters(), lr=1e-3) for m in (reference, model)]
    # lr grows with the step: a scheduler stepped too often or too rarely shows in the learning rate.
    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda step: step ** 0.65) for o in optimizers]
    prepared = accelerator.prepare(model, optimizers[1], schedulers[1], loader)
    return (reference, optimizers[0], schedulers[0]), prepared[:3], prepared[3]


def backward(model, batch, accelerator, reference=False):
    """One forward and backward of model on batch (x, y). The reference's loss is divided by the
    accumulation steps by hand, as accelerator.backward divides the prepared model's."""
    output = model(batch[0])
    loss = F.mse_loss(output, batch[1].to(output.device))
    if reference:
        (loss / accelerator.gradient_accumulation_steps).backward()
    else:
        accelerator.backward(loss)


def global_batch(accelerator, batch):
    """Every process's (x, y) of this step, concatenated: the batch the reference trains on."""
    return accelerator.gather((batch["x"], batch["y"]))


def assert_gradients(reference, model, in_sync, what, **tolerance):
    """The prepared model's gradients equal (in_sync) or differ from the reference's, parameter by
    parameter."""
    for (name, expected), actual in zip(reference.named_parameters(), model.parameters()):
        same = torch.allclose(expected.grad, actual.grad.cpu(), **tolerance)
        assert same == in_sync, (f"{what}: gradient of {name} {'differs from' if in_sync else 'equals'} the "
                                 f"reference's: {actual.grad} vs {expected.grad}")


def check_no_sync(accelerator):
    """Backwards under no_sync keep their gradients local; the next backward outside it averages what each
    process accumulated, which is then the reference's sum again. With one process every backward is the
    reference's."""
    (reference, _, _), (model, _, _), loader = training_setup(accelerator)
    for iteration, batch in enumerate(itertools.islice(loader, 3)):
        backward(reference, global_batch(accelerator, batch), accelerator, reference=True)
        held_back = iteration % 2 == 0
        if held_back:
            with accelerator.no_sync(model):
                backward(model, (batch["x"], batch["y"]), accelerator)
        else:
            backward(model, (batch["x"], batch["y"]), accelerator)
        in_sync = not held_back or accelerator.num_processes == 1
        assert_gradients(reference, model, in_sync, f"no_sync, iteration {iteration}")


def check_no_sync_with_several_forwards(accelerator):
    """Three forwards under no_sync, then their backwards: the first two leave partial local sums, the last,
    under trigger_sync_in_backward, averages the processes' sums into the reference's."""
    (reference, _, _), (model, _, _), loader = training_setup(accelerator)
    losses = []
    for batch in itertools.islice(loader, 3):
        backward(reference, global_batch(accelerator, batch), accelerator, reference=True)
        with accelerator.no_sync(model):
            losses.append(F.mse_loss(model(batch["x"]), batch["y"]))
    for index, loss in enumerate(losses):
        if index < len(losses) - 1:
            accelerator.backward(loss)
            assert_gradients(reference, model, False, f"several forwards, backward {index}")
        else:
            with accelerator.trigger_sync_in_backward(model):
                accelerator.backward(loss)
            assert_gradients(reference, model, True, f"several forwards, last backward")


def check_dataloader_break(accelerator):
    """GradientState follows the innermost prepared loader being iterated: a loop over a second loader inside
    the first one's makes it the active one until it ends, then the first is active again; end_of_dataloader
    is true on each loader's last batch only; after both, no loader is active."""
    first, second = accelerator.prepare(DataLoader(RegressionDataset(length=80), batch_size=16),
                                        DataLoader(RegressionDataset(length=96), batch_size=16))
    state = accelerator.gradient_state
    assert state.active_dataloader is None
    for index, _ in enumerate(first):
        assert state.active_dataloader is first
        assert state.end_of_dataloader == (index == len(first) - 1), f"first loader, batch {index}"
        if index == 1:
            for inner, _ in enumerate(second):
                assert state.active_dataloader is second
                assert state.end_of_dataloader == (inner == len(second) - 1), f"second loader, batch {inner}"
            assert state.active_dataloader is first
    assert state.active_dataloader is None


def accumulating_accelerator(split_batches, dispatch_batches, sync_each_batch):
    """A fresh state accumulating ACCUMULATION_STEPS batches per step (see the module's docstring)."""
    AcceleratorState._reset_state()
    return Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=split_batches,
                                                                 dispatch_batches=dispatch_batches),
                       gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=ACCUMULATION_STEPS,
                                                                              sync_each_batch=sync_each_batch))


def is_step_end(iteration, loader):
    """Whether the accumulation window closes at this batch: every ACCUMULATION_STEPS batches, and at the
    loader's end."""
    return (iteration + 1) % ACCUMULATION_STEPS == 0 or iteration == len(loader) - 1


def check_accumulate(split_batches, dispatch_batches, sync_each_batch):
    """Under accumulate, gradients are synchronised where the window closes (every sync_each_batch batch),
    local in between; the reference accumulates the global batch's."""
    accelerator = accumulating_accelerator(split_batches, dispatch_batches, sync_each_batch)
    (reference, _, _), (model, _, _), loader = training_setup(accelerator)
    for iteration, batch in enumerate(loader):
        backward(reference, global_batch(accelerator, batch), accelerator, reference=True)
        with accelerator.accumulate(model):
            backward(model, (batch["x"], batch["y"]), accelerator)
        in_sync = is_step_end(iteration, loader) or sync_each_batch or accelerator.num_processes == 1
        assert accelerator.sync_gradients == is_step_end(iteration, loader), f"sync_gradients, batch {iteration}"
        assert_gradients(reference, model, in_sync, f"accumulate, batch {iteration}")


def check_accumulate_with_optimizer_and_scheduler(split_batches, dispatch_batches, sync_each_batch):
    """The prepared optimizer steps, and its scheduler with it (once per process, once in all with
    split_batches), only where the window closes: the learning rate is the reference's after every batch,
    the weights too after every step, and the gradients in sync as under check_accumulate."""
    accelerator = accumulating_accelerator(split_batches, dispatch_batches, sync_each_batch)
    (reference, reference_optimizer, reference_scheduler), (model, optimizer, scheduler), loader = \
        training_setup(accelerator, with_optimizer=True)
    scheduler_steps = 1 if split_batches else accelerator.num_processes
    for iteration, batch in enumerate(loader):
        backward(reference, global_batch(accelerator, batch), accelerator, reference=True)
        with accelerator.accumulate(model):
            backward(model, (batch["x"], batch["y"]), accelerator)
            in_sync = is_step_end(iteration, loader) or sync_each_batch or accelerator.num_processes == 1
            assert_gradients(reference, model, in_sync, f"optimizer and scheduler, batch {iteration}", rtol=1e-5)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        if is_step_end(iteration, loader):
            reference_optimizer.step()
            for _ in range(scheduler_steps):
                reference_scheduler.step()
            reference_optimizer.zero_grad()
            for (name, expected), actual in zip(reference.named_parameters(), model.parameters()):
                assert torch.allclose(expected, actual.detach().cpu(), rtol=1e-5), \
                    f"batch {iteration}: weight {name} {actual} != {expected}"
        assert reference_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"], \
            f"batch {iteration}: lr {optimizer.param_groups[0]['lr']} != {reference_optimizer.param_groups[0]['lr']}"


def main():
    accelerator = Accelerator()
    accelerator.print(f"test_sync on {accelerator.num_processes} processes")
    for check in (check_dataloader_break, check_no_sync, check_no_sync_with_several_forwards):
        accelerator.print(check.__name__)
        check(accelerator)
    for check in (check_accumulate, check_accumulate_with_optimizer_and_scheduler):
        for split_batches, dispatch_batches, sync_each_batch in itertools.product((False, True), repeat=3):
            AcceleratorState().print(f"{check.__name__}: split_batches={split_batches}, "
                                     f"dispatch_batches={dispatch_batches}, sync_each_batch={sync_each_batch}")
            check(split_batches, dispatch_batches, sync_each_batch)
    AcceleratorState().destroy_process_group()


if __name__ == "__main__":
    main()
