# capi/accel/checkpoint.h: register_for_checkpointing!, register_parts_for_checkpointing!, save_state,
# save_state_async, wait_for_save and load_state!. The objects' order is part of the checkpoint: load with
# the same lists, in the same order, as at save.

function save_object_trampoline(sink::Ptr{accel_sink_t}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(callbacks) do
        bytes = Vector{UInt8}(callbacks.functions.save())
        @check accel_sink_write(sink, bytes, length(bytes))
    end
end

function load_object_trampoline(data::Ptr{Cvoid}, size::Csize_t, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> callbacks.functions.load(copy(unsafe_wrap(Vector{UInt8}, Ptr{UInt8}(data), size))), callbacks)
end

"""
    register_for_checkpointing!(state, name, save, load)

Accelerate's register_for_checkpointing: every later `save_state` calls `save()` (returning the object's
bytes, a `Vector{UInt8}`) and writes them into this rank's folder of the checkpoint
(rank<r>/custom_checkpoint_<name>.bin); every `load_state!` calls `load(bytes)`, in registration order,
before restoring the models and the rest. `name`: letters, digits, '_', '-', '.', not starting with '.';
every rank registers the same names. A checkpoint must hold exactly the registered names (an AccelError
naming the missing or extra one, before any `load` runs); what `save` or `load` throws is thrown by the
call that ran it. The functions live as long as the state; a name already registered is refused.
"""
function register_for_checkpointing!(save::Function, load::Function, state::State, name::AbstractString)
    callbacks = Callbacks((save = save, load = load))
    save_trampoline = @cfunction(save_object_trampoline, Cint, (Ptr{accel_sink_t}, Ptr{Cvoid}))
    load_trampoline = @cfunction(load_object_trampoline, Cint, (Ptr{Cvoid}, Csize_t, Ptr{Cvoid}))
    code = accel_state_register_for_checkpointing(state, name, save_trampoline, load_trampoline, payload(callbacks))
    check_callback_call(callbacks, code)
    push!(state.registered, callbacks)
    return nothing
end

register_for_checkpointing!(state::State, name::AbstractString, save::Function, load::Function) =
    register_for_checkpointing!(save, load, state, name)

"""
The bytes every process that saved an object of [`register_parts_for_checkpointing!`](@ref) wrote, one part
per saving process (by its rank, 0-based), lent to the object's `load` for the length of the call:
[`num_parts`](@ref), [`read_part`](@ref).
"""
struct SavedParts
    ptr::Ptr{accel_parts_t}
end

"""How many processes saved the object: its parts are 0 .. num_parts(parts) - 1."""
num_parts(parts::SavedParts) = Int(accel_parts_count(parts.ptr))

"""The bytes process `rank` (0-based) saved, copied: the library holds one part at a time, so a process
loading its share of a large state holds only the parts it keeps. An AccelError for a rank outside
0 .. num_parts(parts) - 1 (ACCEL_ERR_OUT_OF_RANGE) or an unreadable file (ACCEL_ERR_IO)."""
function read_part(parts::SavedParts, rank::Integer)
    data = Ref{Ptr{Cvoid}}(C_NULL)
    size = Ref{Csize_t}(0)
    @check accel_parts_read(parts.ptr, rank, data, size)
    copied = size[] == 0 ? UInt8[] : copy(unsafe_wrap(Array, Ptr{UInt8}(data[]), Int(size[])))
    @check accel_parts_release(parts.ptr)  # copied: the library's copy need not be held as well
    return copied
end

function load_parts_trampoline(parts::Ptr{accel_parts_t}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> callbacks.functions.load(SavedParts(parts)), callbacks)
end

"""
    register_parts_for_checkpointing!(state, name, save, load)

[`register_for_checkpointing!`](@ref) for an object any number of processes can load: a state every
process holds alike (a scheduler's), or one each process holds a share of (a ZeRO optimizer's). Saved the
same way, one file per rank; at `load_state!` every saving process's file must exist (an AccelError naming
a missing one, before any `load` runs), and `load(parts)` reads whichever saving process's bytes it needs
from a [`SavedParts`](@ref), one part held at a time. So a checkpoint whose registered objects are all of
this kind resumes on another number of processes. Otherwise as register_for_checkpointing!.
"""
function register_parts_for_checkpointing!(save::Function, load::Function, state::State, name::AbstractString)
    callbacks = Callbacks((save = save, load = load))
    save_trampoline = @cfunction(save_object_trampoline, Cint, (Ptr{accel_sink_t}, Ptr{Cvoid}))
    load_trampoline = @cfunction(load_parts_trampoline, Cint, (Ptr{accel_parts_t}, Ptr{Cvoid}))
    code = accel_state_register_parts_for_checkpointing(state, name, save_trampoline, load_trampoline, payload(callbacks))
    check_callback_call(callbacks, code)
    push!(state.registered, callbacks)
    return nothing
end

register_parts_for_checkpointing!(state::State, name::AbstractString, save::Function, load::Function) =
    register_parts_for_checkpointing!(save, load, state, name)

"""The failure a registered object's callback kept, rethrown for a save or load that it failed."""
function check_checkpoint_call(state::State, code::Cint)
    code == ACCEL_OK && return nothing
    for callbacks in state.registered
        if callbacks.failure !== nothing
            return check_callback_call(callbacks, code)
        end
    end
    throw_last_error(code)
end

"""Accelerate's save_state: the models, optimizers, schedulers and loaders given, the grad scaler, each
rank's random generators and the accumulation step into `directory` (collective; written aside, then
moved into place atomically)."""
function save_state(state::State, directory::AbstractString; models=Model[], optimizers=Optimizer[],
                    schedulers=Scheduler[], loaders=Loader[])
    handles = (models, optimizers, schedulers, loaders)
    model_ptrs, optimizer_ptrs, scheduler_ptrs, loader_ptrs = checkpoint_pointers(handles...)
    GC.@preserve handles begin
        code = accel_state_save_state(state, directory, model_ptrs, length(model_ptrs), optimizer_ptrs, length(optimizer_ptrs),
            scheduler_ptrs, length(scheduler_ptrs), loader_ptrs, length(loader_ptrs))
        check_checkpoint_call(state, code)
    end
end

"""save_state in the background: the objects are captured before it returns (the models' tensors copied to
host memory, about one checkpoint's size), then a thread writes them and moves the checkpoint into place
once every rank's part is written, while training goes on. A save already in flight is waited for first.
A failure in the background is thrown once, by the next save_state, save_state_async, load_state!,
wait_for_save or shutdown (which wait for it), or by backward or an optimizer step, which then do nothing
else; the previous checkpoint stays."""
function save_state_async(state::State, directory::AbstractString; models=Model[], optimizers=Optimizer[],
                          schedulers=Scheduler[], loaders=Loader[])
    handles = (models, optimizers, schedulers, loaders)
    model_ptrs, optimizer_ptrs, scheduler_ptrs, loader_ptrs = checkpoint_pointers(handles...)
    GC.@preserve handles begin
        code = accel_state_save_state_async(state, directory, model_ptrs, length(model_ptrs), optimizer_ptrs, length(optimizer_ptrs),
            scheduler_ptrs, length(scheduler_ptrs), loader_ptrs, length(loader_ptrs))
        check_checkpoint_call(state, code)
    end
end

"""Waits for the background save in flight, if any; throws its failure if nothing reported it yet."""
wait_for_save(state::State) = @check accel_state_wait_for_save(state)

"""Restores what save_state wrote into the same objects; everything is checked first, so on an error
nothing has changed."""
function load_state!(state::State, directory::AbstractString; models=Model[], optimizers=Optimizer[],
                     schedulers=Scheduler[], loaders=Loader[])
    handles = (models, optimizers, schedulers, loaders)
    model_ptrs, optimizer_ptrs, scheduler_ptrs, loader_ptrs = checkpoint_pointers(handles...)
    GC.@preserve handles begin
        code = accel_state_load_state(state, directory, model_ptrs, length(model_ptrs), optimizer_ptrs, length(optimizer_ptrs),
            scheduler_ptrs, length(scheduler_ptrs), loader_ptrs, length(loader_ptrs))
        check_checkpoint_call(state, code)
    end
end

"""The number of the next numbered checkpoint (Accelerate's ProjectConfiguration.iteration): one more after
each numbered save, the loaded checkpoint's number + 1 after a load from a numbered folder."""
checkpoint_iteration(state::State) = accel_state_checkpoint_iteration(state)

"""Sets the number of the next numbered checkpoint (to resume the numbering in a fresh process)."""
set_checkpoint_iteration!(state::State, iteration::Integer) =
    @check accel_state_set_checkpoint_iteration(state, iteration)

checkpoint_pointers(models, optimizers, schedulers, loaders) =
    (handle_pointers(accel_model_t, models), handle_pointers(accel_optimizer_t, optimizers),
     handle_pointers(accel_scheduler_t, schedulers), handle_pointers(accel_loader_t, loaders))
