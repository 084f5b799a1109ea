# capi/accel/optimizer.h: optimizers with Accelerate's semantics (nothing happens on a step that
# accumulates; under fp16 an overflowing step is skipped).
#
# Thread safety (optimizer.h): one task at a time per optimizer and its schedulers.

"""
    Optimizer(model, kind; options...)

An optimizer of `kind` ("sgd", "adam", "adamw") over a prepared model's trainable parameters, with the
optimizer keys as keywords (`lr = 0.01, weight_decay = 0.01, no_decay = "*bias"`).
"""
mutable struct Optimizer
    ptr::Ptr{accel_optimizer_t}
    callbacks::Union{Callbacks,Nothing}  # an external optimizer's step function
end

Base.unsafe_convert(::Type{Ptr{accel_optimizer_t}}, optimizer::Optimizer) = live_pointer(optimizer)

Base.close(optimizer::Optimizer) = release!(optimizer) do ptr
    accel_optimizer_free(ptr)
end

function Optimizer(model::Model, kind::AbstractString; settings...)
    options = Options(; settings...)
    ptr = try
        new_pointer(accel_optimizer_t) do out
            accel_optimizer_new(out, model, kind, options)
        end
    finally
        close(options)
    end
    return finalizer(close, Optimizer(ptr, nothing))
end

function external_step_trampoline(context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> callbacks.functions.step(), callbacks)
end

"""
    Optimizer(step, model)

An optimizer whose steps the caller's own takes, over a prepared model of the caller's arrays
(`Model(parameters...)` from Julia memory): `step()` runs on sync steps and must update exactly the
elements `pieces` lists, reading their gradients where the model's gradient storage holds them; under
`zero_stage` 1 or 2 every process's updated elements are then gathered to every process. What `step`
throws is thrown by `step!`.
"""
function Optimizer(step::Function, model::Model)
    callbacks = Callbacks((step = step,))
    trampoline = @cfunction(external_step_trampoline, Cint, (Ptr{Cvoid},))
    out = Ref{Ptr{accel_optimizer_t}}(C_NULL)
    code = accel_optimizer_new_external(out, model, trampoline, payload(callbacks))
    check_callback_call(callbacks, code)
    return finalizer(close, Optimizer(out[], callbacks))
end

"""
    pieces(optimizer)

The runs of elements this process steps, as `(parameter, first, count)` with `first` 1-based in the
parameter's flattened elements: every trainable parameter whole without ZeRO, this process's share under it.
"""
function pieces(optimizer::Optimizer)
    name, first, count = Ref{Ptr{UInt8}}(C_NULL), Ref{Int64}(0), Ref{Int64}(0)
    return map(0:Int(accel_optimizer_num_pieces(optimizer)) - 1) do index
        @check accel_optimizer_piece(optimizer, index, name, first, count)
        (unsafe_string(name[]), Int(first[]) + 1, Int(count[]))
    end
end

"""
    piece_tensors(optimizer, index)

`(value, grad)` of piece `index` (1-based): its elements as a 1-d tensor (under zero_stage 3 this process's
share of the parameter, its only values between uses) and, during the external step, its gradient
(`nothing` when it has none): what the program's own optimizer steps.
"""
function piece_tensors(optimizer::Optimizer, index::Integer)
    value, grad = Ref{Ptr{accel_tensor_t}}(C_NULL), Ref{Ptr{accel_tensor_t}}(C_NULL)
    @check accel_optimizer_piece_tensors(optimizer, index - 1, value, grad)
    (owned_tensor(value[]), grad[] == C_NULL ? nothing : owned_tensor(grad[]))
end

"""Steps on a sync step (waiting for the gradients' all-reduce)."""
step!(optimizer::Optimizer) = check_callback_call(optimizer.callbacks, accel_optimizer_step(optimizer))

"""Clears the gradients on a sync step."""
zero_grad!(optimizer::Optimizer) = @check accel_optimizer_zero_grad(optimizer)

"""Whether the last sync step was skipped because of an fp16 overflow."""
step_was_skipped(optimizer::Optimizer) = accel_optimizer_step_was_skipped(optimizer) != 0

num_groups(optimizer::Optimizer) = Int(accel_optimizer_num_groups(optimizer))

"""The learning rate of parameter group `group` (1-based)."""
function lr(optimizer::Optimizer, group::Integer = 1)
    rate = Ref{Cdouble}(0)
    @check accel_optimizer_lr(optimizer, group - 1, rate)
    return rate[]
end

"""Sets the learning rate of parameter group `group` (1-based)."""
set_lr!(optimizer::Optimizer, rate::Real, group::Integer = 1) =
    @check accel_optimizer_set_lr(optimizer, group - 1, rate)

"""SGD's momentum or Adam's beta1 of parameter group `group` (1-based): what one_cycle cycles."""
function momentum(optimizer::Optimizer, group::Integer = 1)
    value = Ref{Cdouble}(0)
    @check accel_optimizer_momentum(optimizer, group - 1, value)
    return value[]
end

"""The (beta1, beta2) of parameter group `group` (1-based) of an Adam or AdamW optimizer."""
function betas(optimizer::Optimizer, group::Integer = 1)
    beta1 = Ref{Cdouble}(0)
    beta2 = Ref{Cdouble}(0)
    @check accel_optimizer_betas(optimizer, group - 1, beta1, beta2)
    return (beta1[], beta2[])
end

"""The fp16 loss scale (1 without fp16); waits for the device."""
function loss_scale(optimizer::Optimizer)
    scale = Ref{Cdouble}(0)
    @check accel_optimizer_loss_scale(optimizer, scale)
    return scale[]
end
