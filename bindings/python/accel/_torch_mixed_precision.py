"""FSDP's mixed precision for stage 3's torch modules (accel._torch_sharded): the policy's dtype names as torch's,
inputs cast to the compute dtype, and buffer_dtype's buffers."""
import torch


TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def cast_floating(value, dtype):
    """value with its floating tensors (in nested lists, tuples and dicts) cast to dtype."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        items = [cast_floating(item, dtype) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((key, cast_floating(item, dtype)) for key, item in value.items())
    return value


def cast_buffers(module, buffer_dtype):
    """FSDP's buffer_dtype (a mixed precision policy's name, or None for none): every floating buffer of module
    of another dtype replaced by a copy in it, for good (FSDP casts them at its first forward and keeps them
    so), but those of BatchNorm modules, which FSDP keeps out of mixed precision (MixedPrecision's
    _module_classes_to_ignore); a buffer several modules hold stays one tensor. Returns {id(cast buffer): its
    former dtype}, what a state dict gives them back in, as FSDP's full state dict does."""
    if buffer_dtype is None:
        return {}
    dtype, cast, former = TORCH_DTYPES[buffer_dtype], {}, {}
    for submodule in module.modules():
        if isinstance(submodule, torch.nn.modules.batchnorm._BatchNorm):
            continue
        for name, buffer in submodule._buffers.items():
            if buffer is None or not buffer.is_floating_point() or buffer.dtype == dtype:
                continue
            if id(buffer) not in cast:
                cast[id(buffer)] = buffer.detach().to(dtype)
                former[id(cast[id(buffer)])] = buffer.dtype
            submodule._buffers[name] = cast[id(buffer)]
    return former
