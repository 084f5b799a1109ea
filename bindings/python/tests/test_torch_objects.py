"""torch's own objects through Accelerator.prepare on one process: what comes back for each kind in any
order, the gradient storage that stays accel's, AcceleratedOptimizer and AcceleratedScheduler's stepping
rules (accumulation, an fp16 overflow), DataLoaders giving torch's batches, and messages that name both
kinds when a torch object is given where another kind belongs."""
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import accel  # noqa: E402
from accel.data_loader import DataLoaderShard  # noqa: E402
from accel.optimizer import AcceleratedOptimizer  # noqa: E402
from accel.scheduler import AcceleratedScheduler  # noqa: E402


def make_objects(lr=0.1):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(1))
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    return model, optimizer, scheduler, loader


def test_prepare_takes_the_kinds_in_any_order(accelerator):
    model, optimizer, scheduler, loader = make_objects()
    other = object()
    prepared = accelerator.prepare(scheduler, loader, other, optimizer, model)
    assert isinstance(prepared[0], AcceleratedScheduler) and prepared[0].scheduler is scheduler
    assert isinstance(prepared[1], DataLoaderShard)
    assert prepared[2] is other  # what prepare does not know comes back as it is, as in Accelerate
    assert isinstance(prepared[3], AcceleratedOptimizer) and prepared[3].optimizer is optimizer
    assert prepared[4] is model and accelerator.unwrap_model(prepared[4]) is model
    assert prepared[0].optimizers == [prepared[3]]


def test_gradients_accumulate_in_accels_storage_and_zero_grad_keeps_it(accelerator):
    model, optimizer, _, loader = make_objects()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    storage = [parameter.grad.data_ptr() for parameter in model.parameters()]
    inputs, targets = next(iter(loader))
    accelerator.backward(torch.nn.functional.mse_loss(model(inputs), targets))
    assert [parameter.grad.data_ptr() for parameter in model.parameters()] == storage
    assert all(parameter.grad.abs().sum() > 0 for parameter in model.parameters())
    optimizer.zero_grad(set_to_none=True)  # the storage stays installed, zeroed
    assert [parameter.grad.data_ptr() for parameter in model.parameters()] == storage
    assert all(parameter.grad.abs().sum() == 0 for parameter in model.parameters())
    for parameter in model.parameters():  # what torch's zero_grad would do: autograd makes a new .grad ...
        parameter.grad = None
    accelerator.backward(torch.nn.functional.mse_loss(model(inputs), targets))
    assert [parameter.grad.data_ptr() for parameter in model.parameters()] == storage  # ... copied back in


def test_the_optimizer_and_scheduler_step_only_when_gradients_sync(make_accelerator):
    accelerator = make_accelerator(gradient_accumulation_steps=2)
    model, optimizer, scheduler, loader = accelerator.prepare(*make_objects())
    reference, reference_optimizer, _, _ = make_objects()
    weights, rates = [], []
    for inputs, targets in loader:
        with accelerator.accumulate(model):
            accelerator.backward(torch.nn.functional.mse_loss(model(inputs), targets))
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        weights.append(model[0].weight.detach().clone())
        rates.append(scheduler.get_last_lr()[0])
    assert torch.equal(weights[0], reference[0].weight.detach())  # the first batch only accumulated
    assert not torch.equal(weights[1], weights[0]) and torch.equal(weights[2], weights[1])
    assert rates == [0.1, 0.05, 0.05, 0.025]
    # Against the same steps by hand: the mean of two micro-batch losses, stepped every second batch.
    for index, (inputs, targets) in enumerate(loader):
        (torch.nn.functional.mse_loss(reference(inputs), targets) / 2).backward()
        if index % 2 == 1:
            reference_optimizer.step()
            reference_optimizer.zero_grad()
            reference_optimizer.param_groups[0]["lr"] /= 2
    assert torch.allclose(model[0].weight, reference[0].weight, atol=1e-7)


