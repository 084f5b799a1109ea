"""accel.utils: Accelerate's utilities (accelerate.utils) that accel has: configuration classes, the
collectives and structure helpers as functions (accel.utils.operations) and seeding (accel.utils.random)."""
from ..state import PartialState
from .dataclasses import (DataLoaderConfiguration, DDPCommunicationHookType, DeepSpeedPlugin,
                          DistributedDataParallelKwargs, DistributedType, FullyShardedDataParallelPlugin,
                          GradientAccumulationPlugin, GradScalerKwargs, InitProcessGroupKwargs, LoggerType,
                          PrecisionType, ProjectConfiguration, RNGType)
from .dataclasses import (AutocastKwargs, DynamoBackend, FP8RecipeKwargs, KwargsHandler, ProfileKwargs,
                          TorchDynamoPlugin)
from .imports import (is_aim_available, is_bf16_available, is_bnb_available, is_clearml_available,
                      is_comet_ml_available, is_cuda_available, is_datasets_available, is_deepspeed_available,
                      is_dvclive_available, is_fp8_available, is_import_timer_available, is_ipex_available,
                      is_mlflow_available, is_mlu_available, is_mps_available, is_msamp_available, is_musa_available,
                      is_npu_available, is_pandas_available, is_peft_available, is_pippy_available,
                      is_pytest_available, is_rich_available, is_schedulefree_available, is_tensorboard_available,
                      is_timm_available,
                      is_torch_distributed_available, is_torch_xla_available, is_torchdata_available,
                      is_torchdata_stateful_dataloader_available, is_torchvision_available, is_tqdm_available,
                      is_transformer_engine_available, is_transformers_available, is_triton_available,
                      is_wandb_available, is_xpu_available)
from .operations import (CannotPadNestedTensorWarning, convert_outputs_to_fp32, find_device, is_namedtuple, listify,
                         pad_input_tensors)
from .other import check_os_kernel, save
from .tqdm import tqdm
from .versions import compare_versions, is_torch_version
from .operations import (DistributedOperationException, broadcast, broadcast_object_list, concatenate,
                         convert_to_fp32, copy_tensor_to_devices, find_batch_size, gather, gather_object,
                         is_torch_tensor, pad_across_processes, recursively_apply, reduce, send_to_device)
from .fsdp_utils import load_fsdp_model, merge_fsdp_weights, save_fsdp_model
from .environment import clear_environment, convert_dict_to_env_variables, patch_environment, str_to_bool
from .memory import find_executable_batch_size, release_memory, should_reduce_batch_size
from .other import extract_model_from_parallel
from .random import set_seed, synchronize_rng_state, synchronize_rng_states

# Big-model loading (accel.utils.modeling, accel.utils.offload) needs torch: its names are imported when first
# asked for, so that numpy-only programs never import torch.
_BIG_MODELING_NAMES = {
    **dict.fromkeys(["calculate_maximum_sizes", "check_device_map", "check_tied_parameters_in_config",
                     "check_tied_parameters_on_same_device", "compute_module_sizes", "convert_file_size_to_int",
                     "dtype_byte_size", "find_tied_parameters", "get_balanced_memory", "get_max_layer_size",
                     "get_max_memory", "infer_auto_device_map", "load_checkpoint_in_model", "load_offloaded_weights",
                     "load_state_dict", "named_module_tensors", "retie_parameters", "set_module_tensor_to_device"],
                    "modeling"),
    **dict.fromkeys(["OffloadedWeightsLoader", "PrefixedDataset", "extract_submodules_state_dict",
                     "load_offloaded_weight", "offload_state_dict", "offload_weight", "save_offload_index"], "offload"),
}


def __getattr__(name):
    if name in _BIG_MODELING_NAMES:
        import importlib
        return getattr(importlib.import_module(f".{_BIG_MODELING_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def wait_for_everyone():
    """A barrier across every process."""
    PartialState().wait_for_everyone()


__all__ = ["DataLoaderConfiguration", "DDPCommunicationHookType", "DeepSpeedPlugin", "DistributedDataParallelKwargs",
           "DistributedType", "FullyShardedDataParallelPlugin",
           "DistributedOperationException", "GradientAccumulationPlugin", "GradScalerKwargs", "InitProcessGroupKwargs",
           "LoggerType", "PrecisionType", "ProjectConfiguration", "RNGType", "broadcast", "broadcast_object_list",
           "concatenate",
           "convert_to_fp32", "copy_tensor_to_devices", "extract_model_from_parallel", "find_batch_size",
           "find_executable_batch_size", "gather", "gather_object",
           "is_torch_tensor", "pad_across_processes", "recursively_apply", "reduce", "release_memory", "send_to_device",
           "set_seed", "should_reduce_batch_size", "clear_environment", "convert_dict_to_env_variables", "patch_environment", "str_to_bool",
           "synchronize_rng_state", "synchronize_rng_states", "wait_for_everyone", "merge_fsdp_weights",
           "load_fsdp_model", "save_fsdp_model",
           # Accelerate's public names of issue 30: kwargs handlers, is_*_available, helpers
           "AutocastKwargs", "DynamoBackend", "FP8RecipeKwargs", "KwargsHandler", "ProfileKwargs", "TorchDynamoPlugin",
           "is_aim_available", "is_bf16_available", "is_bnb_available", "is_clearml_available", "is_comet_ml_available",
           "is_cuda_available", "is_datasets_available", "is_deepspeed_available", "is_dvclive_available",
           "is_fp8_available", "is_import_timer_available", "is_ipex_available", "is_mlflow_available",
           "is_mlu_available", "is_mps_available", "is_msamp_available", "is_musa_available", "is_npu_available",
           "is_pandas_available", "is_peft_available", "is_pippy_available", "is_pytest_available", "is_rich_available",
           "is_schedulefree_available",
           "is_tensorboard_available", "is_timm_available", "is_torch_distributed_available", "is_torch_xla_available",
           "is_torchdata_available", "is_torchdata_stateful_dataloader_available", "is_torchvision_available",
           "is_tqdm_available", "is_transformer_engine_available", "is_transformers_available", "is_triton_available",
           "is_wandb_available", "is_xpu_available", "CannotPadNestedTensorWarning", "convert_outputs_to_fp32",
           "find_device", "is_namedtuple", "listify", "pad_input_tensors", "check_os_kernel", "save", "tqdm",
           "compare_versions", "is_torch_version",
           # big-model loading, imported when first asked for (above)
           *_BIG_MODELING_NAMES]
