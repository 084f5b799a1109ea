"""
Hugging Face Accelerate's training loop on libaccel, from Julia: wrappers over raw.jl (a `ccall` per C
function, generated from the headers by `./dev gen`), one file per header of capi/accel/, handles freed by
their finalizers (or `close`), failures thrown as [`AccelError`](@ref) with the library's code and message.

Indices are 1-based on the Julia side (parameters, outputs, groups, dataset items); process ranks are
ranks, 0-based as everywhere else.
"""
module Accel

using Libdl

# The library by its SONAME, as the dynamic loader finds it (LD_LIBRARY_PATH, the system's paths); the
# major version in the name guards the ABI. ACCEL_LIBRARY names a file to load instead: once loaded by
# path, the library answers to its SONAME in every ccall.
const libaccel = "libaccel.so.0"

function __init__()
    path = get(ENV, "ACCEL_LIBRARY", "")
    isempty(path) || Libdl.dlopen(path, Libdl.RTLD_LOCAL | Libdl.RTLD_NOW)
    check_library_version()
    return nothing
end

include("dlpack_structs.jl")
include("raw.jl")
include("common.jl")
include("handles.jl")
include("version.jl")
include("options.jl")
include("state.jl")
include("tensor.jl")
include("dlpack.jl")
include("collectives.jl")
include("processes.jl")
include("callbacks.jl")
include("loader.jl")
include("dealing.jl")
include("loss.jl")
include("model.jl")
include("optimizer.jl")
include("scheduler.jl")
include("train.jl")
include("train_step.jl")
include("tracking.jl")
include("checkpoint.jl")

export AccelError, Options, State, Tensor, Dataset, Loader, Batch, Dealer, Model, Output, Optimizer, Scheduler, Progress, TrainStep, SavedParts
export set!, dump_options
export num_processes, process_index, local_process_index, num_local_processes, is_main_process,
    is_local_main_process, is_last_process, distributed_type, distributed_type_name, device,
    mixed_precision, backend, is_broken, wait_for_everyone, set_seed, shutdown, reset!
export dtype, element_size, unsafe_array, to_dlpack, from_dlpack, delete_dlpack
export gather, gather_bytes, reduce_across, reduce_named, broadcast_from!, reduce_scatter!, all_gather!, pad_across_processes,
    gather_for_metrics
export split_range, split_tensor, main_process_first, local_main_process_first, send_to_device
export safetensors_dataset, npy_dataset, num_samples, num_batches, epoch, set_epoch!, skip_first_batches!, end_of_dataloader, remainder, save_state, save_state_async, wait_for_save, load_state!, register_for_checkpointing!, register_parts_for_checkpointing!, num_parts, read_part, checkpoint_iteration, set_checkpoint_iteration!
export shard_dealer, iterable_dealer, dispatch_dealer, deal!, finish!
export compute_loss
export prepare_model!, forward, evaluate, train!, is_training, set_checkpoint_model!, parameter_names, parameter, set_parameter!, buffer_names,
    buffer, whole_tensors, grad_sync_stat, unwrap_model, save_torchscript, load_weights!, begin_forward!, grad_view, grad_ready!,
    end_backward!, grad_reached_by_no_rank, set_units!, num_units, unit_numel, parameter_place, unit_gather!, unit_prefetch!,
    unit_reduce!, unit_gather_gradients!
export step!, zero_grad!, pieces, piece_tensors, step_was_skipped, num_groups, lr, set_lr!, momentum, betas, loss_scale, last_lr, step_count
export accumulate!, sync_gradients, gradient_accumulation_steps, set_gradient_accumulation_steps!, set_sync_gradients!, backward!, backward_with_items!, no_sync, autocast, free_memory!, grad_scale, unscale_gradients!, update_grad_scale!, clip_grad_norm!, clip_grad_value!, save_model
export eager_reason, train_step_stat
export init_trackers, log_metrics, finish_trackers, print_main, update!

end
