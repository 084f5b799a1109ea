# capi/accel/model.h: TorchScript models and models of the program's own tensors, prepare(model), forward
# and its outputs, the program's forward and backward told to the model.
#
# Thread safety (model.h): a model is used by one task at a time.

"""
    Model(path)
    Model(archive::Vector{UInt8})

A TorchScript module (torch.jit.save), loaded from a file or from memory, on the CPU, not prepared.
"""
mutable struct Model
    ptr::Ptr{accel_model_t}
end

Base.unsafe_convert(::Type{Ptr{accel_model_t}}, model::Model) = live_pointer(model)

Base.close(model::Model) = release!(model) do ptr
    accel_model_free(ptr)
end

owned_model(ptr::Ptr{accel_model_t}) = finalizer(close, Model(ptr))

function Model(path::AbstractString)
    return owned_model(new_pointer(accel_model_t) do out
        accel_model_load(out, path)
    end)
end

function Model(archive::Vector{UInt8})
    return owned_model(new_pointer(accel_model_t) do out
        accel_model_load_buffer(out, archive, length(archive))
    end)
end

"""
    Model(parameters; trainable = nothing, buffers = Pair{String,Tensor}[])

A model of the program's own tensors (`name => tensor` pairs; a Tensor copied from a Julia array, or a
DLPack import of another runtime's memory), whose memory stays theirs: shared, never copied, kept alive by
the model. `trainable`: one Bool per parameter (false: frozen); `nothing`, all trainable. Its forward and
backward run in the program, which tells the model about them: [`begin_forward!`](@ref), the gradient
accumulated into [`grad_view`](@ref), [`grad_ready!`](@ref) per parameter, [`end_backward!`](@ref).
`prepare_model!` copies rank 0's values into every rank's tensors in place; optimizers, accumulation,
clipping, the grad scaler and checkpoints take it as any prepared model.
"""
function Model(parameters::AbstractVector{<:Pair{<:AbstractString,Tensor}};
               trainable::Union{Nothing,AbstractVector{Bool}} = nothing,
               buffers::AbstractVector{<:Pair{<:AbstractString,Tensor}} = Pair{String,Tensor}[])
    trainable === nothing || length(trainable) == length(parameters) ||
        throw(ArgumentError("$(length(trainable)) trainable flags for $(length(parameters)) parameters"))
    flags = trainable === nothing ? Ptr{Cint}(C_NULL) : Cint[flag for flag in trainable]
    tensors = Tensor[last(pair) for pair in parameters]
    buffer_tensors = Tensor[last(pair) for pair in buffers]
    tensor_pointers = handle_pointers(accel_tensor_t, tensors)
    buffer_pointers = handle_pointers(accel_tensor_t, buffer_tensors)
    ptr = GC.@preserve tensors buffer_tensors flags begin
        with_cstrings([first(pair) for pair in parameters]) do names
            with_cstrings([first(pair) for pair in buffers]) do buffer_names
                new_pointer(accel_model_t) do out
                    accel_model_from_tensors(out, names, tensor_pointers, flags, length(tensor_pointers), buffer_names,
                        buffer_pointers, length(buffer_pointers))
                end
            end
        end
    end
    return owned_model(ptr)
end

"""
    prepare_model!(state, model; options...)

Accelerate's prepare(model): on the state's device, rank 0's weights everywhere, gradients averaged over
the ranks (collective), with the model keys as keywords (`find_unused_parameters = true`, ...).
"""
function prepare_model!(state::State, model::Model; settings...)
    options = Options(; settings...)
    try
        @check accel_state_prepare_model(state, model, options)
    finally
        close(options)
    end
    return model
end

"""
    begin_forward!(model; grad_enabled = true)

Before each of the program's forwards on a model of its own tensors (`grad_enabled = false` for
evaluation): with several processes it may send rank 0's buffers (collective, on every rank alike) and
decides whether the coming backward synchronises.
"""
begin_forward!(model::Model; grad_enabled::Bool = true) =
    @check accel_model_begin_forward(model, grad_enabled)

"""
    grad_view(model, index)

Parameter `index`'s (1-based) gradient storage, the same memory every step (with several processes a view
into its gradient bucket): the program's backward accumulates the gradient there in place (through
[`unsafe_array`](@ref)); the optimizer, clipping and checkpoints read it there.
"""
function grad_view(model::Model, index::Integer)
    return new_tensor() do out
        accel_model_grad_view(model, index - 1, out)
    end
end

"""Parameter `index`'s (1-based) gradient of this backward is final: once its bucket is, the bucket's
all-reduce starts, overlapping the rest of the backward. Repeats are ignored."""
grad_ready!(model::Model, index::Integer) =
    @check accel_model_grad_ready(model, index - 1)

"""The program's backward is over: on a synchronising one, waits for the all-reduces, after which every
gradient holds the average over the ranks. A parameter never marked ready is an error naming it, unless
the model was prepared with `find_unused_parameters = true`."""
end_backward!(model::Model) = @check accel_model_end_backward(model)

