"""accel.utils: Accelerate's utilities (accelerate.utils) that accel has: configuration classes, the
collectives and structure helpers as functions (accel.utils.operations) and seeding (accel.utils.random)."""
from .dataclasses import (DataLoaderConfiguration, DDPCommunicationHookType, DistributedDataParallelKwargs,
                          DistributedType, GradientAccumulationPlugin, GradScalerKwargs, InitProcessGroupKwargs,
                          PrecisionType, ProjectConfiguration, RNGType)
from .operations import (DistributedOperationException, broadcast, broadcast_object_list, concatenate,
                         convert_to_fp32, copy_tensor_to_devices, find_batch_size, gather, gather_object,
                         is_torch_tensor, pad_across_processes, recursively_apply, reduce, send_to_device)
from .random import set_seed, synchronize_rng_state, synchronize_rng_states


def wait_for_everyone():
    """A barrier across every process."""
    from ..state import PartialState
    PartialState().wait_for_everyone()


__all__ = ["DataLoaderConfiguration", "DDPCommunicationHookType", "DistributedDataParallelKwargs", "DistributedType",
           "DistributedOperationException", "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs",
           "PrecisionType", "ProjectConfiguration", "RNGType", "broadcast", "broadcast_object_list", "concatenate",
           "convert_to_fp32", "copy_tensor_to_devices", "find_batch_size", "gather", "gather_object",
           "is_torch_tensor", "pad_across_processes", "recursively_apply", "reduce", "send_to_device", "set_seed",
           "synchronize_rng_state", "synchronize_rng_states", "wait_for_everyone"]
