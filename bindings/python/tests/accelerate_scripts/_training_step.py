"""Accelerate's training step, shared by the scripts of this folder that train as its documentation writes
it. A module the scripts import (launched as `python script.py`, their folder is on sys.path), not a script:
test_accelerate_scripts.py runs none whose name starts with "_"."""


def accumulated_step(accelerator, model, optimizer, scheduler, loss_function, inputs, targets):
    """One batch of Accelerate's loop: under accumulate(model), the loss, backward, the optimizer's step,
    the scheduler's (none when scheduler is None) and zero_grad, which the prepared optimizer and scheduler
    carry out only where accumulate() ends a step. Returns the loss."""
    with accelerator.accumulate(model):
        loss = loss_function(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
    return loss
