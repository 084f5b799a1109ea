"""accelerate.utils.fsdp_utils as far as accel has it: merge_fsdp_weights, run by the accel program's
`merge-weights` (the one place that lays a merged model out; it needs no process group and no LibTorch)."""
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
