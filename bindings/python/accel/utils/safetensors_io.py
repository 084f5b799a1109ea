"""accel.utils.safetensors_io: .safetensors files in pure Python, for torch: what the safetensors package's
safe_open, load_file and save_file do, so that big-model loading needs no package beyond torch.

The format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON mapping each tensor's name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets into the payload that follows the header) plus an
optional "__metadata__" map of strings, then the payload. Every entry is checked when the file is opened,
before any tensor is made, so a damaged file is refused whole: InvalidArgumentError naming the file and the
fault (truncated payload, bad header, overlapping tensors, a size that does not match the shape, ...),
DtypeError for a dtype outside F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL; the classes the C library's reader
raises for the same file. Gaps between tensors are allowed, as the library's reader allows them.

Tensors are read without copies: views of a copy-on-write mapping of the file (writing to one never
changes the file), except a tensor whose bytes are not aligned for its dtype, which is copied.
"""
import json
import mmap
import os

import torch

from .._library import lib
from ..errors import DtypeError, InvalidArgumentError

# The format's dtype names and torch's dtypes, both ways (the writer looks names up by dtype).
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
_NAMES_OF_DTYPES = {dtype: name for name, dtype in DTYPES.items()}
# Bytes per element (torch 1.13's dtypes have no itemsize).
ITEM_SIZES = {dtype: torch.empty(0, dtype=dtype).element_size() for dtype in DTYPES.values()}

# The safetensors package refuses larger headers; a bigger length is a damaged file, not a real header.
MAX_HEADER_BYTES = 100_000_000
_METADATA_KEY = "__metadata__"


def _malformed(path, fault):
    return InvalidArgumentError(lib.ACCEL_ERR_INVALID_ARGUMENT, f"{path} is not a valid safetensors file: {fault}")


def _refuse_repeated_keys(path):
    """json.loads' object_pairs_hook: a dict of the pairs, refusing a key given twice (json keeps the last,
    which would hide a damaged or tampered header)."""
    def build(pairs):
        result = {}
        for key, value in pairs:
            if key in result:
                raise _malformed(path, f"the header repeats the key {key!r}")
            result[key] = value
        return result
    return build


class TensorInfo:
    """One tensor's entry in a header: dtype (torch), shape (tuple) and its byte range [begin, end) in the
    payload."""

    def __init__(self, dtype, shape, begin, end):
        self.dtype, self.shape, self.begin, self.end = dtype, shape, begin, end

    @property
    def numel(self):
        count = 1
        for size in self.shape:
            count *= size
        return count


