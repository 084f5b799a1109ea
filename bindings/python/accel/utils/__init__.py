"""accel.utils: Accelerate's utilities (accelerate.utils) that accel has: configuration classes, the
collectives and structure helpers as functions (accel.utils.operations) and seeding (accel.utils.random)."""
from .dataclasses import (DataLoaderConfiguration, DDPCommunicationHookType, DistributedDataParallelKwargs,
                          DistributedType, GradientAccumulationPlugin, GradScalerKwargs, InitProcessGroupKwargs,
                          PrecisionType, ProjectConfiguration, RNGType)
from .operations import (DistributedOperationException, broadcast, broadcast_object_list, concatenate,
                         convert_to_fp32, copy_tensor_to_devices, find_batch_size, gather, gather_object,
                         is_torch_tensor, pad_across_processes, recursively_apply, reduce, send_to_device)
from .memory import find_executable_batch_size, release_memory, should_reduce_batch_size
from .other import extract_model_from_parallel
from .random import set_seed, synchronize_rng_state, synchronize_rng_states


def wait_for_everyone():
    """A barrier across every process."""
    from ..state import PartialState
    PartialState().wait_for_everyone()


__all__ = ["DataLoaderConfiguration", "DDPCommunicationHookType", "DistributedDataParallelKwargs", "DistributedType",
           "DistributedOperationException", "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs",
           "PrecisionType", "ProjectConfiguration", "RNGType", "broadcast", "broadcast_object_list", "concatenate",
           "convert_to_fp32", "copy_tensor_to_devices", "extract_model_from_parallel", "find_batch_size",
           "find_executable_batch_size", "gather", "gather_object",
           "is_torch_tensor", "pad_across_processes", "recursively_apply", "reduce", "release_memory", "send_to_device",
           "set_seed", "should_reduce_batch_size",
           "synchronize_rng_state", "synchronize_rng_states", "wait_for_everyone"]
