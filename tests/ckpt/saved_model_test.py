"""What accel's save_model writes, read without accel: the shards and the index with json and numpy alone
(the safetensors layout: an 8-byte little-endian header length, a JSON header, the payload), then loaded
by Debian's torch 1.13 into a plain nn.Module of the same make, which must give accel's outputs. Tied
weights: left out of the files under their second name, as transformers leaves them, so that torch's
load_state_dict(strict=False) reports exactly that name missing and the module's own tie fills it; the
name left out is recorded in the metadata against the one stored, as safetensors' save_model records it.

Run by ctest (ckpt.saved_model_python) with ACCEL_LIBRARY, and the binding's fixtures (accelerator) as a
plugin (tests/CMakeLists.txt: accel_python_test)."""
import importlib.util
import json
import pathlib

import numpy as np
import pytest
import torch

import accel

_spec = importlib.util.spec_from_file_location(
    "make_mlp", pathlib.Path(__file__).resolve().parents[2] / "examples" / "make_mlp.py")
make_mlp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_mlp)

SIZES = (64, 128, 128, 10)  # the demo's MLP
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
INDEX = "model.safetensors.index.json"


class Tied(torch.nn.Module):
    """head.weight is body.weight (tied, as an embedding and its output layer); two buffers, one int64."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 8, bias=False)
        self.head.weight = self.body.weight
        self.register_buffer("scale", torch.full((1,), 0.5))
        self.register_buffer("count", torch.tensor([3, 4]))

    def forward(self, x):
        return self.head(torch.relu(self.body(x))) * self.scale + self.count.sum()


def read_safetensors(path, ties=None):
    """name -> array; the ties the metadata records (name left out -> name stored) go into `ties`."""
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__")
    assert metadata.pop("format") == "pt"
    assert all(stored in header and left_out not in header for left_out, stored in metadata.items())
    if ties is not None:
        ties.update(metadata)
    payload = data[8 + length:]
    arrays = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<")
        arrays[name] = np.frombuffer(payload[begin:end], dtype=dtype).reshape(entry["shape"])
    return arrays


def read_saved_model(directory, ties=None):
    """name -> array, as transformers finds a save: model.safetensors, or the index and its shards."""
    if not (directory / INDEX).exists():
        return read_safetensors(directory / "model.safetensors", ties)
    index = json.loads((directory / INDEX).read_text())
    arrays = {}
    for shard in sorted(set(index["weight_map"].values())):
        held = read_safetensors(directory / shard, ties)
        assert sorted(held) == sorted(name for name, file in index["weight_map"].items() if file == shard)
        arrays.update(held)
    assert index["metadata"]["total_size"] == sum(array.nbytes for array in arrays.values())
    return arrays


def as_torch(arrays):
    return {name: torch.from_numpy(array.copy()) for name, array in arrays.items()}


@pytest.fixture
def inputs():
    return np.random.default_rng(0).standard_normal((16, SIZES[0]), dtype=np.float32)


def trained_mlp(accelerator, inputs):
    """The demo's MLP after one SGD step, so that its weights are no seed's."""
    torch.manual_seed(0)
    model, optimizer = accelerator.prepare(torch.jit.script(make_mlp.MLP(*SIZES)), accel.OptimizerSpec("sgd", lr=0.1))
    loss = accel.compute_loss("cross_entropy", model(inputs), np.arange(16) % SIZES[-1])
    accelerator.backward(loss)
    optimizer.step()
    return model


def test_shards_read_with_json_and_numpy_give_torch_the_outputs_of_accel(tmp_path, accelerator, inputs):
    model = trained_mlp(accelerator, inputs)
    # fc1.weight is 32768 bytes, fc2.weight 65536 (over the limit: alone), fc3.weight 5120, biases 512 and 40.
    accelerator.save_model(model, tmp_path, max_shard_size=40_000)
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    ties = {}
    read_saved_model(tmp_path, ties)
    assert ties == {}
    assert sorted(path.name for path in tmp_path.iterdir()) == shards + [INDEX]
    index = json.loads((tmp_path / INDEX).read_text())
    assert index["weight_map"] == {"fc1.weight": shards[0], "fc1.bias": shards[0], "fc2.weight": shards[1],
                                   "fc2.bias": shards[2], "fc3.weight": shards[2], "fc3.bias": shards[2]}
    assert index["metadata"]["total_size"] == 4 * (64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10)

    torch.manual_seed(1)
    reference = make_mlp.MLP(*SIZES)
    reference.load_state_dict(as_torch(read_saved_model(tmp_path)))
    with torch.no_grad():
        np.testing.assert_array_equal(reference(torch.from_numpy(inputs)).numpy(), model.evaluate(inputs).numpy())


def test_tied_weights_are_stored_once_and_torch_fills_them_through_its_own_tie(tmp_path, accelerator, inputs):
    torch.manual_seed(0)
    model = accelerator.prepare(torch.jit.script(Tied()))
    x = inputs[:, :8].copy()
    for max_shard_size in ("10GB", 300):  # one file; shards (body.weight's 256 bytes count once)
        accelerator.save_model(model, tmp_path, max_shard_size=max_shard_size)
        ties = {}
        arrays = read_saved_model(tmp_path, ties)
        assert sorted(arrays) == ["body.bias", "body.weight", "count", "scale"]
        assert ties == {"head.weight": "body.weight"}
        assert [name for name, _ in model.named_parameters()] == ["body.weight", "body.bias"]
        assert arrays["count"].dtype == np.int64
        torch.manual_seed(1)
        reference = Tied()
        result = reference.load_state_dict(as_torch(arrays), strict=False)
        assert (result.missing_keys, result.unexpected_keys) == (["head.weight"], [])
        assert reference.head.weight is reference.body.weight
        with torch.no_grad():
            np.testing.assert_array_equal(reference(torch.from_numpy(x)).numpy(), model.evaluate(x).numpy())


def test_accel_loads_its_own_shards_into_a_fresh_model(tmp_path, accelerator, inputs):
    model = trained_mlp(accelerator, inputs)
    accelerator.save_model(model, tmp_path, max_shard_size=40_000)
    torch.manual_seed(1)
    fresh = accel.Model.load(torch.jit.script(make_mlp.MLP(*SIZES)))
    fresh.load_weights(tmp_path)
    np.testing.assert_array_equal(fresh.evaluate(inputs).numpy(), model.evaluate(inputs).numpy())