def test_an_fp16_overflow_skips_the_optimizer_and_the_scheduler(make_accelerator):
    accelerator = make_accelerator(mixed_precision="fp16", kwargs_handlers=[accel.GradScalerKwargs(init_scale=1024)])
    model, optimizer, scheduler, loader = accelerator.prepare(*make_objects())
    inputs, targets = next(iter(loader))
    before = model[0].weight.detach().clone()
    accelerator.backward(model(inputs).sum() * float("inf"))
    optimizer.step()
    scheduler.step()
    assert optimizer.step_was_skipped and accelerator.optimizer_step_was_skipped
    assert torch.equal(model[0].weight, before) and scheduler.get_last_lr() == [0.1]
    assert accelerator.grad_scale().torch().item() == 512.0  # backed off
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    accelerator.backward(loss)
    expected = torch.autograd.grad(torch.nn.functional.mse_loss(model(inputs), targets), model[0].weight)[0]
    optimizer.step()  # unscaled first: the step of the true gradient
    assert not optimizer.step_was_skipped and scheduler.get_last_lr() == [0.1]
    assert torch.allclose(model[0].weight, before - 0.1 * expected, atol=1e-6)
    scheduler.step()
    assert scheduler.get_last_lr() == [0.05]


def test_a_prepared_loader_gives_torchs_batches_in_the_collate_fns_structure(accelerator):
    x = torch.arange(20.0).reshape(10, 2)
    samples = [{"x": row, "name": f"n{index}"} for index, row in enumerate(x)]

    def collate(batch):
        return tuple(item["x"] for item in batch), [item["name"] for item in batch]

    for make in (lambda: DataLoader(TensorDataset(x, x * 2), batch_size=3),
                 lambda: DataLoader(TensorDataset(x, x * 2), batch_size=3, shuffle=True),
                 lambda: DataLoader(samples, batch_size=4, collate_fn=collate, shuffle=True),
                 lambda: DataLoader(samples, batch_size=4, drop_last=True)):
        torch.manual_seed(7)
        expected = list(make())
        prepared = accelerator.prepare(make())
        torch.manual_seed(7)
        got = list(prepared)
        assert len(prepared) == len(expected) == len(got)
        for ours, theirs in zip(got, expected):
            assert type(ours) is type(theirs)
            assert repr(ours) == repr(theirs)


def test_a_torch_object_where_another_kind_belongs_is_named(accelerator):
    model, optimizer, scheduler, loader = make_objects()
    with pytest.raises(TypeError, match=r"no_sync takes a model .*, not torch\.optim\.SGD \(an optimizer\)"):
        with accelerator.no_sync(optimizer):
            pass
    with pytest.raises(TypeError, match=r"save_model takes a model .*, not "
                                        r"torch\.utils\.data\.DataLoader \(a data loader\)"):
        accelerator.save_model(loader, "unused")
    with pytest.raises(TypeError, match=r"takes a loss .*, not torch\.optim\.lr_scheduler\.StepLR \(a scheduler\)"):
        accelerator.backward(scheduler)
    with pytest.raises(ValueError, match="not prepared by this Accelerator"):
        with accelerator.no_sync(model):
            pass


def test_accelerates_small_helpers(accelerator, tmp_path):
    model = accelerator.prepare(make_objects()[0])
    calls = []

    @accelerator.on_main_process
    def on_main():
        calls.append("main")
        return "ran"

    @accelerator.on_process(process_index=1)
    def on_second():
        calls.append("second")

    assert on_main() == "ran" and on_second() is None and calls == ["main"]
    state = accelerator.get_state_dict(model)
    assert sorted(state) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    accelerator.save(state, tmp_path / "weights.pt")
    assert all(torch.equal(tensor, state[name]) for name, tensor in torch.load(tmp_path / "weights.pt").items())


