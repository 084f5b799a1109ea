"""accel.utils.other: Accelerate's extract_model_from_parallel, save and check_os_kernel."""
import platform
import re
import sys

from .._loggers import library_logger_name
from ..logging import get_logger
from ..state import PartialState, _live_accelerator

logger = get_logger(library_logger_name(__name__))


def extract_model_from_parallel(model, keep_fp32_wrapper=True, keep_torch_compile=True, recursive=False):
    """The model without what prepare put around it (Accelerator.unwrap_model of the process's
    Accelerator); a model no Accelerator prepared is given back as it is. recursive: also every submodule
    that is a prepared model's wrapper is replaced by its module, in place, as Accelerate does. torch's own
    DataParallel and DistributedDataParallel wrappers come off too; keep_fp32_wrapper False also takes off
    a forward wrapped by hand as prepare wraps it (model._original_forward, convert_outputs_to_fp32)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        while isinstance(model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)):
            model = model.module
    accelerator = _live_accelerator()
    if accelerator is not None:
        unwrap = accelerator.unwrap_model
        model = unwrap(model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile)
        if recursive and hasattr(model, "named_modules"):
            for parent in list(model.modules()):
                for name, child in list(parent.named_children()):
                    unwrapped = unwrap(child, keep_fp32_wrapper=keep_fp32_wrapper,
                                       keep_torch_compile=keep_torch_compile)
                    if unwrapped is not child:
                        setattr(parent, name, unwrapped)
    if not keep_fp32_wrapper and "_original_forward" in getattr(model, "__dict__", {}):
        from ..torch_model import restore_forward
        restore_forward(model)
    return model


def storage_key(tensor):
    """What tensors sharing memory have in common: their device and their storage's address and size."""
    storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
    return tensor.device, storage.data_ptr(), storage.nbytes()


def _without_shared_tensors(state_dict):
    """state_dict for safetensors, which stores no tensor twice: of names sharing memory the first is kept
    and the others dropped with a warning (Accelerate's clean_state_dict_for_safetensors); every tensor
    contiguous."""
    names_by_storage = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, str):
            names_by_storage.setdefault(storage_key(tensor), []).append(name)
    dropped = {name for names in names_by_storage.values() for name in names[1:]}
    if dropped:
        logger.warning(f"Removed shared tensor {dropped} while saving. This should be OK, but check by verifying "
                       "that you don't receive any warning while reloading")
    return {name: value.contiguous() if hasattr(value, "contiguous") else value
            for name, value in state_dict.items() if name not in dropped}


def save(obj, f, save_on_each_node=False, safe_serialization=False):
    """Accelerate's save: torch.save(obj, f) by the main process (the main process of each node with
    save_on_each_node). safe_serialization: obj is a dict of name to torch tensor, written as a safetensors
    file (accel's own writer, accel.utils.safetensors_io; metadata {"format": "pt"}), tensors sharing
    memory once."""
    state = PartialState()
    if not (state.is_local_main_process if save_on_each_node else state.is_main_process):
        return
    if safe_serialization:
        from .safetensors_io import save_file
        save_file(_without_shared_tensors(dict(obj)), f, metadata={"format": "pt"})
    else:
        import torch
        torch.save(obj, f)


def check_os_kernel():
    """Warns (a log record) on Linux below kernel 5.5.0, where processes can hang, as Accelerate does."""
    from packaging.version import Version
    info = platform.uname()
    if info.system != "Linux":
        return
    found = re.search(r"\d+\.\d+\.\d+", info.release)
    minimum = "5.5.0"
    if found and Version(found.group()) < Version(minimum):
        logger.warning(f"Detected kernel version {found.group()}, which is below the recommended minimum of {minimum}; "
                       "this can cause the process to hang. It is recommended to upgrade the kernel to the minimum "
                       "version or higher.", main_process_only=True)