"""
    set_units!(model, unit_of_parameter)

ZeRO stage 3 (prepare option `zero_stage = 3`, several processes), before [`prepare_model!`](@ref): per
parameter, the unit (numbered from 0) it is gathered in; without it, one unit of every trainable parameter.
After prepare the model holds each process's share only, and the program holds a unit's values in a buffer
of the unit's layout while it uses the unit ([`unit_gather!`](@ref), [`unit_reduce!`](@ref)).
"""
set_units!(model::Model, unit_of_parameter::AbstractVector{<:Integer}) =
    @check accel_model_set_units(model, Int32.(collect(unit_of_parameter)), length(unit_of_parameter))

"""The number of units of a model sharded under zero_stage 3; 0 for one that is not."""
num_units(model::Model) = Int(accel_model_num_units(model))

"""The elements of unit `unit`'s (0-based, as set_units! numbers them) layout: what its buffer holds."""
function unit_numel(model::Model, unit::Integer)
    out = Ref{Int64}(0)
    @check accel_model_unit_numel(model, unit, out)
    Int(out[])
end

"""`(unit, first)`: parameter `index`'s (1-based) unit (0-based) and its first element (1-based) in the
unit's layout."""
function parameter_place(model::Model, index::Integer)
    unit, offset = Ref{Csize_t}(0), Ref{Int64}(0)
    @check accel_model_parameter_place(model, index - 1, unit, offset)
    (Int(unit[]), Int(offset[]) + 1)
end

"""Fills `full` (1-d, `unit_numel` elements) with every process's share of the unit's parameters. Collective."""
unit_gather!(model::Model, unit::Integer, full::Tensor) = @check accel_model_unit_gather(model, unit, full)

"""Fills `full` (the unit's layout, of its parameters' dtype) with the unit's averaged gradients, zeros where no
process holds any: `false` when no process holds gradients of the unit (before its first synchronising
backward, after a zero_grad that set them to none). Collective."""
function unit_gather_gradients!(model::Model, unit::Integer, full::Tensor)
    present = Ref{Cint}(0)
    @check accel_model_unit_gather_gradients(model, unit, full, present)
    present[] != 0
end

"""Starts `unit_gather!(model, unit, full)` and returns before it is done (collective): the unit's next
`unit_gather!` only waits for it. `full` must stay alive and untouched until then or the end of the backward
(`end_backward!` waits for the prefetches left and forgets them)."""
unit_prefetch!(model::Model, unit::Integer, full::Tensor) = @check accel_model_unit_prefetch(model, unit, full)

"""Hands the unit's gradients over (`full_gradients`: its layout, zeros where none; overwritten): `true` when
averaged into this process's share (a synchronising backward; collective), `false` when the backward only
accumulates (keep them and add the next backward's)."""
function unit_reduce!(model::Model, unit::Integer, full_gradients::Tensor)
    reduced = Ref{Cint}(0)
    @check accel_model_unit_reduce(model, unit, full_gradients, reduced)
    reduced[] != 0
end

"""Whether no rank's backward reached parameter `index` (1-based) in the last synchronising backward
(`find_unused_parameters`): its gradient was left as it was."""
function grad_reached_by_no_rank(model::Model, index::Integer)
    out = Ref{Cint}(0)
    @check accel_model_grad_reached_by_no_rank(model, index - 1, out)
    out[] != 0
end

"""What forward returned: `output[i]` (1-based), `output["name"]` for a dict, `keys(output)`."""
mutable struct Output
    ptr::Ptr{accel_output_t}
end

Base.unsafe_convert(::Type{Ptr{accel_output_t}}, output::Output) = live_pointer(output)

Base.close(output::Output) = release!(output) do ptr
    accel_output_free(ptr)
end

"""
    forward(model, inputs...; named_inputs...)

The model's forward on positional and named tensors (arrays are copied into tensors).
"""
function forward(model::Model, inputs...; named...)
    return run_forward(model, inputs, named) do out, positional, count, names, named_pointers, named_count
        accel_model_forward(model, positional, count, names, named_pointers, named_count, out)
    end
end

"""`forward` without building a graph, for evaluation (Accelerate users write it under torch.no_grad())."""
function evaluate(model::Model, inputs...; named...)
    return run_forward(model, inputs, named) do out, positional, count, names, named_pointers, named_count
        accel_model_evaluate(model, positional, count, names, named_pointers, named_count, out)
    end
end

as_tensor(value) = value isa Tensor ? value : Tensor(value)

function run_forward(call, model::Model, inputs, named)
    positional = Tensor[as_tensor(input) for input in inputs]
    keyword = Tensor[as_tensor(value) for value in values(named)]
    names = String[String(name) for name in keys(named)]
    positional_pointers = handle_pointers(accel_tensor_t, positional)
    keyword_pointers = handle_pointers(accel_tensor_t, keyword)
    ptr = GC.@preserve positional keyword begin
        with_cstrings(names) do name_pointers
            new_pointer(accel_output_t) do out
                call(out, positional_pointers, length(positional_pointers), name_pointers, keyword_pointers, length(keyword_pointers))
            end
        end
    end
    return finalizer(close, Output(ptr))
