"""The Accelerator on one process: settings, prepare, the training step and the collectives' plumbing
(their results across processes are checked by test_two_processes.py)."""
import collections
import datetime
import io

import numpy as np
import pytest
import torch

import accel
from tiny_models import MLP, scripted_bytes


def _classification_rows(count=16):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(count, 4)).astype(np.float32)
    return {"x": x, "y": (x[:, 0] > 0).astype(np.int64)}


def test_one_process_describes_itself(accelerator):
    assert (accelerator.num_processes, accelerator.process_index, accelerator.local_process_index,
            accelerator.num_local_processes) == (1, 0, 0, 1)
    assert accelerator.is_main_process and accelerator.is_local_main_process and accelerator.is_last_process
    assert accelerator.distributed_type is accel.DistributedType.NO
    assert (accelerator.device, accelerator.backend, accelerator.mixed_precision) == ("cpu", "", "no")
    assert not accelerator.is_broken and accelerator.gradient_accumulation_steps == 1
    assert repr(accelerator) == "accel.Accelerator(NO, process 0 of 1, device=cpu, mixed_precision=no)"
    assert accel.has_feature("gloo") and "gloo" in accel.features()
    assert torch.__version__.startswith(accel.torch_version())  # this torch and the library share one LibTorch


def test_one_state_per_process_until_end_training(make_accelerator):
    first = make_accelerator(gradient_accumulation_steps=3)
    assert make_accelerator(gradient_accumulation_steps=2).gradient_accumulation_steps == 2  # each its own
    assert first.gradient_accumulation_steps == 3
    with pytest.raises(accel.InvalidStateError, match="mixed_precision"):  # the process's setting
        accel.Accelerator(cpu=True, mixed_precision="bf16")
    first.end_training()
    assert make_accelerator(mixed_precision="bf16").mixed_precision == "bf16"


def test_explicit_settings_win_over_the_environment(monkeypatch, make_accelerator):
    monkeypatch.setenv("ACCEL_GRADIENT_ACCUMULATION_STEPS", "4")
    from_environment = make_accelerator()
    assert from_environment.gradient_accumulation_steps == 4
    from_environment.end_training()
    plugin = accel.GradientAccumulationPlugin(num_steps=5, sync_each_batch=True)
    assert make_accelerator(gradient_accumulation_plugin=plugin).gradient_accumulation_steps == 5
    with pytest.raises(ValueError, match="not both"):
        accel.Accelerator(gradient_accumulation_steps=2, gradient_accumulation_plugin=plugin)


def test_prepare_keeps_the_argument_order_and_resolves_specs(accelerator):
    dataset = accel.Dataset.from_tensors(_classification_rows())
    scheduler, optimizer, loader, model = accelerator.prepare(
        accel.SchedulerSpec("linear", total_steps=10), accel.OptimizerSpec("adam"),
        accel.DataLoaderSpec(dataset, batch_size=4), scripted_bytes(MLP))
    assert (type(scheduler), type(optimizer), type(loader), type(model)) == (
        accel.Scheduler, accel.Optimizer, accel.DataLoader, accel.Model)
    assert isinstance(accelerator.prepare(scripted_bytes(MLP)), accel.Model)  # one in, one out
    with pytest.raises(ValueError, match="prepared 2 models"):
        accelerator.prepare(accel.OptimizerSpec("sgd"))
    named = scripted_bytes(MLP)
    _, second_optimizer = accelerator.prepare(named, accel.OptimizerSpec("sgd", model=named))
    assert second_optimizer.num_groups == 1
    with pytest.raises(accel.InvalidStateError):
        accelerator.prepare(model)  # already prepared
    with pytest.raises(ValueError, match="takes no options"):
        accelerator.prepare(accel.SchedulerSpec(lambda step: 1.0, optimizer=optimizer, warmup_steps=1))