def test_save_state_pre_hook_files_are_kept_on_a_clash_and_gone_when_the_save_fails(accelerator, tmp_path):
    model = accelerator.prepare(torch.nn.Linear(2, 2))

    def writes(name):
        def hook(_models, _weights, output_dir):
            with open(f"{output_dir}/{name}", "w") as file:
                file.write("hook")
        return hook

    clashing = accelerator.register_save_state_pre_hook(writes("metadata.json"))
    with pytest.raises(ValueError, match=r"\['metadata.json'\].*left there"):
        accelerator.save_state(tmp_path / "clash")
    assert (tmp_path / "clash.hook_files" / "metadata.json").read_text() == "hook"
    assert (tmp_path / "clash" / "metadata.json").read_text() != "hook"
    clashing.remove()
    with accelerator.register_save_state_pre_hook(writes("notes.txt")):
        (tmp_path / "blocked").write_text("a file where the hooks' folder would go")
        with pytest.raises(NotADirectoryError):
            accelerator.save_state(tmp_path / "blocked" / "checkpoint")
        accelerator.register_for_checkpointing(Unsaveable())
        with pytest.raises(ValueError, match="cannot be saved"):
            accelerator.save_state(tmp_path / "failed")
        assert not (tmp_path / "failed.hook_files").exists() and not (tmp_path / "failed").exists()
        with pytest.raises(ValueError, match="has no project_dir"):
            accelerator.save_state()
        with pytest.raises(ValueError, match="save_state only"):
            accelerator.save_state_async(tmp_path / "later")
    assert model is not None


class Unsaveable:
    def state_dict(self):
        raise ValueError("this object cannot be saved")

    def load_state_dict(self, _state):
        pass


def test_a_torch_optimizers_state_resumes_on_another_number_of_processes_unless_an_older_accel_saved_it(
        accelerator, tmp_path):
    """save_state stores a torch optimizer's state with its parameters' names (accel._torch_optim_state) and a
    scheduler's as every process holds it, so a checkpoint of 2 processes (made here by copying rank 0's part)
    loads on 1; an older accel's bare state_dict per process still loads on as many processes only."""
    import json
    import shutil
    model, _, _, loader = make_objects()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)
    for x, y in loader:
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    saved = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    folder = tmp_path / "checkpoint"
    accelerator.save_state(folder)
    manifest = json.loads((folder / "metadata.json").read_text())
    manifest["world_size"] = 2
    (folder / "metadata.json").write_text(json.dumps(manifest))
    shutil.copytree(folder / "rank0", folder / "rank1")

    optimizer.optimizer.state.clear()
    scheduler.scheduler.last_epoch = 0
    accelerator.load_state(folder)
    def same_momentum():
        loaded = optimizer.state_dict()["state"]
        return loaded.keys() == saved["optimizer"]["state"].keys() and all(
            torch.equal(state["momentum_buffer"], loaded[index]["momentum_buffer"])
            for index, state in saved["optimizer"]["state"].items())

    assert same_momentum()
    assert scheduler.state_dict() == saved["scheduler"]
    for rank in (0, 1):
        torch.save(saved["optimizer"], folder / f"rank{rank}" / "custom_checkpoint_optimizer.bin")
    with pytest.raises(ValueError, match="older accel on 2 processes, so it resumes on 2 processes only, not 1"):
        accelerator.load_state(folder)
    manifest["world_size"] = 1
    (folder / "metadata.json").write_text(json.dumps(manifest))
    optimizer.optimizer.state.clear()
    accelerator.load_state(folder)
    assert same_momentum()


def test_a_module_on_the_meta_device_needs_its_weights_on_the_main_process(make_accelerator):
    """Other processes may build it on the meta device (prepare gives them the main process's values:
    accelerate_scripts/ram_efficient_loading.py); the main process's values are the ones every process starts
    from."""
    with accel.init_empty_weights():
        module = torch.nn.Linear(2, 3)
    with pytest.raises(ValueError, match=r"the main process's module has tensors on the meta device \(weight, bias\)"):
        make_accelerator().prepare(module)
