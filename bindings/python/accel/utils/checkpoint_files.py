"""The files of a model checkpoint: which files a checkpoint path means (one file, an index of shards, or a
folder holding either), what they hold without loading them where the format allows it (safetensors
headers, the index), and reading one file's tensors (Accelerate's load_state_dict). Formats: .safetensors
(accel.utils.safetensors_io), torch.save's .bin / .pt pickles, and the index JSON that
transformers and accel's save_model write ({"weight_map": {tensor: shard file}}; a bare map is read too)."""
import json
import logging
import os

import torch

from .module_tensors import device_of
from .safetensors_io import read_header, safe_open

logger = logging.getLogger(__name__)

WEIGHTS_NAME = "pytorch_model.bin"
SAFE_WEIGHTS_NAME = "model.safetensors"
INDEX_SUFFIX = ".index.json"


def is_safetensors(path):
    return str(path).endswith(".safetensors")


class CheckpointFiles:
    """A resolved checkpoint: files (the paths to read, in order) and weight_map ({tensor: path}, from the
    index; None for a single file)."""

    def __init__(self, files, weight_map=None):
        self.files, self.weight_map = files, weight_map

    @classmethod
    def resolve(cls, checkpoint):
        """The files of checkpoint: a file holding a whole state dict, an index (.json) of shards, or a folder
        holding pytorch_model.bin, model.safetensors or exactly one *.index.json. ValueError otherwise."""
        checkpoint = os.fspath(checkpoint)
        if os.path.isfile(checkpoint):
            return cls._from_index(checkpoint) if checkpoint.endswith(".json") else cls([checkpoint])
        if not os.path.isdir(checkpoint):
            raise ValueError("`checkpoint` should be the path to a file containing a whole state dict, or the index "
                             "of a sharded checkpoint, or a folder containing a sharded checkpoint or the whole state "
                             f"dict, but got {checkpoint}.")
        names = os.listdir(checkpoint)
        for whole in (WEIGHTS_NAME, SAFE_WEIGHTS_NAME):
            if whole in names:
                return cls([os.path.join(checkpoint, whole)])
        indexes = [name for name in names if name.endswith(INDEX_SUFFIX)]
        if not indexes:
            raise ValueError(f"{checkpoint} is not a folder containing a `.index.json` file or a {WEIGHTS_NAME} or a "
                             f"{SAFE_WEIGHTS_NAME} file")
        if len(indexes) > 1:
            raise ValueError(f"{checkpoint} containing more than one `.index.json` file, delete the irrelevant ones.")
        return cls._from_index(os.path.join(checkpoint, indexes[0]))

    @classmethod
    def _from_index(cls, index_path):
        try:
            with open(index_path, encoding="utf-8") as file:
                index = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{index_path} is not a valid checkpoint index: {error}") from None
        weight_map = index.get("weight_map", index) if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"{index_path} is not a valid checkpoint index: it maps no tensor names to shard files")
        folder = os.path.dirname(index_path)
        weight_map = {name: os.path.join(folder, shard) for name, shard in weight_map.items()}
        files = sorted(set(weight_map.values()))
        absent = [path for path in files if not os.path.isfile(path)]
        if absent:
            raise ValueError(f"{index_path} names shard files that do not exist: {', '.join(absent)}")
        return cls(files, weight_map)


class CheckpointContents:
    """What a checkpoint holds, known before its tensors are read: names (every tensor name), shapes ({name:
    shape}, from safetensors headers; .bin files have none until read), aliases ({name left out: name
    stored}: tied weights a safetensors file stores once and records in its metadata, as accel's save_model
    and safetensors' save_model do) and preloaded ({path: tensors} of files that had to be read to be known,
    so that they are not read twice)."""

    def __init__(self, checkpoint_files):
        self.names, self.shapes, self.aliases, self.preloaded = set(), {}, {}, {}
        for path in checkpoint_files.files:
            if is_safetensors(path):
                _, infos, metadata = read_header(path)
                self._check_index_entries(checkpoint_files.weight_map, path, infos)
                self.names.update(infos)
                self.shapes.update({name: info.shape for name, info in infos.items()})
                self.aliases.update({left_out: stored for left_out, stored in (metadata or {}).items()
                                     if stored in infos})
            elif checkpoint_files.weight_map is not None:
                self.names.update(name for name, shard in checkpoint_files.weight_map.items() if shard == path)
            else:
                self.preloaded[path] = load_state_dict(path)
                self.names.update(self.preloaded[path])
        # A name the files hold is not an alias, even where metadata names it.
        self.aliases = {left_out: stored for left_out, stored in self.aliases.items() if left_out not in self.names}

    @staticmethod
    def _check_index_entries(weight_map, path, infos):
        if weight_map is None:
            return
        absent = [name for name, shard in weight_map.items() if shard == path and name not in infos]
        if absent:
            raise ValueError(f"the checkpoint index maps {', '.join(absent)} to {path}, which does not hold them")


def _safetensors_format(path):
    """Checks the metadata's "format" as transformers writes it: "pt" (or none, with a warning); a tf or flax
    checkpoint is refused."""
    with safe_open(path, framework="pt") as file:
        metadata = file.metadata()
    if metadata is None:
        logger.warning(f"The safetensors archive passed at {path} does not contain metadata. Make sure to save your "
                       "model with the `save_pretrained` method. Defaulting to 'pt' metadata.")
        return
    checkpoint_format = metadata.get("format", "pt")
    if checkpoint_format not in ("pt", "tf", "flax"):
        raise OSError(f"The safetensors archive passed at {path} does not contain the valid metadata. Make sure you "
                      "save your model with the `save_pretrained` method.")
    if checkpoint_format != "pt":
        raise ValueError(f"The checkpoint passed was saved with {checkpoint_format}, we need a the pt format.")


def load_state_dict(checkpoint_file, device_map=None):
    """The tensors of one checkpoint file, by name. A .safetensors file is mapped, not read whole, and with a
    device_map each tensor goes straight to its module's device ("disk" and names the map does not cover
    on the CPU); any other file is torch.load's, on the CPU (a pickle: load only files you trust)."""
    checkpoint_file = os.fspath(checkpoint_file)
    if not is_safetensors(checkpoint_file):
        return torch.load(checkpoint_file, map_location=torch.device("cpu"))
    _safetensors_format(checkpoint_file)
    with safe_open(checkpoint_file, framework="pt") as file:
        tensors = {}
        for name in file.keys():
            tensor = file.get_tensor(name)
            device = _load_device(name, device_map)
            tensors[name] = tensor if device == "cpu" else tensor.to(device)
        return tensors


def _load_device(name, device_map):
    """Where load_state_dict puts a tensor: its module's device in device_map, the CPU for "disk" or no map."""
    if device_map is None:
        return "cpu"
    try:
        device = device_of(name, device_map)
    except KeyError:
        return "cpu"
    if device in ("disk", "cpu"):
        return "cpu"
    return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