def test_accumulation_syncs_every_n_batches_and_at_the_end_of_the_loader(make_accelerator):
    accelerator = make_accelerator(gradient_accumulation_steps=2)
    model, loader, optimizer = accelerator.prepare(
        scripted_bytes(MLP), accel.DataLoaderSpec(accel.Dataset.from_tensors(_classification_rows(10)), batch_size=2),
        accel.OptimizerSpec("sgd", lr=0.5))
    syncs, changed = [], []
    for batch in loader:
        before = model.state_dict()["fc2.bias"].numpy().copy()
        with accelerator.accumulate(model):
            accelerator.backward(accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"]))
            optimizer.step()
            optimizer.zero_grad()
        syncs.append(accelerator.sync_gradients)
        changed.append(not np.array_equal(before, model.state_dict()["fc2.bias"].numpy()))
    assert syncs == [False, True, False, True, True]
    assert changed == syncs  # the optimizer steps on sync steps only


def test_training_lowers_the_loss_and_the_schedule_follows(accelerator):
    model, loader, optimizer, scheduler = accelerator.prepare(
        scripted_bytes(MLP), accel.DataLoaderSpec(accel.Dataset.from_tensors(_classification_rows()), batch_size=16),
        accel.OptimizerSpec("adamw", lr=0.05, no_decay="*bias", weight_decay=0.01),
        accel.SchedulerSpec("linear", warmup_steps=0, total_steps=40))
    assert optimizer.num_groups == 2 and optimizer.get_lr(1) == pytest.approx(0.05)
    losses = []
    for _ in range(20):
        for batch in loader:
            with accelerator.accumulate(model):
                loss = accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                norm = accelerator.clip_grad_norm_(model, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0] and norm > 0
    assert scheduler.step_count == 20 and scheduler.get_last_lr() == pytest.approx([0.025, 0.025])
    assert optimizer.loss_scale == 1.0 and not optimizer.step_was_skipped
    optimizer.set_lr(0.5)
    assert [optimizer.get_lr(group) for group in (0, 1)] == [0.5, 0.5]


@pytest.mark.parametrize("settings", [{}, {"betas": (0.8, 0.99), "weight_decay": 0.1}])
def test_adamw_takes_torchs_defaults_and_spellings(accelerator, settings):
    """OptimizerSpec("adamw", ...) steps as torch.optim.AdamW(..., same keywords) does: weight_decay 0.01 by
    default (torch's), betas as torch spells them."""
    source = scripted_bytes(MLP)
    model, optimizer = accelerator.prepare(source, accel.OptimizerSpec("adamw", lr=0.1, **settings))
    reference = torch.jit.load(io.BytesIO(source))
    torch_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.1, **settings)
    assert optimizer.get_betas() == pytest.approx(torch_optimizer.param_groups[0]["betas"])
    rows = _classification_rows()
    for _ in range(3):
        accelerator.backward(accel.compute_loss("cross_entropy", model(rows["x"]), rows["y"]))
        optimizer.step()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(reference(torch.from_numpy(rows["x"])), torch.from_numpy(rows["y"])).backward()
        torch_optimizer.step()
        torch_optimizer.zero_grad()
    for name, tensor in reference.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[name].numpy(), tensor.detach().numpy(), rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="not both"):
        accel.OptimizerSpec("adamw", betas=(0.9, 0.99), beta1=0.9)


def test_backward_by_item_count_equals_torchs_full_batch_mean(make_accelerator):
    """Two micro-batches of 3 and 7 rows, each loss summed and normalised by the 10 items of the step: one
    optimizer step moves the weights as torch's mean cross-entropy over all 10 rows does."""
    accelerator = make_accelerator(gradient_accumulation_steps=2)
    source = scripted_bytes(MLP)
    model, optimizer = accelerator.prepare(source, accel.OptimizerSpec("sgd", lr=0.5))
    rows = _classification_rows(10)
    for part in (slice(0, 3), slice(3, 10)):
        with accelerator.accumulate(model):
            loss = accel.compute_loss("cross_entropy", model(rows["x"][part]), rows["y"][part], reduction="sum")
            accelerator.backward(loss, num_items_in_batch=10)
            optimizer.step()
            optimizer.zero_grad()
    reference = torch.jit.load(io.BytesIO(source))
    torch_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    torch.nn.functional.cross_entropy(reference(torch.from_numpy(rows["x"])), torch.from_numpy(rows["y"])).backward()
    torch_optimizer.step()
    for name, tensor in reference.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[name].numpy(), tensor.detach().numpy(), rtol=0, atol=1e-6)
    with pytest.raises(accel.InvalidArgumentError, match="number of items"):
        accelerator.backward(accel.compute_loss("cross_entropy", model(rows["x"]), rows["y"]), num_items_in_batch=0)


