"""accel.TrainStep on one process: each step equals the Accelerate loop it replaces, to the bit; on the CPU
a step asked for a CUDA graph runs eagerly and says why; bad settings raise the accel error of their code."""
import numpy as np
import pytest
import torch

import accel
from tiny_models import MLP, scripted_bytes


class LossOutput(torch.nn.Module):
    """forward(x, labels=...) -> the cross-entropy of a linear layer's logits: the model computes its loss."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, labels: torch.Tensor):
        return torch.nn.functional.cross_entropy(self.linear(x), labels)


def _batches(count=4, rows=8):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(count, rows, 4)).astype(np.float32)
    return [(x[i], (x[i, :, 0] > 0).astype(np.int64) + (x[i, :, 1] > 0)) for i in range(count)]


def _same_weights(model, other):
    for (name, mine), (_, theirs) in zip(model.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=name)


@pytest.mark.parametrize("gradient_accumulation_steps", [1, 2])
def test_each_step_equals_the_loop_it_replaces(make_accelerator, gradient_accumulation_steps):
    accelerator = make_accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
    stepped_source, looped_source = scripted_bytes(MLP), scripted_bytes(MLP)  # the same weights
    settings = dict(lr=0.05, weight_decay=0.01)
    stepped, looped, step_optimizer, loop_optimizer = accelerator.prepare(
        stepped_source, looped_source, accel.OptimizerSpec("adamw", model=stepped_source, **settings),
        accel.OptimizerSpec("adamw", model=looped_source, **settings))
    step_schedule, loop_schedule = accelerator.prepare(
        accel.SchedulerSpec("linear", optimizer=step_optimizer, warmup_steps=1, total_steps=8),
        accel.SchedulerSpec("linear", optimizer=loop_optimizer, warmup_steps=1, total_steps=8))
    step = accelerator.prepare_train_step(stepped, step_optimizer, loss="cross_entropy", label_smoothing=0.1,
                                          max_grad_norm=0.5)
    assert isinstance(step, accel.TrainStep) and step.eager_reason == "no step yet"
    batches = _batches() * 2

    # The step's batches first, then the loop's: the state's accumulation counter stays in phase.
    step_losses = []
    for x, y in batches:
        step_losses.append(step(x, target=y))
        step_schedule.step()
    loop_losses = []
    for x, y in batches:
        with accelerator.accumulate(looped):
            loss = accel.compute_loss("cross_entropy", looped(x), y, label_smoothing=0.1)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(looped, 0.5)
            loop_optimizer.step()
            loop_schedule.step()
            loop_optimizer.zero_grad()
        loop_losses.append(loss.numpy())

    # Each returned loss is a tensor of its own: later steps left it alone.
    np.testing.assert_array_equal(np.array([loss.numpy() for loss in step_losses]), np.array(loop_losses))
    assert all(np.isfinite(loss.item()) for loss in step_losses)
    assert step_losses[-1].item() < step_losses[0].item()
    _same_weights(stepped, looped)
    counts = {name: step.stat(name) for name in ("steps", "eager_steps", "replays", "captures", "warmup_steps")}
    assert counts == {"steps": 8, "eager_steps": 8, "replays": 0, "captures": 0, "warmup_steps": 0}
    assert step.eager_reason == "cuda_graph is off"


def test_a_model_that_returns_its_loss_takes_named_inputs_and_no_target(accelerator):
    stepped_source, looped_source = scripted_bytes(LossOutput), scripted_bytes(LossOutput)
    stepped, looped, step_optimizer, loop_optimizer = accelerator.prepare(
        stepped_source, looped_source, accel.OptimizerSpec("sgd", model=stepped_source, lr=0.5, momentum=0.9),
        accel.OptimizerSpec("sgd", model=looped_source, lr=0.5, momentum=0.9))
    step = accelerator.prepare_train_step(stepped, step_optimizer, loss="output")
    for x, y in _batches(3):
        loss = step(x, labels=y)
        with accelerator.accumulate(looped):
            expected = looped(x, labels=y)
            accelerator.backward(expected)
            loop_optimizer.step()
            loop_optimizer.zero_grad()
        np.testing.assert_array_equal(loss.numpy(), expected.numpy())
    _same_weights(stepped, looped)
    assert step.stat("steps") == 3


def test_cuda_graph_on_the_cpu_runs_eagerly_and_says_why_once(accelerator, capfd):
    model, optimizer = accelerator.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd", lr=0.1))
    step = accelerator.prepare_train_step(model, optimizer, cuda_graph=True, cuda_graph_warmup=1)
    for x, y in _batches(3):
        assert np.isfinite(step(x, target=y).item())
    assert "CUDA" in step.eager_reason, step.eager_reason
    assert (step.stat("eager_steps"), step.stat("warmup_steps"), step.stat("captures"), step.stat("replays")) == (3, 0, 0, 0)
    assert capfd.readouterr().err.count("accel: train step runs eagerly: ") == 1


@pytest.mark.parametrize("settings,error,match", [
    ({"reduction": "none"}, accel.InvalidArgumentError, "reduction"),
    ({"loss": "mse", "label_smoothing": 0.1}, accel.InvalidArgumentError, "label_smoothing"),
    ({"max_grad_norm": -1.0}, accel.InvalidArgumentError, "max_grad_norm"),
    ({"batch_size": 8}, accel.UnknownOptionError, "batch_size"),
    ({"loss": "hinge"}, accel.BadOptionValueError, "hinge"),
    ({"cuda_graph_warmup": 0}, accel.BadOptionValueError, "cuda_graph_warmup"),
])
def test_a_bad_setting_raises_its_accel_error(accelerator, settings, error, match):
    model, optimizer = accelerator.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd"))
    with pytest.raises(error, match=match):
        accelerator.prepare_train_step(model, optimizer, **settings)


def test_a_bad_pairing_batch_or_figure_raises_its_accel_error(accelerator):
    first, second = scripted_bytes(MLP), scripted_bytes(MLP)
    model, other, optimizer, other_optimizer = accelerator.prepare(
        first, second, accel.OptimizerSpec("sgd", model=first), accel.OptimizerSpec("sgd", model=second))
    with pytest.raises(accel.InvalidArgumentError, match="optimizer"):
        accelerator.prepare_train_step(model, other_optimizer)
    with pytest.raises(accel.InvalidStateError, match="prepare"):
        accelerator.prepare_train_step(accel.Model.load(scripted_bytes(MLP)), optimizer)
    step = accelerator.prepare_train_step(model, optimizer)
    x, y = _batches(1)[0]
    with pytest.raises(accel.InvalidArgumentError, match="target"):
        step(x)
    with pytest.raises(accel.TorchError):
        step(x[:, :3], target=y)  # the model takes 4 features
    _same_weights(model, other)  # the refused batches changed no weight
    with pytest.raises(accel.InvalidArgumentError, match="eager_steps"):
        step.stat("loss")
