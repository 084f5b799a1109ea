# capi/accel/checkpoint.h: save_state and load_state!. The objects' order is part of the checkpoint:
# load with the same lists, in the same order, as at save.

"""Accelerate's save_state: the models, optimizers, schedulers and loaders given, the grad scaler, each
rank's random generators and the accumulation step into `directory` (collective; written aside, then
moved into place atomically)."""
function save_state(state::State, directory::AbstractString; models=Model[], optimizers=Optimizer[],
                    schedulers=Scheduler[], loaders=Loader[])
    handles = (models, optimizers, schedulers, loaders)
    model_ptrs, optimizer_ptrs, scheduler_ptrs, loader_ptrs = checkpoint_pointers(handles...)
    GC.@preserve handles begin
        @check ccall((:accel_state_save_state, libaccel), Cint,
            (Ptr{accel_state_t}, Cstring, Ptr{Ptr{accel_model_t}}, Csize_t, Ptr{Ptr{accel_optimizer_t}}, Csize_t,
             Ptr{Ptr{accel_scheduler_t}}, Csize_t, Ptr{Ptr{accel_loader_t}}, Csize_t),
            state, directory, model_ptrs, length(model_ptrs), optimizer_ptrs, length(optimizer_ptrs),
            scheduler_ptrs, length(scheduler_ptrs), loader_ptrs, length(loader_ptrs))
    end
end

"""Restores what save_state wrote into the same objects; everything is checked first, so on an error
nothing has changed."""
function load_state!(state::State, directory::AbstractString; models=Model[], optimizers=Optimizer[],
                     schedulers=Scheduler[], loaders=Loader[])
    handles = (models, optimizers, schedulers, loaders)
    model_ptrs, optimizer_ptrs, scheduler_ptrs, loader_ptrs = checkpoint_pointers(handles...)
    GC.@preserve handles begin
        @check ccall((:accel_state_load_state, libaccel), Cint,
            (Ptr{accel_state_t}, Cstring, Ptr{Ptr{accel_model_t}}, Csize_t, Ptr{Ptr{accel_optimizer_t}}, Csize_t,
             Ptr{Ptr{accel_scheduler_t}}, Csize_t, Ptr{Ptr{accel_loader_t}}, Csize_t),
            state, directory, model_ptrs, length(model_ptrs), optimizer_ptrs, length(optimizer_ptrs),
            scheduler_ptrs, length(scheduler_ptrs), loader_ptrs, length(loader_ptrs))
    end
end

checkpoint_pointers(models, optimizers, schedulers, loaders) =
    (handle_pointers(accel_model_t, models), handle_pointers(accel_optimizer_t, optimizers),
     handle_pointers(accel_scheduler_t, schedulers), handle_pointers(accel_loader_t, loaders))