def test_clipping(accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    accelerator.backward(accel.compute_loss("cross_entropy", model(np.ones((2, 4), np.float32)), np.array([0, 2])))
    accelerator.clip_grad_norm_(model, 1e-3)
    assert accelerator.clip_grad_norm_(model, 1.0) == pytest.approx(1e-3, rel=1e-3)  # the norm after clipping
    accelerator.clip_grad_value_(model, 1e-4)
    assert accelerator.clip_grad_norm_(model, 1.0) < 1e-3
    with pytest.raises(accel.InvalidArgumentError):
        accelerator.clip_grad_value_(model, -1.0)


def test_backward_takes_a_loss(accelerator):
    weight = torch.ones((), requires_grad=True)
    accelerator.backward(weight * 3.0)  # a torch loss: torch's backward
    assert weight.grad.item() == 3.0
    with pytest.raises(TypeError, match=r"takes a loss .*, not torch.optim.SGD \(an optimizer\)"):
        accelerator.backward(torch.optim.SGD([weight], lr=0.1))


def test_kwargs_handlers_are_accelerates(make_accelerator):
    timeout = accel.InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=30))
    accelerator = make_accelerator(kwargs_handlers=[timeout, accel.DistributedDataParallelKwargs(bucket_cap_mb=1)])
    assert isinstance(accelerator.prepare(scripted_bytes(MLP)), accel.Model)
    accel.Accelerator(cpu=True)  # as in Accelerate, an Accelerator that leaves it unset joins the process's
    longer = accel.InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=31))
    with pytest.raises(accel.InvalidStateError, match="timeout_s=30"):  # the process's state has it
        accel.Accelerator(cpu=True, kwargs_handlers=[longer])
    wrong_bucket = accel.DistributedDataParallelKwargs(bucket_cap_mb=-1)
    with pytest.raises(accel.BadOptionValueError, match="bucket_cap_mb"):
        make_accelerator(kwargs_handlers=[timeout, wrong_bucket]).prepare(scripted_bytes(MLP))
    power_sgd = accel.DistributedDataParallelKwargs(comm_hook="power_sgd")  # Accelerate has it; accel does not
    with pytest.raises(accel.BadOptionValueError, match="grad_compression"):
        make_accelerator(kwargs_handlers=[timeout, power_sgd]).prepare(scripted_bytes(MLP))
    with pytest.raises(TypeError, match="kwargs handler"):
        accel.Accelerator(kwargs_handlers=[object()])


