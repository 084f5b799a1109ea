"""accel.Model: loading TorchScript, forward's outputs, modes, parameters, saving."""
import numpy as np
import pytest
import torch

import accel
from tiny_models import MLP, DictOutput, TupleOutput, scripted_bytes


def test_a_model_loads_from_bytes_a_path_or_a_script_module(tmp_path, accelerator):
    path = tmp_path / "mlp.pt"
    path.write_bytes(scripted_bytes(MLP))
    torch.manual_seed(0)
    script_module = torch.jit.script(MLP())
    models = [accel.Model.load(source) for source in (scripted_bytes(MLP), path, str(path), script_module)]
    weights = [model.state_dict()["fc1.weight"].numpy() for model in models]
    for other in weights[1:]:
        np.testing.assert_array_equal(other, weights[0])
    with pytest.raises(TypeError, match="not list"):
        accel.Model.load([1, 2])
    with pytest.raises(accel.AccelIOError):
        accel.Model.load(tmp_path / "missing.pt")


def test_forward_returns_tensors_tuples_and_dicts(accelerator):
    mlp, tuple_model, dict_model = accelerator.prepare(scripted_bytes(MLP), scripted_bytes(TupleOutput),
                                                       scripted_bytes(DictOutput))
    x = np.ones((2, 4), dtype=np.float32)
    logits = mlp(x)
    assert isinstance(logits, accel.Tensor) and logits.shape == (2, 3)
    plus, minus = tuple_model(x)
    np.testing.assert_array_equal(plus.numpy() - minus.numpy(), np.full((2, 4), 2.0))
    outputs = dict_model(x, scale=np.float32(3.0))  # a named input
    assert sorted(outputs) == ["doubled", "summed"]
    np.testing.assert_array_equal(outputs["doubled"].numpy(), np.full((2, 4), 6.0))
    np.testing.assert_array_equal(outputs["summed"].torch(), torch.full((2,), 4.0))


def test_evaluate_builds_no_graph(accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    logits = model.evaluate(np.ones((2, 4), dtype=np.float32))
    np.testing.assert_allclose(logits.numpy(), model(np.ones((2, 4), dtype=np.float32)).numpy())
    loss = accel.compute_loss("cross_entropy", logits, np.array([0, 1]))
    with pytest.raises(accel.InvalidArgumentError):
        accelerator.backward(loss)


def test_train_and_eval_modes(accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    assert model.training
    assert model.eval() is model and not model.training
    assert model.train().training


def test_parameters_share_the_models_memory(accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    names = [name for name, _ in model.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [name for name, _ in model.named_buffers()] == []
    first = next(model.parameters())
    again = model.state_dict()["fc1.weight"]
    assert first.data_ptr() == again.data_ptr()
    unwrapped = model.unwrap()
    assert next(unwrapped.parameters()).data_ptr() == first.data_ptr()


def test_save_torchscript_and_save_model(tmp_path, accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    model.save_torchscript(tmp_path / "saved.pt")
    reloaded = torch.jit.load(str(tmp_path / "saved.pt"))
    x = torch.ones(2, 4)
    np.testing.assert_allclose(reloaded(x).detach().numpy(), model.evaluate(x).numpy(), rtol=1e-6)
    accelerator.save_model(model, tmp_path / "out")
    assert (tmp_path / "out" / "model.safetensors").stat().st_size > 0


def test_save_model_shards_and_load_weights_reads_them_back(tmp_path, accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    # fc1.weight is 128 bytes, fc1.bias 32, fc2.weight 96, fc2.bias 12: three shards of at most 130 bytes.
    accelerator.save_model(model, tmp_path / "out", max_shard_size=130)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
        "model.safetensors.index.json"]
    torch.manual_seed(1)
    other = accel.Model.load(torch.jit.script(MLP()))
    other.load_weights(tmp_path / "out")
    for (name, mine), (_, theirs) in zip(model.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(theirs.numpy(), mine.numpy(), err_msg=name)
    with pytest.raises(accel.AccelIOError, match="no saved model"):
        other.load_weights(tmp_path / "nothing")


@pytest.mark.parametrize("size,expected", [(1000, 1000), ("10GB", 10**10), ("500MB", 5 * 10**8), ("2GiB", 2 * 2**30),
                                           ("1.5KiB", 1536), ("8Kb", 1000)])
def test_shard_sizes_are_read_as_accelerate_reads_them(size, expected):
    assert accel._accelerator_checkpointing._size_in_bytes(size) == expected


@pytest.mark.parametrize("size", [0, -5, "ten GB", "10TB", True])
def test_a_shard_size_that_is_no_positive_size_is_refused(size):
    with pytest.raises(ValueError, match="max_shard_size"):
        accel._accelerator_checkpointing._size_in_bytes(size)


def test_compute_loss_takes_options(accelerator):
    logits = np.array([[2.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    labels = np.array([0, 0])
    per_sample = accel.compute_loss("cross_entropy", logits, labels, reduction="none").numpy()
    assert per_sample.shape == (2,) and per_sample[0] < per_sample[1]
    with pytest.raises(accel.InvalidArgumentError, match="hinge"):
        accel.compute_loss("hinge", logits, labels)


def test_a_model_of_the_callers_tensors_shares_them_and_gives_gradient_storage(accelerator):
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    steps = np.zeros(1, dtype=np.int64)
    model = accel.Model.from_tensors([("w", weight), ("steps", steps)], buffers=[("mean", np.ones(3, np.float32))],
                                     trainable=[True, False])
    assert [name for name, _ in model.named_parameters()] == ["w", "steps"]
    assert model.state_dict()["w"].data_ptr() == weight.__array_interface__["data"][0]  # shared, not copied
    with pytest.raises(accel.InvalidStateError, match="prepare"):
        model.grad_view(0)
    accelerator.prepare(model)
    grad = model.grad_view(0).numpy()
    assert grad.shape == (2, 3) and not grad.any()
    assert model.grad_view(0).data_ptr() == model.grad_view(0).data_ptr()  # the same storage every call
    model.begin_forward(True)
    model.grad_ready(0)
    model.end_backward()
    with pytest.raises(accel.InvalidArgumentError, match="not trainable"):
        model.grad_ready(1)
    with pytest.raises(accel.OutOfRangeError):
        model.grad_view(2)
    with pytest.raises(accel.UnsupportedError, match="caller's runtime"):
        model(np.ones((1, 2), np.float32))
    with pytest.raises(accel.InvalidArgumentError, match="given twice"):
        accel.Model.from_tensors([("w", weight), ("w", weight)])
    with pytest.raises(ValueError, match="1 trainable flags for 2"):
        accel.Model.from_tensors([("w", weight), ("v", weight)], trainable=[True])


def test_the_grad_scale_is_one_without_fp16_and_the_scaler_calls_check_their_model(accelerator):
    model = accelerator.prepare(accel.Model.from_tensors([("w", np.ones(2, np.float32))]))
    assert accelerator.grad_scale().item() == 1.0
    assert accelerator.unscale_model_gradients(model) is False
    accelerator.update_grad_scale(False)
    with pytest.raises(accel.NullArgumentError):
        accelerator.unscale_model_gradients(accel.Model(accel._library.ffi.NULL))
