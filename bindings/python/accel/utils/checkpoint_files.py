"""The files of a model checkpoint: which files a checkpoint path means (one file, an index of shards, or a
folder holding either), what they hold without loading them where the format allows it (safetensors
headers, the index), reading one file's tensors (Accelerate's load_state_dict), and writing a state dict
as Accelerate's save_model lays it out (write_checkpoint). Formats: .safetensors
(accel.utils.safetensors_io), torch.save's .bin / .pt pickles, and the index JSON that
transformers and accel's save_model write ({"weight_map": {tensor: shard file}}; a bare map is read too)."""
import inspect
import json
import os
import re

import torch

from .._loggers import library_logger
from .module_tensors import device_of
from .other import storage_key
from .safetensors_io import read_header, safe_open, save_file

logger = library_logger(__name__)

WEIGHTS_NAME = "pytorch_model.bin"
SAFE_WEIGHTS_NAME = "model.safetensors"
INDEX_SUFFIX = ".index.json"
WEIGHTS_INDEX_NAME = WEIGHTS_NAME + INDEX_SUFFIX
SAFE_WEIGHTS_INDEX_NAME = SAFE_WEIGHTS_NAME + INDEX_SUFFIX
# torch.load's weights_only (torch >= 1.13): unpickles tensors and plain containers only.
_WEIGHTS_ONLY = {"weights_only": True} if "weights_only" in inspect.signature(torch.load).parameters else {}


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
    on the CPU); any other file is torch.load's, on the CPU, with weights_only where torch has it (tensors and plain
    containers only; otherwise a pickle: load only files you trust)."""
    checkpoint_file = os.fspath(checkpoint_file)
    if not is_safetensors(checkpoint_file):
        return torch.load(checkpoint_file, map_location=torch.device("cpu"), **_WEIGHTS_ONLY)
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


def split_into_shards(state_dict, max_shard_size):
    """(shards, total_size): the names of state_dict in shards of at most max_shard_size bytes, in order, each
    filled until the next tensor would pass it (a bigger tensor gets a shard of its own), as the library's
    save_model splits them; tensors sharing memory go with the first of them and count once."""
    shards, shard_of_storage, total_size, current_size = [], {}, 0, 0
    for name, tensor in state_dict.items():
        key = storage_key(tensor)
        if key in shard_of_storage:
            shard_of_storage[key].append(name)
            continue
        size = tensor.numel() * tensor.element_size()
        if not shards or current_size + size > max_shard_size:
            shards.append([])
            current_size = 0
        shards[-1].append(name)
        shard_of_storage[key] = shards[-1]
        current_size += size
        total_size += size
    return shards, total_size


def _earlier_save(filename, safe_serialization):
    """Whether filename is a file of a save_model of the format (whole file, index or shard)."""
    whole = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    stem, suffix = os.path.splitext(whole)
    return (filename in (whole, whole + INDEX_SUFFIX)
            or re.fullmatch(re.escape(stem) + r"-\d{5}-of-\d{5}" + re.escape(suffix), filename) is not None)


def _write_file(tensors, path, safe_serialization):
    """One checkpoint file, written beside path then renamed over it (the rename is left to the caller: the
    temporary path is returned)."""
    temporary = f"{path}.{os.getpid()}.partial"
    try:
        if safe_serialization:
            save_file(tensors, temporary, metadata={"format": "pt"})
        else:
            torch.save(tensors, temporary)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return temporary


def write_checkpoint(state_dict, directory, max_shard_size, safe_serialization):
    """Writes state_dict into the folder directory (which must exist) as save_model does: up to max_shard_size
    bytes into model.safetensors (pytorch_model.bin when not safe_serialization, with torch.save); above it
    into model-00001-of-0000N.safetensors (pytorch_model-00001-of-0000N.bin) ... with the index
    model.safetensors.index.json (pytorch_model.bin.index.json): {"metadata": {"total_size": bytes},
    "weight_map": {name: shard}}. The files are written under temporary names, then the files of an earlier
    save of the format are removed and the new ones renamed into place, the index last. Other files stay."""
    whole = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    shards, total_size = split_into_shards(state_dict, max_shard_size)
    stem, suffix = os.path.splitext(whole)
    names = ([whole] if len(shards) <= 1 else
             [f"{stem}-{i:05d}-of-{len(shards):05d}{suffix}" for i in range(1, len(shards) + 1)])
    written = {}
    try:
        for filename, shard in zip(names, shards or [[]]):
            written[filename] = _write_file({name: state_dict[name] for name in shard},
                                            os.path.join(directory, filename), safe_serialization)
        if len(shards) > 1:
            index = {"metadata": {"total_size": total_size},
                     "weight_map": {name: filename for filename, shard in zip(names, shards) for name in shard}}
            index_path = os.path.join(directory, whole + INDEX_SUFFIX)
            written[whole + INDEX_SUFFIX] = f"{index_path}.{os.getpid()}.partial"
            with open(written[whole + INDEX_SUFFIX], "w", encoding="utf-8") as file:
                file.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    except BaseException:
        for temporary in written.values():
            if os.path.exists(temporary):
                os.unlink(temporary)
        raise
    for filename in os.listdir(directory):
        path = os.path.join(directory, filename)
        if filename not in written and _earlier_save(filename, safe_serialization) and os.path.isfile(path):
            os.unlink(path)
    for filename, temporary in written.items():
        os.replace(temporary, os.path.join(directory, filename))
    if len(shards) > 1:
        logger.info(f"The model is bigger than the maximum size per checkpoint ({max_shard_size} bytes) and is "
                    f"split in {len(shards)} checkpoint shards; the index {whole + INDEX_SUFFIX} in {directory} "
                    "says where each tensor is.")