def test_deepspeed_plugin_sets_every_models_zero_stage(make_accelerator):
    """Accelerate's DeepSpeedPlugin(zero_stage=...) (or a dict of it) reaches prepare as the model option
    zero_stage; on one process a stage is accepted and trains as data parallelism does."""
    assert accel.DeepSpeedPlugin().options()["zero_stage"] == 2  # DeepSpeed's default stage
    with pytest.raises(accel.BadOptionValueError, match="zero_stage: 4 is not a ZeRO stage"):
        make_accelerator(deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=4)).prepare(scripted_bytes(MLP))
    # Stage 3 takes a TorchScript model too (gathered whole around its forward; on one process nothing is
    # sharded); 16-bit gathers need the caller's forward.
    make_accelerator(deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=3)).prepare(scripted_bytes(MLP))
    accelerator = make_accelerator(deepspeed_plugin={"zero_stage": 1},
                                   kwargs_handlers=[accel.DistributedDataParallelKwargs(bucket_cap_mb=1)])
    model, loader, optimizer = accelerator.prepare(
        scripted_bytes(MLP), accel.DataLoaderSpec(accel.Dataset.from_tensors(_classification_rows(4)), batch_size=2),
        accel.OptimizerSpec("adamw", lr=0.05))
    before = model.state_dict()["fc2.bias"].numpy().copy()
    for batch in loader:
        accelerator.backward(accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"]))
        accelerator.clip_grad_norm_(model, 1.0)
        optimizer.step()
        optimizer.zero_grad()
    assert not np.array_equal(before, model.state_dict()["fc2.bias"].numpy())


def test_every_accelerator_argument_reaches_its_setting(make_accelerator):
    """Accelerate's arguments without a counterpart before: GradScalerKwargs, rng_types, device_placement,
    the DDP kwargs gradient_as_bucket_view and static_graph, dynamo_backend (refused, saying why)."""
    scaled = make_accelerator(mixed_precision="fp16", kwargs_handlers=[accel.GradScalerKwargs(init_scale=1024)])
    _, optimizer = scaled.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd"))
    assert optimizer.loss_scale == 1024.0
    scaled.end_training()
    unscaled = make_accelerator(mixed_precision="fp16", kwargs_handlers=[accel.GradScalerKwargs(enabled=False)])
    _, optimizer = unscaled.prepare(scripted_bytes(MLP), accel.OptimizerSpec("sgd"))
    assert optimizer.loss_scale == 1.0
    unscaled.end_training()
    with pytest.raises(accel.BadOptionValueError, match="growth_factor"):
        accel.Accelerator(cpu=True, kwargs_handlers=[accel.GradScalerKwargs(growth_factor=1.0)])
    with pytest.raises(accel.UnsupportedError, match="no TorchDynamo"):
        accel.Accelerator(cpu=True, dynamo_backend="inductor")
    ddp = accel.DistributedDataParallelKwargs(gradient_as_bucket_view=True, static_graph=True, comm_hook="bf16")
    accelerator = make_accelerator(rng_types=["generator", "torch"], device_placement=False,
                                   dataloader_config=accel.DataLoaderConfiguration(use_stateful_dataloader=True),
                                   kwargs_handlers=[ddp])
    model, loader = accelerator.prepare(scripted_bytes(MLP), accel.Dataset.from_tensors(_classification_rows(4)))
    assert [batch["x"].shape for batch in loader] == [(1, 4)] * 4
    with pytest.raises(accel.BadOptionValueError, match="numpy"):
        accel.Accelerator(cpu=True, rng_types=["numpy"])


@pytest.mark.parametrize("mixed_precision,inside", [("no", torch.float32), ("bf16", torch.bfloat16),
                                                    ("fp16", torch.float32)])
def test_autocast_covers_torch_code_as_the_state_says(make_accelerator, mixed_precision, inside):
    accelerator = make_accelerator(mixed_precision=mixed_precision)
    a = torch.ones(2, 2)
    with accelerator.autocast():
        assert torch.mm(a, a).dtype == inside
    assert torch.mm(a, a).dtype == torch.float32


def test_collectives_on_one_process_keep_kind_and_structure(accelerator):
    Pair = collections.namedtuple("Pair", "left right")
    data = {"a": np.arange(3.0), "b": [torch.ones(2), Pair(np.zeros(1), torch.zeros(1))]}
    gathered = accelerator.gather(data)
    assert isinstance(gathered["b"][1], Pair) and isinstance(gathered["b"][0], torch.Tensor)
    np.testing.assert_array_equal(gathered["a"], data["a"])
    assert accelerator.reduce(np.array([1.0, 3.0]), "max").tolist() == [1.0, 3.0]
    with pytest.raises(accel.InvalidArgumentError, match="median"):
        accelerator.reduce(np.ones(2), "median")
    for not_a_tensor in (3, np.float32(3), "3", None):
        with pytest.raises(TypeError, match="gather takes tensors"):
            accelerator.gather([np.ones(1), not_a_tensor])
    assert accelerator.gather(np.array(2.5)).shape == (1,)  # 0-d counts as [1]
    assert accelerator.gather_object(["anything", {"picklable": 1}]) == ["anything", {"picklable": 1}]


def test_nested_reduce_no_sync_and_free_memory(make_accelerator):
    accelerator = make_accelerator(gradient_accumulation_steps=2)
    reduced = accelerator.reduce({"a": np.ones(2, np.float32), "b": [np.arange(3.0), torch.ones(1)]}, "mean")
    assert reduced["a"].tolist() == [1, 1] and reduced["b"][0].tolist() == [0, 1, 2]
    assert isinstance(reduced["b"][1], torch.Tensor) and accelerator.reduce({}, "sum") == {}
    with pytest.raises(accel.DtypeError, match="'b.0' is Long"):
        accelerator.reduce({"a": np.ones(1, np.float32), "b": [np.arange(3)]}, "mean")
    model = accelerator.prepare(scripted_bytes(MLP))
    with accelerator.no_sync(model):
        with pytest.raises(accel.InvalidStateError, match="already in a no_sync scope"):
            with accelerator.no_sync(model):
                pass
    with accelerator.accumulate(model):
        assert not accelerator.sync_gradients
    assert accelerator.free_memory(model) == [None]
    assert accelerator.sync_gradients
    with accelerator.accumulate(model):
        assert not accelerator.sync_gradients  # the counter restarted: the first of two micro-batches


def test_two_models_and_two_optimizers_under_fp16(make_accelerator):
    """A GAN's shape: two prepared models, an optimizer each, one fp16 accelerator accumulating over both."""
    accelerator = make_accelerator(mixed_precision="fp16")
    generator_source, discriminator_source = scripted_bytes(MLP, seed=1), scripted_bytes(MLP, seed=2)
    generator, discriminator, generator_optimizer, discriminator_optimizer = accelerator.prepare(
        generator_source, discriminator_source, accel.OptimizerSpec("sgd", model=generator_source, lr=0.1),
        accel.OptimizerSpec("adam", model=discriminator_source, lr=0.01))
    rows = _classification_rows()
    before = [model.state_dict()["fc1.weight"].numpy().copy() for model in (generator, discriminator)]
    for _ in range(3):
        with accelerator.accumulate(generator, discriminator):
            for model, optimizer in ((discriminator, discriminator_optimizer), (generator, generator_optimizer)):
                accelerator.backward(accel.compute_loss("cross_entropy", model(rows["x"]), rows["y"]))
                accelerator.clip_grad_norm_(model, 1.0)
                optimizer.step()
                optimizer.zero_grad()
    for model, weights in zip((generator, discriminator), before):
        assert not np.array_equal(model.state_dict()["fc1.weight"].numpy(), weights)
    assert not generator_optimizer.step_was_skipped and not discriminator_optimizer.step_was_skipped
    assert generator_optimizer.loss_scale == discriminator_optimizer.loss_scale == 65536.0


def test_padding_and_broadcast_work_in_place_without_copies(accelerator):
    array = np.arange(4, dtype=np.float32)
    assert accelerator.pad_across_processes(array).ctypes.data == array.ctypes.data
    with pytest.raises(accel.OutOfRangeError):
        accelerator.pad_across_processes(array, dim=1)
    assert accelerator.broadcast(array) is array
    with pytest.raises(ValueError, match="read-only"):
        accelerator.broadcast(accelerator.gather(array))


def test_reduce_scatter_and_all_gather_on_one_process_write_the_input_into_the_output(accelerator):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros(6, np.float32)
    assert accelerator.all_gather(data, out) is out
    assert out.tolist() == [0, 1, 2, 3, 4, 5]
    assert accelerator.reduce_scatter(data * 2, out, "mean").tolist() == [0, 2, 4, 6, 8, 10]
    with pytest.raises(accel.ShapeMismatchError, match="process 0's output has 5 elements, but needs 6"):
        accelerator.all_gather(data, np.zeros(5, np.float32))
    with pytest.raises(accel.DtypeError, match="is Double, its input Float"):
        accelerator.reduce_scatter(data, np.zeros(6))
    with pytest.raises(ValueError, match="read-only"):
        accelerator.all_gather(data, accelerator.gather(out))


def test_main_process_first_and_print(accelerator, capfd):
    with accelerator.main_process_first():
        accelerator.print("only", "here")
    with accelerator.local_main_process_first():
        accelerator.wait_for_everyone()
    assert capfd.readouterr().out == "only here\n"  # printed by the library, on the file descriptor


def test_load_state_returns_to_the_saved_checkpoint(tmp_path, accelerator):
    model, loader, optimizer, scheduler = accelerator.prepare(
        scripted_bytes(MLP), accel.DataLoaderSpec(accel.Dataset.from_tensors(_classification_rows()), batch_size=8,
                                                  shuffle=True),
        accel.OptimizerSpec("adamw", lr=0.05), accel.SchedulerSpec("linear", total_steps=40))

    def train_one_epoch():
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"]))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        return {name: tensor.numpy().copy() for name, tensor in model.state_dict().items()}

    train_one_epoch()
    accelerator.save_state(tmp_path / "checkpoint")
    first_run = train_one_epoch()
    accelerator.load_state(tmp_path / "checkpoint")
    assert scheduler.step_count == 2
    second_run = train_one_epoch()
    for name, values in first_run.items():
        np.testing.assert_array_equal(second_run[name], values, err_msg=name)
    # The same from a background save: captured at the call, so the epoch that ran meanwhile is not in it.
    accelerator.save_state_async(tmp_path / "background")
    third_run = train_one_epoch()
    accelerator.wait_for_save()
    accelerator.load_state(tmp_path / "background")
    fourth_run = train_one_epoch()
    for name, values in third_run.items():
        np.testing.assert_array_equal(fourth_run[name], values, err_msg=name)
    with pytest.raises(accel.AccelError, match="metadata.json"):
        accelerator.load_state(tmp_path / "missing")


def test_numbered_checkpoints_rotate_and_the_latest_is_loaded(tmp_path, make_accelerator):
    accelerator = make_accelerator(project_config=accel.ProjectConfiguration(project_dir=tmp_path, total_limit=2))
    accelerator.prepare(scripted_bytes(MLP))
    for _ in range(3):
        accelerator.save_state()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["checkpoint_1", "checkpoint_2"]
    accelerator.load_state()
    accelerator.save_state()  # numbering goes on after the checkpoint loaded (checkpoint_2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["checkpoint_2", "checkpoint_3"]


class _Counter:
    def __init__(self, value):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def test_registered_objects_are_saved_and_restored(tmp_path, make_accelerator):
    accelerator = make_accelerator()
    accelerator.prepare(scripted_bytes(MLP))
    first, second = _Counter(1), _Counter([2, "two"])
    accelerator.register_for_checkpointing(first, second)
    with pytest.raises(ValueError, match="Item at index 0, `object`"):
        accelerator.register_for_checkpointing(object())
    accelerator.save_state(tmp_path / "checkpoint")
    assert (tmp_path / "checkpoint" / "rank0" / "custom_checkpoint_1.bin").is_file()
    first.value, second.value = 10, None
    accelerator.load_state(tmp_path / "checkpoint")
    assert (first.value, second.value) == (1, [2, "two"])

    def broken():
        raise RuntimeError("no state today")

    first.state_dict = broken
    with pytest.raises(RuntimeError, match="no state today"):
        accelerator.save_state(tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_checkpoint_without_a_registered_object_is_refused(tmp_path, make_accelerator):
    accelerator = make_accelerator()
    accelerator.prepare(scripted_bytes(MLP))
    accelerator.save_state(tmp_path / "checkpoint")
    accelerator.register_for_checkpointing(_Counter(1))
    with pytest.raises(accel.AccelError, match="'0' is not in the checkpoint"):
        accelerator.load_state(tmp_path / "checkpoint")
