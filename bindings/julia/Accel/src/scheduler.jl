# capi/accel/scheduler.h: learning-rate schedulers, named or driven by a Julia function of the step.
#
# Thread safety (scheduler.h): one task at a time per optimizer and its schedulers.

"""
    Scheduler(optimizer, name; options...)
    Scheduler(multiplier, optimizer)

A scheduler of the optimizer's learning rates, stepping only after a real optimizer step. Named:
"constant", "linear", "cosine", "step", "exponential", "one_cycle", with the scheduler keys as keywords
(`warmup_steps = 10, total_steps = 500`). Or a function: the lr of each group is its initial lr times
`multiplier(step)` (torch's LambdaLR); what it throws is thrown by the call that ran it.
"""
mutable struct Scheduler
    ptr::Ptr{accel_scheduler_t}
    callbacks::Union{Callbacks,Nothing}
end

Base.unsafe_convert(::Type{Ptr{accel_scheduler_t}}, scheduler::Scheduler) = live_pointer(scheduler)

Base.close(scheduler::Scheduler) = release!(scheduler) do ptr
    accel_scheduler_free(ptr)
end

function Scheduler(optimizer::Optimizer, name::AbstractString; settings...)
    options = Options(; settings...)
    ptr = try
        new_pointer(accel_scheduler_t) do out
            accel_scheduler_new(out, optimizer, name, options)
        end
    finally
        close(options)
    end
    return finalizer(close, Scheduler(ptr, nothing))
end

function multiplier_trampoline(step::Int64, multiplier::Ptr{Cdouble}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> unsafe_store!(multiplier, Float64(callbacks.functions.multiplier(step))), callbacks)
end

function Scheduler(multiplier::Function, optimizer::Optimizer)
    callbacks = Callbacks((multiplier = multiplier,))
    trampoline = @cfunction(multiplier_trampoline, Cint, (Int64, Ptr{Cdouble}, Ptr{Cvoid}))
    out = Ref{Ptr{accel_scheduler_t}}(C_NULL)
    code = accel_scheduler_from_callback(out, optimizer, trampoline, payload(callbacks))
    check_callback_call(callbacks, code)
    return finalizer(close, Scheduler(out[], callbacks))
end

"""Accelerate's AcceleratedScheduler.step."""
function step!(scheduler::Scheduler)
    code = accel_scheduler_step(scheduler)
    check_callback_call(scheduler.callbacks, code)
end

"""Accelerate's AcceleratedScheduler.step(metric), for reduce_on_plateau."""
function step!(scheduler::Scheduler, metric::Real)
    code = accel_scheduler_step_with_metric(scheduler, metric)
    check_callback_call(scheduler.callbacks, code)
end

"""The learning rate of group `group` (1-based) after the last step."""
function last_lr(scheduler::Scheduler, group::Integer = 1)
    rate = Ref{Cdouble}(0)
    @check accel_scheduler_last_lr(scheduler, group - 1, rate)
    return rate[]
end

step_count(scheduler::Scheduler) = Int(accel_scheduler_step_count(scheduler))