end

Base.length(output::Output) = Int(accel_output_count(output))

"""The keys of a dict output, in order; `nothing` for a tensor, tuple or list."""
function Base.keys(output::Output)
    names = [string_or_nothing(accel_output_name(output, index))
             for index in 0:length(output)-1]
    return any(name -> name === nothing, names) ? nothing : String[name for name in names]
end

function Base.getindex(output::Output, index::Integer)
    return new_tensor() do out
        accel_output_get(output, index - 1, out)
    end
end

function Base.getindex(output::Output, name::AbstractString)
    return new_tensor() do out
        accel_output_get_named(output, name, out)
    end
end

"""Training (`true`) or evaluation mode."""
function train!(model::Model, on::Bool = true)
    @check accel_model_train(model, on)
    return model
end

is_training(model::Model) = accel_model_is_training(model) != 0

"""How `save_state!` writes this prepared model from now on: `"whole"` (one file, by process 0) or `"sharded"`
(each process its piece of every tensor, in parallel; FSDP's SHARDED_STATE_DICT), as the prepare option
`checkpoint_model` chose. Either loads on any number of processes."""
function set_checkpoint_model!(model::Model, how::AbstractString)
    @check accel_model_set_checkpoint_model(model, how)
    return model
end

"""The parameters' names in registration order; a tensor several modules hold (tied weights) once, under its
first name."""
function parameter_names(model::Model)
    count = accel_model_num_parameters(model)
    return String[unsafe_string(accel_model_parameter_name(model, index))
                  for index in 0:Int(count)-1]
end

"""Parameter `index` (1-based), sharing the model's memory."""
function parameter(model::Model, index::Integer)
    return new_tensor() do out
        accel_model_parameter(model, index - 1, out)
    end
end

"""Writes `value`, the whole value of parameter `index` (1-based; its shape, converted to its dtype and device),
into the model: under zero_stage 3 this process's share of it (not collective: every process passes the whole
value), otherwise the tensor."""
function set_parameter!(model::Model, index::Integer, value::Tensor)
    @check accel_model_set_parameter(model, index - 1, value)
    return model
end

"""The buffers' names in registration order."""
function buffer_names(model::Model)
    count = accel_model_num_buffers(model)
    return String[unsafe_string(accel_model_buffer_name(model, index))
                  for index in 0:Int(count)-1]
end

"""Buffer `index` (1-based), sharing the model's memory."""
function buffer(model::Model, index::Integer)
    return new_tensor() do out
        accel_model_buffer(model, index - 1, out)
    end
end

function whole_tensor_trampoline(name::Cstring, tensor::Ptr{accel_tensor_t}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    owned = owned_tensor(tensor)
    return run_callback(() -> push!(callbacks.functions.whole, unsafe_string(name) => owned), callbacks)
end

"""Every parameter and buffer as `name => tensor` pairs, copies of their whole values, in the order
`save_model` writes them (a tensor several modules hold, once). Under zero_stage 3 they are gathered unit by
unit: collective, every process calls it, and one with `keep` false gets an empty list."""
function whole_tensors(model::Model; keep::Bool = true)
    callbacks = Callbacks((whole = Pair{String,Tensor}[],))
    trampoline = keep ? @cfunction(whole_tensor_trampoline, Cint, (Cstring, Ptr{accel_tensor_t}, Ptr{Cvoid})) : C_NULL
    GC.@preserve callbacks begin
        code = accel_model_each_whole_tensor(model, Cint(keep), trampoline, payload(callbacks))
    end
    check_callback_call(callbacks, code)
    return callbacks.functions.whole
end

"""What the gradient all-reduces cost, one figure by name: syncs, bytes, copied_bytes, reduce_ms,
overlapped_ms, exposed_ms, wait_ms, helper_cpu_ms (totals since prepare), each also with the prefix last_
(the last synchronising backward's); and gradient_bytes, optimizer_state_bytes (the memory ZeRO's
zero_stage splits, on this process). 0 when the model is not data-parallel."""
function grad_sync_stat(model::Model, name::AbstractString)
    value = Ref{Cdouble}(0)
    @check accel_model_grad_sync_stat(model, name, value)
    return value[]
end

"""The plain module without the data-parallel wrapper (same parameters)."""
function unwrap_model(model::Model)
    return owned_model(new_pointer(accel_model_t) do out
        accel_model_unwrap(model, out)
    end)
end

"""Writes the module as TorchScript (loadable by torch.jit.load)."""
save_torchscript(model::Model, path::AbstractString) =
    @check accel_model_save_torchscript(model, path)

"""Loads what `save_model` wrote into directory (model.safetensors, or the index and its shards) onto each
tensor's device; everything is checked first, so on an error the model is unchanged."""
load_weights!(model::Model, directory::AbstractString) =
    @check accel_model_load_weights(model, directory)
