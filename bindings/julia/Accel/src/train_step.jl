# capi/accel/train_step.h: a training step as one call (forward, loss, backward, clipping, the optimizer
# step and zero_grad), run eagerly or, with `cuda_graph = true` on a GPU, captured once as a CUDA graph and
# replayed for every later batch of the same layout.
#
# Thread safety (train_step.h): one task at a time per step, and not while another task trains its model.

"""
    TrainStep(model, optimizer; options...)

A step training a prepared model with an optimizer made from it, with the train step keys as keywords:
`loss` ("cross_entropy", "nll", "mse", "l1", "bce_with_logits", or "output" for a model whose forward
returns the loss), `reduction`, `label_smoothing`, `ignore_index`, `max_grad_norm`, `norm_type`,
`cuda_graph`, `cuda_graph_warmup`. Call it on a batch: `loss = step(x; target = y)`.
"""
mutable struct TrainStep
    ptr::Ptr{accel_train_step_t}
end

Base.unsafe_convert(::Type{Ptr{accel_train_step_t}}, step::TrainStep) = live_pointer(step)

Base.close(step::TrainStep) = release!(step) do ptr
    accel_train_step_free(ptr)
end

function TrainStep(model::Model, optimizer::Optimizer; settings...)
    options = Options(; settings...)
    ptr = try
        new_pointer(accel_train_step_t) do out
            accel_train_step_new(out, model, optimizer, options)
        end
    finally
        close(options)
    end
    return finalizer(close, TrainStep(ptr))
end

"""
    step(inputs...; target = nothing, named_inputs...)

One step on a batch: forward(inputs...; named_inputs...), the loss against `target` (`nothing` for the loss
"output"), backward, clipping, the optimizer step and zero_grad (arrays are copied into tensors). Returns
the loss, a tensor of its own (reading it waits for the device; the step itself does not).
"""
function (step::TrainStep)(inputs...; target = nothing, named...)
    positional = Tensor[as_tensor(input) for input in inputs]
    keyword = Tensor[as_tensor(value) for value in values(named)]
    names = String[String(name) for name in keys(named)]
    target_tensor = target === nothing ? nothing : as_tensor(target)
    positional_pointers = handle_pointers(accel_tensor_t, positional)
    keyword_pointers = handle_pointers(accel_tensor_t, keyword)
    target_pointer = target_tensor === nothing ? Ptr{accel_tensor_t}(C_NULL) : live_pointer(target_tensor)
    return GC.@preserve positional keyword target_tensor begin
        with_cstrings(names) do name_pointers
            new_tensor() do out
                accel_train_step_run(step, positional_pointers, length(positional_pointers), name_pointers, keyword_pointers,
                    length(keyword_pointers), target_pointer, out)
            end
        end
    end
end

"""Why the last step did not replay a CUDA graph; "" when it did."""
eager_reason(step::TrainStep) =
    unsafe_string(accel_train_step_eager_reason(step))

"""A count by name: "steps", "replays" (the capturing step included), "captures", "warmup_steps", "eager_steps"."""
function train_step_stat(step::TrainStep, name::AbstractString)
    value = Ref{Cdouble}(0)
    @check accel_train_step_stat(step, name, value)
    return Int(value[])
end
