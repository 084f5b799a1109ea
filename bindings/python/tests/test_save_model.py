"""Accelerator.save_model of any torch module (prepared or not) in both of Accelerate's formats: safetensors and
torch.save's pytorch_model.bin, whole or in shards with Accelerate's index, read back by
load_checkpoint_in_model / load_checkpoint_and_dispatch; a dispatched model's disk-offloaded weights saved with
their real values; earlier saves replaced; only the main process writing; and the refusals (a file for a
folder, weights on the meta device, torch.save of an accel.Model)."""
import json
import os
import pickle

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import accel  # noqa: E402
from accel import init_empty_weights, load_checkpoint_and_dispatch, load_checkpoint_in_model  # noqa: E402
from accel.utils.modeling import load_state_dict  # noqa: E402
from accel.utils.safetensors_io import read_header  # noqa: E402
from test_big_modeling import Block, trained_block  # noqa: E402
from tiny_models import MLP, scripted_bytes  # noqa: E402

FORMATS = pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "pytorch"])


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 4)
        self.head = nn.Linear(4, 6, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def assert_same_weights(model, reference):
    ours, theirs = model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert torch.equal(ours[name], theirs[name]), name


def whole_name(safe):
    return "model.safetensors" if safe else "pytorch_model.bin"


@FORMATS
def test_a_module_never_prepared_is_saved_and_loaded_back(tmp_path, accelerator, safe):
    reference = trained_block(0)
    accelerator.save_model(reference, tmp_path, safe_serialization=safe)
    assert sorted(os.listdir(tmp_path)) == [whole_name(safe)]
    if safe:
        assert read_header(tmp_path / "model.safetensors")[2] == {"format": "pt"}
    else:
        stored = torch.load(tmp_path / "pytorch_model.bin")
        assert list(stored) == list(reference.state_dict())
    model = trained_block(1)
    load_checkpoint_in_model(model, tmp_path, strict=True)
    assert_same_weights(model, reference)


@FORMATS
def test_max_shard_size_splits_the_weights_with_accelerates_index(tmp_path, accelerator, safe):
    reference = trained_block(0)
    accelerator.save_model(reference, tmp_path, safe_serialization=safe, max_shard_size=100)
    stem, suffix = ("model", ".safetensors") if safe else ("pytorch_model", ".bin")
    shards = [f"{stem}-{i:05d}-of-00003{suffix}" for i in (1, 2, 3)]
    index_name = whole_name(safe) + ".index.json"
    assert sorted(os.listdir(tmp_path)) == sorted(shards + [index_name])
    index = json.loads((tmp_path / index_name).read_text())
    assert set(index) == {"metadata", "weight_map"}
    sizes = {name: tensor.numel() * tensor.element_size() for name, tensor in reference.state_dict().items()}
    assert index["metadata"] == {"total_size": sum(sizes.values())}
    # In state_dict order (as Accelerate splits it), each shard filled until the next tensor would pass 100.
    assert index["weight_map"].keys() == sizes.keys()
    files_in_order = [index["weight_map"][name] for name in sizes]
    assert files_in_order == sorted(files_in_order)
    for shard in shards:
        held = load_state_dict(tmp_path / shard)
        assert set(held) == {name for name, file in index["weight_map"].items() if file == shard}
        assert sum(sizes[name] for name in held) <= 100
    for checkpoint in (tmp_path, tmp_path / index_name):
        model = trained_block(1)
        load_checkpoint_in_model(model, checkpoint, strict=True)
        assert_same_weights(model, reference)


@FORMATS
def test_tied_weights_load_back_tied(tmp_path, accelerator, safe):
    torch.manual_seed(0)
    reference = Tied()
    accelerator.save_model(reference, tmp_path, safe_serialization=safe)
    stored = load_state_dict(tmp_path / whole_name(safe))
    # safetensors stores a tensor once; torch.save keeps both names of the one storage.
    assert set(stored) == ({"embed.weight"} if safe else {"embed.weight", "head.weight"})
    with init_empty_weights():
        model = Tied()
    load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"}, strict=True)
    assert model.head.weight is model.embed.weight
    assert torch.equal(model.embed.weight, reference.embed.weight)


@FORMATS
def test_disk_offloaded_weights_are_saved_with_their_values(tmp_path, accelerator, safe):
    reference = trained_block(0)
    inputs = torch.randn(5, 3)
    expected = reference(inputs)
    accelerator.save_model(reference, tmp_path / "first", safe_serialization=safe)
    dispatched = load_checkpoint_and_dispatch(trained_block(1), tmp_path / "first", offload_folder=tmp_path / "offload",
                                              device_map={"linear1": "cpu", "batchnorm": "disk", "linear2": "cpu"})
    assert dispatched.batchnorm.weight.device.type == "meta"
    accelerator.save_model(dispatched, tmp_path / "second", safe_serialization=safe)
    assert dispatched.batchnorm.weight.device.type == "meta"  # the hook put the weights back off the model
    stored = load_state_dict(tmp_path / "second" / whole_name(safe))
    assert stored.keys() == reference.state_dict().keys()
    for name, tensor in reference.state_dict().items():
        assert torch.equal(stored[name], tensor), name
    model = load_checkpoint_and_dispatch(trained_block(2), tmp_path / "second")
    assert torch.allclose(model(inputs), expected, atol=1e-6)


@FORMATS
def test_a_prepared_module_is_saved_in_either_format(tmp_path, accelerator, safe):
    prepared = accelerator.prepare(trained_block(0))
    accelerator.save_model(prepared, tmp_path, safe_serialization=safe)
    assert sorted(os.listdir(tmp_path)) == [whole_name(safe)]
    model = trained_block(1)
    load_checkpoint_in_model(model, tmp_path, strict=True)
    assert_same_weights(model, accelerator.unwrap_model(prepared))


def test_a_new_save_replaces_the_files_of_an_earlier_one_and_keeps_the_others(tmp_path, accelerator):
    (tmp_path / "notes.txt").write_text("mine")
    accelerator.save_model(trained_block(0), tmp_path, safe_serialization=False, max_shard_size=100)
    reference = trained_block(3)
    accelerator.save_model(reference, tmp_path, safe_serialization=False)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "pytorch_model.bin"]
    model = trained_block(1)
    load_checkpoint_in_model(model, tmp_path)
    assert_same_weights(model, reference)


