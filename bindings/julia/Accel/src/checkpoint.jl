# capi/accel/checkpoint.h: register_for_checkpointing!, save_state, save_state_async, wait_for_save and
# load_state!. The objects' order is part of the checkpoint: load with the same lists, in the same order,
# as at save.

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
