"""accelerate.utils.fsdp_utils as far as accel has it: merge_fsdp_weights, run by the accel program's
`merge-weights` (the one place that lays a merged model out; it needs no process group and no LibTorch), and
save_fsdp_model / load_fsdp_model under FULL_STATE_DICT (Accelerate's pytorch_model_fsdp.bin). Not here:
save_fsdp_optimizer and load_fsdp_optimizer (a torch optimizer prepared under ZeRO holds each process's share
of its state, as DeepSpeed's, not FSDP's full optimizer state dict: save_state and load_state carry it, to any
number of processes)."""
import os
import shutil
import subprocess

from .._library import lib
from ..errors import UnsupportedError
from ..state import PartialState


def _accel_program():
    """The accel program: beside the libaccel this process loaded (<prefix>/lib/libaccel.so ->
    <prefix>/bin/accel, the build tree's layout as an installation's), else the one on PATH."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith("libaccel.so"):
                candidate = os.path.normpath(os.path.join(os.path.dirname(path), os.pardir, "bin", "accel"))
                if os.access(candidate, os.X_OK):
                    return candidate
    found = shutil.which("accel")
    if found is None:
        raise FileNotFoundError("merge_fsdp_weights runs the accel program, which is neither beside the loaded "
                                "libaccel (../bin/accel) nor on PATH")
    return found


def merge_fsdp_weights(checkpoint_dir, output_path, safe_serialization=True, remove_checkpoint_dir=False):
    """Accelerate's merge_fsdp_weights: the model of checkpoint_dir (a save_state folder, or a save_model's
    files, of any ZeRO stage and number of processes) written into output_path as save_model writes a model
    held whole (`accel merge-weights`, docs/checkpoints.md), on the main process while the others wait.
    remove_checkpoint_dir: checkpoint_dir removed once merged. safe_serialization=False (pickled .bin files)
    is UnsupportedError; a checkpoint_dir that is no checkpoint, or an output_path holding a model, is
    ValueError with the program's message."""
    if not safe_serialization:
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, "merge_fsdp_weights(safe_serialization=False): accel "
                                                          "writes model.safetensors, not pickled .bin files")
    state = PartialState()
    if state.is_main_process:
        command = [_accel_program(), "merge-weights", os.fspath(checkpoint_dir), os.fspath(output_path)]
        if remove_checkpoint_dir:
            command.append("--remove_checkpoint_dir")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise ValueError(result.stderr.strip())
    state.wait_for_everyone()


FSDP_MODEL_NAME = "pytorch_model_fsdp"  # Accelerate's


def _model_file(directory, model_index):
    name = f"{FSDP_MODEL_NAME}.bin" if model_index == 0 else f"{FSDP_MODEL_NAME}_{model_index}.bin"
    return os.path.join(directory, name)


def _refuse_other_than_full(fsdp_plugin, adapter_only, what):
    if adapter_only:
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, f"{what}(adapter_only=True): a PEFT adapter's state dict "
                                                          "needs peft, which accel does not use")
    if fsdp_plugin.state_dict_type != "FULL_STATE_DICT":
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
            f"{what} under {fsdp_plugin.state_dict_type}: torch.distributed.checkpoint's files are not accel's; "
            "accelerator.save_state writes the model in each process's pieces (load_state reads them on any number "
            "of processes, merge_fsdp_weights joins them), or set_state_dict_type('FULL_STATE_DICT')"))


def save_fsdp_model(fsdp_plugin, accelerator, model, output_dir, model_index=0, adapter_only=False):
    """Accelerate's, under FULL_STATE_DICT: the model's whole state dict (accelerator.get_state_dict: every
    process calls it, the units gathered in turn on the main process only) written by the main process with
    torch.save into output_dir/pytorch_model_fsdp.bin (pytorch_model_fsdp_<model_index>.bin after the first), the
    file Accelerate writes. SHARDED_STATE_DICT and LOCAL_STATE_DICT (torch.distributed.checkpoint's folders and
    per-rank files) and adapter_only are UnsupportedError."""
    _refuse_other_than_full(fsdp_plugin, adapter_only, "save_fsdp_model")
    import torch

    os.makedirs(output_dir, exist_ok=True)
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        torch.save(state_dict, _model_file(output_dir, model_index))
    accelerator.wait_for_everyone()


def load_fsdp_model(fsdp_plugin, accelerator, model, input_dir, model_index=0, adapter_only=False):
    """Accelerate's, under FULL_STATE_DICT: input_dir/pytorch_model_fsdp.bin (save_fsdp_model's, or
    Accelerate's) loaded into the module by every process when it is prepared (under FULL_SHARD each process
    writes its share; no collective), and by the main process only when it is not (prepare then gives every
    process its values, and without sync_module_states that is Accelerate's ValueError). Returns
    load_state_dict's result (None on the processes that did not load). Errors as save_fsdp_model's."""
    _refuse_other_than_full(fsdp_plugin, adapter_only, "load_fsdp_model")
    import torch

    accelerator.wait_for_everyone()
    objects = accelerator._torch_objects
    prepared = objects is not None and objects.hosted_of(model) is not None
    if not prepared and not accelerator.is_main_process:
        if not fsdp_plugin.sync_module_states:
            raise ValueError("load_fsdp_model: only the main process loads a module that is not prepared, and "
                             "prepare gives the others its values only with sync_module_states=True")
        return None
    state_dict = torch.load(_model_file(input_dir, model_index), map_location="cpu")
    return accelerator.unwrap_model(model).load_state_dict(state_dict)