def test_only_the_main_process_writes(tmp_path, accelerator, monkeypatch):
    monkeypatch.setattr(type(accelerator), "is_main_process", property(lambda self: False))
    accelerator.save_model(trained_block(0), tmp_path / "out", safe_serialization=False)
    assert os.listdir(tmp_path / "out") == []


def test_a_file_for_the_folder_is_refused(tmp_path, accelerator):
    target = tmp_path / "model"
    target.write_text("not a folder")
    with pytest.raises(accel.errors.AccelIOError, match="is a file"):
        accelerator.save_model(trained_block(0), target, safe_serialization=False)
    assert target.read_text() == "not a folder"


def test_weights_on_the_meta_device_without_hooks_are_refused(tmp_path, accelerator):
    with init_empty_weights():
        model = Block()
    with pytest.raises(RuntimeError, match="on the meta device"):
        accelerator.save_model(model, tmp_path)
    assert os.listdir(tmp_path) == []


def test_torch_save_of_an_accel_model_is_refused(tmp_path, accelerator):
    model = accelerator.prepare(scripted_bytes(MLP))
    with pytest.raises(ValueError, match="safetensors only"):
        accelerator.save_model(model, tmp_path, safe_serialization=False)


def test_a_bin_checkpoint_is_read_with_weights_only(tmp_path):
    with open(tmp_path / "pytorch_model.bin", "wb") as file:
        torch.save({"linear1.weight": torch.zeros(4, 3), "extra": Block}, file)
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint_in_model(trained_block(0), tmp_path)


def test_accelerator_save_writes_safetensors_too(tmp_path, accelerator):
    tensors = {"a": torch.arange(4.0)}
    accelerator.save(tensors, tmp_path / "a.safetensors", safe_serialization=True)
    assert torch.equal(load_state_dict(tmp_path / "a.safetensors")["a"], tensors["a"])
