"""accel.utils.offload: weights kept off the accelerator, in a state dict on the CPU or as files in a folder,
and read back by name when a layer runs (Accelerate's accelerate.utils.offload). The folder holds one raw
C-order file per tensor, <name>.dat, and index.json mapping each name to its {"dtype", "shape"} (bfloat16,
which numpy lacks, stored as int16 bits): Accelerate's layout, so either reads the other's folders. An index
entry may instead point into a safetensors file ({"safetensors_file", "weight_name"}), as transformers writes
it for weights that are already on disk in a checkpoint."""
import collections.abc
import json
import os

import numpy as np
import torch

from .safetensors_io import safe_open

INDEX_FILE = "index.json"


def offload_weight(weight, weight_name, offload_folder, index=None):
    """Writes weight to offload_folder/<weight_name>.dat and records its dtype and shape in index (a dict,
    updated and returned; None: nothing recorded)."""
    dtype_name = None
    if weight.dtype == torch.bfloat16:
        weight, dtype_name = weight.view(torch.int16), "bfloat16"
    array = weight.detach().cpu().numpy()
    if index is not None:
        index[weight_name] = {"dtype": dtype_name or str(array.dtype), "shape": list(array.shape)}
    np.ascontiguousarray(array).tofile(os.path.join(offload_folder, f"{weight_name}.dat"))
    return index


def load_offloaded_weight(weight_file, weight_info):
    """The tensor offload_weight wrote to weight_file, from its index entry weight_info. ValueError naming the
    file when its size is not what the entry says (a truncated or foreign file)."""
    shape = tuple(weight_info["shape"])
    stored_dtype = "int16" if weight_info["dtype"] == "bfloat16" else weight_info["dtype"]
    expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(stored_dtype).itemsize
    actual = os.path.getsize(weight_file)
    if actual != expected:
        raise ValueError(f"{weight_file} has {actual} bytes, but its index entry {weight_info} needs {expected}")
    array = np.fromfile(weight_file, dtype=stored_dtype).reshape(shape)
    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if weight_info["dtype"] == "bfloat16" else tensor


def save_offload_index(index, offload_folder):
    """Merges index into offload_folder/index.json (created if absent); an empty index writes nothing."""
    if not index:
        return
    path = os.path.join(offload_folder, INDEX_FILE)
    current = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as file:
            current = json.load(file)
    current.update(index)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(current, file, indent=2)


def offload_state_dict(save_dir, state_dict):
    """Writes every tensor of state_dict into the folder save_dir (created if needed), with its index."""
    os.makedirs(save_dir, exist_ok=True)
    index = {}
    for name, tensor in state_dict.items():
        offload_weight(tensor, name, save_dir, index=index)
    save_offload_index(index, save_dir)


class PrefixedDataset(collections.abc.Mapping):
    """The entries of dataset (a mapping with string keys) under prefix, by their names after it: what one
    module of a model sees of the whole model's offloaded weights."""

    def __init__(self, dataset, prefix):
        self.dataset = dataset
        self.prefix = prefix

    def __getitem__(self, key):
        return self.dataset[f"{self.prefix}{key}"]

    def __iter__(self):
        return iter([key for key in self.dataset if key.startswith(self.prefix)])

    def __len__(self):
        return len(self.dataset)


class OffloadedWeightsLoader(collections.abc.Mapping):
    """Offloaded weights by name, read when asked for: from state_dict (first), else from save_folder's files
    as index (by default save_folder's index.json) describes them. device: where tensors read from a
    safetensors file are put (default the CPU)."""

    def __init__(self, state_dict=None, save_folder=None, index=None, device=None):
        if state_dict is None and save_folder is None and index is None:
            raise ValueError("Need either a `state_dict`, a `save_folder` or an `index` containing offloaded weights.")
        self.state_dict = {} if state_dict is None else state_dict
        self.save_folder = save_folder
        if index is None and save_folder is not None:
            with open(os.path.join(save_folder, INDEX_FILE), encoding="utf-8") as file:
                index = json.load(file)
        self.index = {} if index is None else index
        self.all_keys = list(self.state_dict) + [key for key in self.index if key not in self.state_dict]
        self.device = device

    def __getitem__(self, key):
        if key in self.state_dict:
            return self.state_dict[key]
        info = self.index[key]
        if info.get("safetensors_file") is not None:
            device = "cpu" if self.device is None else self.device
            with safe_open(info["safetensors_file"], framework="pt", device=device) as file:
                tensor = file.get_tensor(info.get("weight_name", key))
            return tensor.to(getattr(torch, info["dtype"])) if "dtype" in info else tensor
        return load_offloaded_weight(os.path.join(self.save_folder, f"{key}.dat"), info)

    def __iter__(self):
        return iter(self.all_keys)

    def __len__(self):
        return len(self.all_keys)


def extract_submodules_state_dict(state_dict, submodule_names):
    """The entries of state_dict that belong to the modules submodule_names ("h.1" takes "h.1.weight", not
    "h.10.weight")."""
    return {key: tensor for key, tensor in state_dict.items()
            if any(key == name or key.startswith(name + ".") for name in submodule_names)}
