"""Big-model loading (accel.big_modeling, accel.utils.modeling): models built on the meta device, module sizes
and device maps under memory budgets (no-split classes, tied weights, CPU and disk fallbacks), checkpoints
(one safetensors or torch.save file, shards with an index, what accel's save_model writes) loaded into them
with dtype conversion and strict key checks, damaged safetensors files refused before anything changes,
offloaded models running through the hooks, and, where CUDA is, maps that put modules on the GPU."""
import collections
import json
import logging

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import accel  # noqa: E402
from accel import (cpu_offload, disk_offload, dispatch_model, infer_auto_device_map, init_empty_weights,  # noqa: E402
                   init_on_device, load_checkpoint_and_dispatch, load_checkpoint_in_model)
from accel.hooks import remove_hook_from_submodules  # noqa: E402
from accel.utils import compute_module_sizes, find_tied_parameters, get_balanced_memory  # noqa: E402
from accel.utils.modeling import get_state_dict_from_offload  # noqa: E402
from accel.utils.safetensors_io import load_file, save_file  # noqa: E402
from tiny_models import MLP, scripted_bytes  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class Block(nn.Module):
    """linear1 (3 -> 4, 64 bytes), batchnorm (72 bytes with its buffers), linear2 (4 -> 5, 100 bytes)."""

    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(3, 4)
        self.batchnorm = nn.BatchNorm1d(4)
        self.linear2 = nn.Linear(4, 5)

    def forward(self, x):
        return self.linear2(self.batchnorm(self.linear1(x)))