def _tensor_info(path, name, entry):
    """The TensorInfo of a header entry, after checking its fields' types and that its byte range holds
    exactly its shape's elements."""
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise _malformed(path, f"the entry of {name!r} is not an object with dtype, shape and data_offsets")
    dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype_name not in DTYPES:
        raise DtypeError(lib.ACCEL_ERR_DTYPE, f"{path}: tensor {name!r} has dtype {dtype_name!r}, which accel does "
                                              f"not read (it reads {', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(type(size) is int and size >= 0 for size in shape):
        raise _malformed(path, f"the shape of {name!r} is {shape!r}, not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise _malformed(path, f"the data_offsets of {name!r} are {offsets!r}, not [begin, end] with 0 <= begin <= end")
    info = TensorInfo(DTYPES[dtype_name], tuple(shape), offsets[0], offsets[1])
    expected = info.numel * ITEM_SIZES[info.dtype]
    if info.end - info.begin != expected:
        raise _malformed(path, f"{name!r} has {info.end - info.begin} bytes, but its shape {list(shape)} of "
                               f"{dtype_name} needs {expected}")
    return info


def read_header(path):
    """(header length, {name: TensorInfo}, metadata dict or None) of the file at path, every entry checked
    against the file's size and the others (no overlaps). Reads only the header."""
    path = os.fspath(path)
    with open(path, "rb") as file:
        file_size = os.fstat(file.fileno()).st_size
        if file_size < 8:
            raise _malformed(path, f"it has {file_size} bytes, fewer than the 8 of the header length")
        header_length = int.from_bytes(file.read(8), "little")
        if header_length > MAX_HEADER_BYTES:
            raise _malformed(path, f"the header length {header_length} is above the {MAX_HEADER_BYTES} bytes allowed")
        if 8 + header_length > file_size:
            raise _malformed(path, f"the header length {header_length} runs past the end of the file "
                                   f"({file_size} bytes): the file is truncated")
        header_bytes = file.read(header_length)
    try:
        header = json.loads(header_bytes.decode("utf-8"), object_pairs_hook=_refuse_repeated_keys(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _malformed(path, f"the header is not UTF-8 JSON ({error})") from None
    if not isinstance(header, dict):
        raise _malformed(path, "the header is not a JSON object")
    metadata = header.pop(_METADATA_KEY, None)
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise _malformed(path, "__metadata__ is not a map of strings")
    infos = {name: _tensor_info(path, name, entry) for name, entry in header.items()}
    payload_size = file_size - 8 - header_length
    previous_name, previous_end = None, 0
    for name, info in sorted(infos.items(), key=lambda item: (item[1].begin, item[1].end)):
        if info.end > payload_size:
            raise _malformed(path, f"{name!r} ends at payload byte {info.end}, past the payload's {payload_size} "
                                   "bytes: the file is truncated")
        if info.begin < previous_end:
            raise _malformed(path, f"{name!r} overlaps {previous_name!r}")
        if info.end > info.begin:
            previous_name, previous_end = name, info.end
    return header_length, infos, metadata


def _torch_device(device):
    """torch's spelling of a device: an int is a CUDA device index, as in Accelerate's device maps."""
    return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)


class SafetensorsFile:
    """An opened .safetensors file (safetensors' safe_open for framework "pt"): keys(), metadata(),
    get_tensor(name), and info(name) for a tensor's dtype and shape without reading it. Tensors come on
    `device` ("cpu" by default; "cuda:0" or 0 copies them there). A context manager, as safe_open is;
    tensors taken stay valid after it closes."""

    def __init__(self, path, device="cpu"):
        self.path = os.fspath(path)
        self.device = _torch_device(device)
        self._header_length, self._infos, self._metadata = read_header(self.path)
        self._mapping = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        # The mapping is dropped, not closed: tensors already made are views of it and keep it alive.
        self._mapping = None

    def keys(self):
        """The tensors' names, in name order (safe_open's order)."""
        return sorted(self._infos)

    def metadata(self):
        """The __metadata__ map, or None when the file has none."""
        return None if self._metadata is None else dict(self._metadata)

    def info(self, name):
        """The TensorInfo (dtype, shape) of the tensor called name; KeyError naming the file otherwise."""
        if name not in self._infos:
            raise KeyError(f"{self.path} holds no tensor named {name!r}")
        return self._infos[name]

    def get_tensor(self, name):
        """The tensor called name, on the file's device: on the CPU a copy-on-write view of the file."""
        info = self.info(name)
        start = 8 + self._header_length + info.begin
        if info.numel == 0:
            tensor = torch.empty(info.shape, dtype=info.dtype)
        elif start % ITEM_SIZES[info.dtype] == 0:
            tensor = torch.frombuffer(self._mapped(), dtype=info.dtype, count=info.numel, offset=start)
            tensor = tensor.reshape(info.shape)
        else:
            # Unaligned for its dtype: copied into memory torch allocated (aligned), byte for byte.
            tensor = torch.empty(info.shape, dtype=info.dtype)
            destination = tensor.reshape(-1).view(torch.uint8)
            destination.copy_(torch.frombuffer(self._mapped(), dtype=torch.uint8, count=info.end - info.begin,
                                               offset=start))
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def _mapped(self):
        # ACCESS_COPY: private pages, so tensors are writable (torch wants a writable buffer) and writes to
        # them never reach the file.
        if self._mapping is None:
            with open(self.path, "rb") as file:
                self._mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        return self._mapping


def safe_open(filename, framework="pt", device="cpu"):
    """safetensors' safe_open: the SafetensorsFile of filename. framework must be "pt" (torch)."""
    if framework not in ("pt", "torch"):
        raise ValueError(f"accel reads safetensors files into torch only (framework 'pt'), not {framework!r}")
    return SafetensorsFile(filename, device=device)


def load_file(filename, device="cpu"):
    """safetensors.torch.load_file: every tensor of the file, by name, on device."""
    with SafetensorsFile(filename, device=device) as opened:
        return {name: opened.get_tensor(name) for name in opened.keys()}


def _tensor_bytes(tensor):
    """The bytes of a tensor as the format stores them: C order, on the CPU."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def save_file(tensors, filename, metadata=None):
    """safetensors.torch.save_file: tensors (a dict of name to torch tensor) into filename, with metadata (a
    dict of strings) as __metadata__. As the safetensors package lays them out: the widest dtypes first,
    then by name, back to back, so that every tensor is aligned for its dtype and the payload has no gaps.
    The file appears whole or not at all (written beside it, then renamed over it)."""
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("safetensors metadata must map strings to strings")
    for name, tensor in tensors.items():
        if not isinstance(name, str) or name == _METADATA_KEY:
            raise ValueError(f"{name!r} cannot name a tensor in a safetensors file")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name!r} is a {type(tensor).__name__}, not a torch tensor")
        if tensor.dtype not in _NAMES_OF_DTYPES:
            raise DtypeError(lib.ACCEL_ERR_DTYPE, f"{name!r} has dtype {tensor.dtype}, which accel does not write "
                                                  f"to safetensors (it writes {', '.join(DTYPES)})")
    header = {} if metadata is None else {_METADATA_KEY: dict(metadata)}
    payload = []
    offset = 0
    for name in sorted(tensors, key=lambda name: (-ITEM_SIZES[tensors[name].dtype], name)):
        data = _tensor_bytes(tensors[name])
        header[name] = {"dtype": _NAMES_OF_DTYPES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        payload.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Spaces pad the header so that the payload starts 8-byte aligned.
    header_bytes += b" " * (-len(header_bytes) % 8)
    filename = os.fspath(filename)
    temporary = f"{filename}.{os.getpid()}.partial"
    try:
        with open(temporary, "wb") as file:
            file.write(len(header_bytes).to_bytes(8, "little"))
            file.write(header_bytes)
            for data in payload:
                file.write(data)
        os.replace(temporary, filename)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
