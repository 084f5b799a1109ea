# capi/accel/state.h: the process state (Accelerate's Accelerator). Collectives, processes, the training
# step and tracking are functions of it too (collectives.jl, processes.jl, train.jl, tracking.jl).
#
# Thread safety (state.h): the accessors may be called from any thread; collectives must be called by one
# thread at a time, in the same order on every rank.

"""
    State(; options...)

Creates or joins the process state, with the state keys of options.h as keywords (`use_cpu = true,
mixed_precision = :bf16, gradient_accumulation_steps = 2`, ...; the others from ACCEL_* variables or
their defaults): reads how the process was launched (`accel launch` sets RANK, WORLD_SIZE, ...) and, with
several processes, waits until every rank has joined.
"""
mutable struct State
    ptr::Ptr{accel_state_t}
    registered::Vector{Any}  # register_for_checkpointing's Callbacks: the library calls them until close
end

Base.unsafe_convert(::Type{Ptr{accel_state_t}}, state::State) = live_pointer(state)

Base.close(state::State) = release!(state) do ptr
    accel_state_free(ptr)
end

function State(; settings...)
    options = isempty(settings) ? nothing : Options(; settings...)
    ptr = try
        new_pointer(accel_state_t) do out
            accel_state_new(out, options_pointer(options))
        end
    finally
        options === nothing || close(options)
    end
    return finalizer(close, State(ptr, Any[]))
end

"""Collective teardown of the process group of every state of this process; a second call does nothing."""
shutdown(state::State) = @check accel_state_shutdown(state)

"""Retires the process state behind `state` (Accelerate's `_reset_state`): the next State may choose any
settings; objects made before can only be freed."""
reset!(state::State) = @check accel_state_reset(state)

"""A barrier across every process."""
wait_for_everyone(state::State) = @check accel_state_wait_for_everyone(state)

"""Accelerate's set_seed: LibTorch's default CPU (and CUDA) generators of this process, seeded with `seed`,
plus the process index when `device_specific`."""
set_seed(state::State, seed::Integer; device_specific::Bool = false) =
    @check accel_state_set_seed(state, seed, device_specific)

num_processes(state::State) = Int(accel_state_num_processes(state))
process_index(state::State) = Int(accel_state_process_index(state))
local_process_index(state::State) = Int(accel_state_local_process_index(state))
num_local_processes(state::State) = Int(accel_state_num_local_processes(state))
is_main_process(state::State) = accel_state_is_main_process(state) != 0
is_local_main_process(state::State) = accel_state_is_local_main_process(state) != 0
is_last_process(state::State) = accel_state_is_last_process(state) != 0

"""`:no`, `:multi_cpu` or `:multi_gpu` (`:unknown` for a value of a newer library)."""
function distributed_type(state::State)
    kind = accel_state_distributed_type(state)
    kind == ACCEL_DISTRIBUTED_NO && return :no
    kind == ACCEL_DISTRIBUTED_MULTI_CPU && return :multi_cpu
    kind == ACCEL_DISTRIBUTED_MULTI_GPU && return :multi_gpu
    return :unknown
end

""""NO", "MULTI_CPU" or "MULTI_GPU"."""
distributed_type_name(state::State) = unsafe_string(accel_state_distributed_type_name(state))

"""The state's device: "cpu" or "cuda:<n>"."""
device(state::State) = unsafe_string(accel_state_device(state))

""""no", "fp16" or "bf16"."""
mixed_precision(state::State) = unsafe_string(accel_state_mixed_precision(state))

""""gloo", "nccl", or "" with one process; "gloo+shm" when all-reduces go through shared memory,
"gloo+hier-shm" when through each node's and then between the nodes' leaders."""
backend(state::State) = unsafe_string(accel_state_backend(state))

"""Whether a failed collective has left the process group unusable."""
is_broken(state::State) = accel_state_is_broken(state) != 0