class TiedLM(nn.Module):
    """An embedding whose matrix the output layer shares (tied weights), as language models have."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens)))


def trained_block(seed=0):
    """A Block with weights and batchnorm statistics of its own (not the defaults), in eval mode."""
    torch.manual_seed(seed)
    block = Block()
    block(torch.randn(8, 3))  # training mode: updates the running statistics
    return block.eval()


def assert_same_tensors(model, reference):
    expected = reference.state_dict()
    actual = model.state_dict()
    assert actual.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(actual[name].cpu(), tensor), name


def save_sharded(state_dict, folder, shards, index_name="model.safetensors.index.json"):
    """state_dict split into shards ({file name: [tensor names]}) with an index, as save_pretrained writes it."""
    weight_map = {}
    for file_name, names in shards.items():
        part = {name: state_dict[name] for name in names}
        if file_name.endswith(".safetensors"):
            save_file(part, folder / file_name, metadata={"format": "pt"})
        else:
            torch.save(part, folder / file_name)
        weight_map.update(dict.fromkeys(names, file_name))
    (folder / index_name).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


# --- building on the meta device -------------------------------------------------------------------------

def test_init_empty_weights_puts_parameters_on_meta_and_leaves_torch_as_it_was():
    with init_empty_weights():
        block = Block()
    assert block.linear1.weight.device.type == "meta" and isinstance(block.linear1.weight, nn.Parameter)
    assert block.batchnorm.running_mean.device.type == "cpu"  # buffers stay unless include_buffers
    with init_empty_weights(include_buffers=True):
        block = Block()
    assert block.batchnorm.running_mean.device.type == "meta"
    after = Block()
    assert after.linear1.weight.device.type == "cpu" and after.batchnorm.running_mean.device.type == "cpu"


def test_init_empty_weights_builds_a_huge_model_without_memory():
    with init_empty_weights():
        model = nn.Sequential(*[nn.Linear(10000, 10000) for _ in range(100)])  # 40 GB of float32
    assert compute_module_sizes(model)[""] == 100 * (10000 * 10000 + 10000) * 4


def test_include_buffers_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("ACCELERATE_INIT_INCLUDE_BUFFERS", "yes")
    with init_empty_weights():
        block = Block()
    assert block.batchnorm.running_var.device.type == "meta"
    monkeypatch.setenv("ACCELERATE_INIT_INCLUDE_BUFFERS", "maybe")
    with pytest.raises(ValueError, match="ACCELERATE_INIT_INCLUDE_BUFFERS must be yes or no"):
        with init_empty_weights():
            pass


def test_init_on_device_keeps_requires_grad():
    with init_on_device("meta"):
        layer = nn.Linear(2, 2)
        layer.weight.requires_grad_(False)
        layer.register_parameter("frozen", nn.Parameter(torch.ones(2), requires_grad=False))
    assert layer.frozen.device.type == "meta" and not layer.frozen.requires_grad


# --- sizes and device maps --------------------------------------------------------------------------------

def test_module_sizes_count_tied_weights_once_and_follow_dtype():
    sizes = compute_module_sizes(Block())
    assert (sizes[""], sizes["linear1"], sizes["batchnorm"], sizes["linear2"]) == (236, 64, 72, 100)
    half = compute_module_sizes(Block(), dtype="float16")
    assert half["batchnorm.num_batches_tracked"] == 8 and half[""] == 236 // 2 + 4  # int64 keeps its size
    tied = TiedLM()
    assert find_tied_parameters(tied) == [["embed.weight", "head.weight"]]
    assert compute_module_sizes(tied)["head"] == 0  # counted under embed


def test_device_map_fills_devices_in_order_keeping_room_for_the_largest_layer():
    model = Block()
    # GPU 0 keeps 100 bytes (linear2) free for offloaded layers: only linear1 fits there.
    assert infer_auto_device_map(model, max_memory={0: 200, 1: 200}) == {"linear1": 0, "batchnorm": 1, "linear2": 1}
    assert infer_auto_device_map(model, max_memory={0: 1000}) == {"": 0}
    assert infer_auto_device_map(model, max_memory={0: 200, 1: 200}, clean_result=False) == collections.OrderedDict(
        [("linear1", 0), ("batchnorm", 1), ("linear2", 1)])


def test_device_map_splits_modules_unless_their_class_is_no_split():
    model = nn.Sequential(Block(), Block(), Block())
    assert infer_auto_device_map(model, max_memory={0: 500, 1: 500}) == {
        "0": 0, "1.linear1": 0, "1.batchnorm": 0, "1.linear2": 1, "2": 1}
    assert infer_auto_device_map(model, max_memory={0: 500, 1: 500}, no_split_module_classes=["Block"]) == {
        "0": 0, "1": 1, "2": 1}


def test_device_map_keeps_tied_parameters_together():
    model = nn.Sequential(collections.OrderedDict([("layer1", Block()), ("layer2", Block()), ("layer3", Block())]))
    model.layer3.linear2.weight = model.layer1.linear2.weight
    assert infer_auto_device_map(model, max_memory={0: 400, 1: 500}) == {
        "layer1": 0, "layer3.linear2": 0, "layer2": 1, "layer3.linear1": 1, "layer3.batchnorm": 1}


def test_device_map_falls_back_to_cpu_then_disk():
    model = nn.Sequential(Block(), Block(), Block())
    device_map = infer_auto_device_map(model, max_memory={"cpu": 500}, no_split_module_classes=["Block"])
    # The CPU keeps room for one block (236 bytes), which a disk-offloaded block is read into: one fits.
    assert device_map == {"0": "cpu", "1": "disk", "2": "disk"}
    with pytest.raises(ValueError, match="Device mps is not recognized"):
        infer_auto_device_map(model, max_memory={"mps": 400})


def test_balanced_memory_spreads_the_model_over_the_gpus():
    # 236 bytes over 2 GPUs: 118 each, plus 1.25 times the mean final module (78): 215 on all but the last.
    assert get_balanced_memory(Block(), max_memory={0: 300, 1: 300}) == {0: 215, 1: 300}
    assert get_balanced_memory(Block(), max_memory={0: 300, "cpu": 1000}) == {0: 300, "cpu": 1000}


# --- loading checkpoints -----------------------------------------------------------------------------------

def test_a_safetensors_file_loads_into_an_empty_model(tmp_path):
    reference = trained_block()
    save_file(reference.state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    model = load_checkpoint_and_dispatch(model, tmp_path / "model.safetensors", device_map={"": "cpu"})
    assert model.hf_device_map == {"": "cpu"}
    assert_same_tensors(model, reference)
    x = torch.randn(4, 3)
    assert torch.equal(model.eval()(x), reference(x))


@pytest.mark.parametrize("layout", ["safetensors index", "bin index", "bin file"])
def test_sharded_and_torch_save_checkpoints_load(tmp_path, layout):
    reference = trained_block()
    state = reference.state_dict()
    names = list(state)
    if layout == "bin file":
        torch.save(state, tmp_path / "weights.pt")
        checkpoint = tmp_path / "weights.pt"
    else:
        suffix = ".safetensors" if layout == "safetensors index" else ".bin"
        save_sharded(state, tmp_path, {f"part-1{suffix}": names[:3], f"part-2{suffix}": names[3:]},
                     index_name=f"model{suffix}.index.json")
        checkpoint = tmp_path  # the folder: its one index is found
    with init_empty_weights(include_buffers=True):
        model = Block()
    load_checkpoint_in_model(model, checkpoint, device_map={"": "cpu"})
    assert_same_tensors(model, reference)


def test_without_a_device_map_values_are_copied_into_the_models_tensors(tmp_path):
    reference = trained_block()
    save_file(reference.state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = Block().half()
    weight = model.linear1.weight
    load_checkpoint_in_model(model, tmp_path)
    assert model.linear1.weight is weight and weight.dtype == torch.float16  # torch's load_state_dict
    assert torch.equal(weight, reference.linear1.weight.half())


def test_a_checkpoint_accels_save_model_wrote_loads_into_an_empty_model(tmp_path, accelerator):
    torch.manual_seed(0)
    trained = accelerator.prepare(TiedLM())
    accelerator.save_model(trained, tmp_path / "whole")
    accelerator.save_model(trained, tmp_path / "shards", max_shard_size=100)
    assert (tmp_path / "shards" / "model.safetensors.index.json").is_file()
    reference = accelerator.unwrap_model(trained)
    for folder in ("whole", "shards"):
        with init_empty_weights():
            model = TiedLM()
        model = load_checkpoint_and_dispatch(model, tmp_path / folder, device_map="auto",
                                             max_memory={"cpu": 10**6}, strict=True)
        assert_same_tensors(model, reference)
        assert model.head.weight is model.embed.weight  # save_model stored it once: the tie fills it
        tokens = torch.tensor([[1, 2, 3]])
        assert torch.equal(model(tokens), reference(tokens))


def test_accels_library_reads_what_the_python_writer_wrote(tmp_path, accelerator):
    torch.manual_seed(3)
    weights = {name: tensor for name, tensor in MLP().state_dict().items()}
    (tmp_path / "out").mkdir()
    save_file(weights, tmp_path / "out" / "model.safetensors", metadata={"format": "pt"})
    model = accelerator.prepare(scripted_bytes(MLP))
    model.load_weights(tmp_path / "out")
    for name, tensor in model.named_parameters():
        assert torch.equal(torch.from_numpy(tensor.numpy().copy()), weights[name]), name


def test_dtype_converts_floating_weights_and_keeps_integers(tmp_path):
    reference = trained_block()
    save_file(reference.state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"}, dtype="float16", keep_in_fp32_modules=["linear2"])
    assert model.linear1.weight.dtype == torch.float16 and model.batchnorm.running_mean.dtype == torch.float16
    assert model.linear2.weight.dtype == torch.float32
    assert model.batchnorm.num_batches_tracked.dtype == torch.int64
    assert torch.equal(model.linear1.weight, reference.linear1.weight.half())


def test_strict_refuses_missing_and_unexpected_names_before_changing_anything(tmp_path, caplog):
    state = trained_block().state_dict()
    state["extra.weight"] = torch.ones(2)
    del state["linear2.bias"]
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = Block()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(RuntimeError, match=r'(?s)Missing key\(s\) in state_dict: "linear2.bias".*'
                                           r'Unexpected key\(s\) in state_dict: "extra.weight"'):
        load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"}, strict=True)
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in before.items())
    with caplog.at_level(logging.WARNING):
        load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"})
    assert "were not used when initializing Block: ['extra.weight']" in caplog.text
    assert torch.equal(model.linear1.weight, state["linear1.weight"])
    assert torch.equal(model.linear2.bias, before["linear2.bias"])  # not in the checkpoint: left as it was


def test_names_missing_from_the_checkpoint_stay_empty_with_a_warning(tmp_path, caplog):
    state = trained_block().state_dict()
    del state["linear2.bias"]
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    with caplog.at_level(logging.WARNING):
        load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"})
    assert "still on the meta device (they have no values): ['linear2.bias']" in caplog.text


def test_a_checkpoint_that_does_not_fit_the_model_is_refused_before_loading(tmp_path):
    state = trained_block().state_dict()
    state["linear2.weight"] = torch.zeros(5, 5)
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = Block()
    linear1 = model.linear1.weight.clone()
    with pytest.raises(ValueError, match=r"shapes differ for linear2.weight: checkpoint \[5, 5\], model \[5, 4\]"):
        load_checkpoint_in_model(model, tmp_path, device_map={"": "cpu"})
    assert torch.equal(model.linear1.weight, linear1)


def test_an_index_naming_a_tensor_its_shard_lacks_is_refused(tmp_path):
    state = trained_block().state_dict()
    names = list(state)
    save_sharded(state, tmp_path, {"a.safetensors": names[:3], "b.safetensors": names[3:]})
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    index["weight_map"]["linear1.weight"] = "b.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"maps linear1.weight to .*b.safetensors, which does not hold them"):
        load_checkpoint_in_model(Block(), tmp_path)
    (tmp_path / "b.safetensors").unlink()
    with pytest.raises(ValueError, match=r"names shard files that do not exist: .*b.safetensors"):
        load_checkpoint_in_model(Block(), tmp_path)


def test_a_device_map_must_give_every_tensor_a_device(tmp_path):
    save_file(trained_block().state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    with pytest.raises(ValueError, match="linear2.weight, linear2.bias don't have any device set"):
        load_checkpoint_in_model(model, tmp_path, device_map={"linear1": "cpu", "batchnorm": "cpu"})
    assert model.linear1.weight.device.type == "meta"


def test_bitsandbytes_offload_is_unsupported(tmp_path):
    with pytest.raises(accel.UnsupportedError, match="bitsandbytes"):
        load_checkpoint_in_model(Block(), tmp_path, offload_8bit_bnb=True)


# --- safetensors files --------------------------------------------------------------------------------------

def test_safetensors_round_trip_every_dtype(tmp_path):
    tensors = {"f64": torch.randn(2, 3, dtype=torch.float64), "f32": torch.randn(3), "f16": torch.randn(4).half(),
               "bf16": torch.randn(5).bfloat16(), "i64": torch.arange(3), "i32": torch.arange(3, dtype=torch.int32),
               "i16": torch.arange(3, dtype=torch.int16), "i8": torch.arange(-2, 2, dtype=torch.int8),
               "u8": torch.arange(3, dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
               "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4)}
    save_file(tensors, tmp_path / "all.safetensors", metadata={"note": "x"})
    loaded = load_file(tmp_path / "all.safetensors")
    for name, tensor in tensors.items():
        assert loaded[name].dtype == tensor.dtype and torch.equal(loaded[name], tensor), name
    loaded["f32"].add_(1)  # a copy-on-write view: the file is unchanged
    assert torch.equal(load_file(tmp_path / "all.safetensors")["f32"], tensors["f32"])


def write_raw(path, header, payload, pad=b""):
    body = json.dumps(header).encode() + pad
    path.write_bytes(len(body).to_bytes(8, "little") + body + payload)


def test_a_tensor_unaligned_in_the_file_is_read_right(tmp_path):
    values = torch.tensor([1.5, -2.0, 3.25])
    # One byte of padding before the float32 bytes puts them at an odd address in the mapping.
    header = {"pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
              "x": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]}}
    for pad in (b"", b" ", b"  ", b"   "):
        write_raw(tmp_path / "odd.safetensors", header, b"\x07" + values.numpy().tobytes(), pad)
        assert torch.equal(load_file(tmp_path / "odd.safetensors")["x"], values)


@pytest.mark.parametrize("damage,message", [
    (lambda data: data[:-3], "the file is truncated"),
    (lambda data: data[:5], "fewer than the 8 of the header length"),
    (lambda data: (10**12).to_bytes(8, "little") + data[8:], "header length 1000000000000 is above"),
    (lambda data: (len(data)).to_bytes(8, "little") + data[8:], "runs past the end of the file"),
    (lambda data: data[:8] + b"x" + data[9:], "header is not UTF-8 JSON"),
])
def test_a_damaged_safetensors_file_is_refused_and_the_model_left_alone(tmp_path, damage, message):
    save_file(trained_block().state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    path = tmp_path / "model.safetensors"
    path.write_bytes(damage(path.read_bytes()))
    model = Block()
    linear1 = model.linear1.weight.clone()
    with pytest.raises(accel.InvalidArgumentError, match=message):
        load_checkpoint_in_model(model, path, device_map={"": "cpu"})
    assert torch.equal(model.linear1.weight, linear1)


@pytest.mark.parametrize("header,error,message", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, accel.InvalidArgumentError, "'b' overlaps 'a'"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, accel.InvalidArgumentError,
     r"'a' has 8 bytes, but its shape \[3\] of F32 needs 12"),
    ({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, accel.DtypeError, "dtype 'F8_E4M3'"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, accel.InvalidArgumentError,
     "not a list of non-negative integers"),
    ({"__metadata__": {"format": 1}}, accel.InvalidArgumentError, "__metadata__ is not a map of strings"),
])
def test_an_inconsistent_safetensors_header_is_refused(tmp_path, header, error, message):
    write_raw(tmp_path / "bad.safetensors", header, bytes(16))
    with pytest.raises(error, match=message):
        load_file(tmp_path / "bad.safetensors")


def test_a_repeated_name_in_the_header_is_refused(tmp_path):
    body = b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {"dtype": "U8", "shape": [1], ' \
           b'"data_offsets": [1, 2]}}'
    (tmp_path / "twice.safetensors").write_bytes(len(body).to_bytes(8, "little") + body + b"\x01\x02")
    with pytest.raises(accel.InvalidArgumentError, match="repeats the key 'a'"):
        load_file(tmp_path / "twice.safetensors")


# --- running offloaded and dispatched models ---------------------------------------------------------------

def test_disk_offload_in_a_device_map_runs_the_model(tmp_path):
    reference = trained_block()
    save_file(reference.state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    model = load_checkpoint_and_dispatch(model, tmp_path / "model.safetensors", offload_folder=tmp_path / "offload",
                                         device_map={"linear1": "cpu", "batchnorm": "cpu", "linear2": "disk"})
    assert model.linear2.weight.device.type == "meta"  # read from the folder for each forward
    assert (tmp_path / "offload" / "index.json").is_file()
    x = torch.randn(4, 3)
    assert torch.allclose(model.eval()(x), reference(x))
    with pytest.raises(RuntimeError, match="offloaded to cpu or disk"):
        model.to("cpu")


def test_cpu_and_disk_offload_of_a_whole_model_give_its_outputs(tmp_path):
    reference = trained_block()
    x = torch.randn(4, 3)
    expected = reference(x)
    cpu_offload(reference, execution_device="cpu", offload_buffers=True)
    assert reference.linear1.weight.device.type == "meta"
    assert torch.allclose(reference(x), expected)
    remove_hook_from_submodules(reference)
    assert reference.linear1.weight.device.type == "cpu" and torch.allclose(reference(x), expected)
    disk_offload(reference, tmp_path / "offload", execution_device="cpu")
    assert torch.allclose(reference(x), expected)


def test_cpu_blocks_are_offloaded_to_a_main_device_that_is_not_the_cpu(tmp_path):
    # torch.device("cpu") is not the map's "cpu": it stands in for a GPU as the main device, so the path a
    # GPU machine takes runs here (CPU blocks kept in a state dict, brought to the main device per forward).
    reference = trained_block()
    x = torch.randn(4, 3)
    expected = reference(x)
    main = torch.device("cpu")
    dispatch_model(reference, {"linear1": main, "batchnorm": "cpu", "linear2": "disk"}, main_device=main,
                   offload_dir=tmp_path)
    assert reference.batchnorm.weight.device.type == "meta" and reference.linear2.weight.device.type == "meta"
    assert reference.linear1.weight.device == main
    assert torch.allclose(reference(x), expected)
    remove_hook_from_submodules(reference)
    assert reference.batchnorm.weight.device.type == "cpu" and torch.allclose(reference(x), expected)


def test_the_state_dict_of_an_offloaded_module_is_read_back():
    reference = trained_block()
    expected = reference.linear1.weight.detach().clone()
    cpu_offload(reference, execution_device="cpu")
    state = get_state_dict_from_offload(reference.linear1, "linear1.weight",
                                        {"linear1.weight": None, "linear1.bias": None})
    assert torch.equal(state["linear1.weight"], expected) and state["linear1.bias"].shape == (4,)
    assert reference.linear1.weight.device.type == "meta"  # offloaded again afterwards


def test_dispatch_with_forced_hooks_on_one_device():
    reference = trained_block()
    x = torch.randn(4, 3)
    expected = reference(x)
    dispatch_model(reference, {"": "cpu"}, force_hooks=True)
    assert hasattr(reference, "_hf_hook") and torch.allclose(reference(x), expected)
    with pytest.raises(ValueError, match="offload the whole model to the disk"):
        dispatch_model(Block(), {"": "disk"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without CUDA gives")
def test_a_device_map_naming_a_missing_gpu_is_refused(tmp_path):
    save_file(trained_block().state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    with pytest.raises(ValueError, match="puts 'linear2' on cuda:0, but torch sees 0 CUDA device"):
        load_checkpoint_and_dispatch(model, tmp_path, device_map={"linear1": "cpu", "batchnorm": "cpu", "linear2": 0})
    assert model.linear1.weight.device.type == "meta"


@needs_cuda
def test_a_device_map_with_the_gpu_and_cpu_offload_runs_the_model(tmp_path):
    reference = trained_block()
    save_file(reference.state_dict(), tmp_path / "model.safetensors", metadata={"format": "pt"})
    with init_empty_weights():
        model = Block()
    model = load_checkpoint_and_dispatch(model, tmp_path, device_map={"linear1": 0, "batchnorm": "cpu", "linear2": 0})
    assert model.linear1.weight.device == torch.device("cuda", 0)
    assert model.batchnorm.weight.device.type == "meta"  # offloaded to the CPU, brought to GPU 0 to run
    x = torch.randn(4, 3)
    output = model.eval()(x)
    assert output.device.type == "cpu" and torch.allclose(output, reference(x), atol=1e-5)


@needs_cuda
def test_auto_device_map_loads_onto_the_gpu(tmp_path, accelerator):
    torch.manual_seed(0)
    trained = accelerator.prepare(TiedLM())
    accelerator.save_model(trained, tmp_path, max_shard_size=100)
    with init_empty_weights():
        model = TiedLM()
    model = load_checkpoint_and_dispatch(model, tmp_path, device_map="auto", dtype=torch.float16)
    assert model.embed.weight.device == torch.device("cuda", 0) and model.embed.weight.dtype == torch.float16
    assert model.head.weight is model.embed.weight
    reference = accelerator.unwrap_model(trained).cpu()
    assert_same_tensors(model.float(), reference.half().float())
