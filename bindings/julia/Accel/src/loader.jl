# capi/accel/loader.h: datasets (arrays, a Julia function of the index, an iterable, files) and prepared
# data loaders, which iterate over this rank's batches.
#
# Thread safety (loader.h): a loader is used by one task at a time; starting an epoch with shuffle is
# collective.

"""
    Dataset(; name = array_or_tensor, ...)
    Dataset(get_item, length)
    Dataset(items_of_epoch)

A dataset. Over arrays or tensors sharing their first dimension (one sample per index of it; arrays are
copied, tensors shared). Over a function: `get_item(index)` (1-based) returns one item's fields, e.g.
`(x = features, y = label)`, arrays, numbers or tensors, stacked into batches by the loader. Iterable:
`items_of_epoch(epoch)` returns an iterator of such items for each epoch (Accelerate's IterableDataset;
its loaders dispatch: rank 0 reads the items and sends each rank its rows).
"""
mutable struct Dataset
    ptr::Ptr{accel_dataset_t}
    callbacks::Union{Callbacks,Nothing}
end

Base.unsafe_convert(::Type{Ptr{accel_dataset_t}}, dataset::Dataset) = live_pointer(dataset)

Base.close(dataset::Dataset) = release!(dataset) do ptr
    accel_dataset_free(ptr)
end

owned_dataset(ptr::Ptr{accel_dataset_t}, callbacks) = finalizer(close, Dataset(ptr, callbacks))

function Dataset(; fields...)
    names = String[String(name) for name in keys(fields)]
    tensors = Tensor[value isa Tensor ? value : Tensor(value) for value in values(fields)]
    pointers = handle_pointers(accel_tensor_t, tensors)
    ptr = GC.@preserve tensors begin
        with_cstrings(names) do name_pointers
            new_pointer(accel_dataset_t) do out
                accel_dataset_from_tensors(out, name_pointers, pointers, length(pointers))
            end
        end
    end
    return owned_dataset(ptr, nothing)
end

"""Adds the fields of a Julia item (pairs of name and array, number or tensor) to the sample being built."""
function add_fields!(sample::Ptr{accel_sample_t}, item)
    for (name, value) in pairs(item)
        tensor = value isa Tensor ? value : Tensor(value)
        @check accel_sample_add(sample, String(name), tensor)
    end
end

function get_item_trampoline(index::Int64, sample::Ptr{accel_sample_t}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> add_fields!(sample, callbacks.functions.get_item(index + 1)), callbacks)
end

function Dataset(get_item::Function, count::Integer)
    callbacks = Callbacks((get_item = get_item,))
    trampoline = @cfunction(get_item_trampoline, Cint, (Int64, Ptr{accel_sample_t}, Ptr{Cvoid}))
    ptr = new_pointer(accel_dataset_t) do out
        accel_dataset_from_callback(out, count, trampoline, payload(callbacks))
    end
    return owned_dataset(ptr, callbacks)
end

function start_epoch_trampoline(epoch::Int64, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(() -> (callbacks.stream = Iterators.Stateful(callbacks.functions.items_of_epoch(epoch))), callbacks)
end

function next_item_trampoline(sample::Ptr{accel_sample_t}, finished::Ptr{Cint}, context::Ptr{Cvoid})::Cint
    callbacks = unsafe_pointer_to_objref(context)::Callbacks
    return run_callback(callbacks) do
        stream = callbacks.stream
        if isempty(stream)
            unsafe_store!(finished, Cint(1))
        else
            add_fields!(sample, popfirst!(stream))
        end
    end
end

function Dataset(items_of_epoch::Function)
    callbacks = Callbacks((items_of_epoch = items_of_epoch,))
    start_epoch = @cfunction(start_epoch_trampoline, Cint, (Int64, Ptr{Cvoid}))
    next_item = @cfunction(next_item_trampoline, Cint, (Ptr{accel_sample_t}, Ptr{Cint}, Ptr{Cvoid}))
    ptr = new_pointer(accel_dataset_t) do out
        accel_dataset_from_iterable(out, start_epoch, next_item, payload(callbacks))
    end
    return owned_dataset(ptr, callbacks)
end

"""A dataset over a memory-mapped .safetensors file: a field per tensor in it."""
function safetensors_dataset(path::AbstractString)
    ptr = new_pointer(accel_dataset_t) do out
        accel_dataset_from_safetensors(out, path)
    end
    return owned_dataset(ptr, nothing)
end

"""`npy_dataset(x = "x.npy", y = "y.npy")`: a dataset over memory-mapped .npy files, a field each."""
function npy_dataset(; files...)
    names = String[String(name) for name in keys(files)]
    paths = String[String(path) for path in values(files)]
    ptr = with_cstrings(names) do name_pointers
        with_cstrings(paths) do path_pointers
            new_pointer(accel_dataset_t) do out
                accel_dataset_from_npy(out, name_pointers, path_pointers, length(names))
            end
        end
    end
    return owned_dataset(ptr, nothing)
end

"""The number of samples; `nothing` for an iterable dataset."""
function num_samples(dataset::Dataset)
    count = accel_dataset_length(dataset)
    return count < 0 ? nothing : Int(count)
end

"""
    Loader(state, dataset; batches = nothing, options...)

This rank's loader over `dataset`, with the loader keys of options.h as keywords (`batch_size = 32,
shuffle = true, ...`). `batches`: given batches of dataset indices (1-based), like a DataLoader's
batch_sampler. Iterating gives the batches of one epoch; iterating again starts the next.
"""
mutable struct Loader
    ptr::Ptr{accel_loader_t}
    dataset_callbacks::Union{Callbacks,Nothing}
end

Base.unsafe_convert(::Type{Ptr{accel_loader_t}}, loader::Loader) = live_pointer(loader)

Base.close(loader::Loader) = release!(loader) do ptr
    accel_loader_free(ptr)
end

function Loader(state::State, dataset::Dataset; batches = nothing, settings...)
    if dataset.callbacks !== nothing && get(settings, :prefetch_threads, 0) != 0
        throw(ArgumentError("a dataset made of a Julia function cannot be read by prefetch_threads: they are not Julia threads"))
    end
    options = Options(; settings...)
    ptr = try
        batches === nothing ? new_loader(state, dataset, options) : new_loader(state, dataset, batches, options)
    finally
        close(options)
    end
    return finalizer(close, Loader(ptr, dataset.callbacks))
end

function new_loader(state::State, dataset::Dataset, options::Options)
    return new_pointer(accel_loader_t) do out
        accel_loader_new(out, state, dataset, options)
    end
end

function new_loader(state::State, dataset::Dataset, batches, options::Options)
    indices = Int64[index - 1 for batch in batches for index in batch]
    sizes = Csize_t[length(batch) for batch in batches]
    return new_pointer(accel_loader_t) do out
        accel_loader_new_with_batches(out, state, dataset, indices, sizes, length(sizes), options)
    end
end

Base.iterate(loader::Loader) = next_batch(loader)
Base.iterate(loader::Loader, ::Nothing) = next_batch(loader)

"""The next batch of the epoch and no iteration state, or `nothing` at its end."""
function next_batch(loader::Loader)
    out = Ref{Ptr{accel_batch_t}}(C_NULL)
    code = accel_loader_next(loader, out)
    check_callback_call(loader.dataset_callbacks, code)
    out[] == C_NULL && return nothing
    return (finalizer(close, Batch(out[])), nothing)
end

Base.IteratorSize(::Type{Loader}) = Base.SizeUnknown()
Base.eltype(::Type{Loader}) = Batch

"""Batches this rank yields in a full epoch; `nothing` for an iterable dataset."""
function num_batches(loader::Loader)
    count = Ref{Int64}(0)
    @check accel_loader_length(loader, count)
    return count[] < 0 ? nothing : Int(count[])
end

"""Whether the batch last returned is the last of the epoch."""
end_of_dataloader(loader::Loader) = accel_loader_end_of_dataloader(loader) != 0

"""Real samples in the last global batch; `nothing` when unknown (drop_last, given batches)."""
function remainder(loader::Loader)
    count = accel_loader_remainder(loader)
    return count < 0 ? nothing : Int(count)
end

"""The epoch the loader is in, or starts next."""
epoch(loader::Loader) = Int(accel_loader_epoch(loader))

"""Between epochs: the number of the next one."""
set_epoch!(loader::Loader, epoch::Integer) = @check accel_loader_set_epoch(loader, epoch)

"""Between epochs: the next epoch skips its first `n` batches of this rank."""
skip_first_batches!(loader::Loader, n::Integer) = @check accel_loader_skip_first_batches(loader, n)

"""The loader's position (epoch, generator, batches yielded), to resume exactly there."""
function save_state(loader::Loader)
    data = Ref{Ptr{Cvoid}}(C_NULL)
    size = Ref{Csize_t}(0)
    @check accel_loader_save_state(loader, data, size)
    return size[] == 0 ? UInt8[] : copy(unsafe_wrap(Array, Ptr{UInt8}(data[]), Int(size[])))
end

"""Between epochs: restores a position `save_state` gave, over the same dataset and settings."""
function load_state!(loader::Loader, saved::Vector{UInt8})
    @check accel_loader_load_state(loader, saved, length(saved))
end

"""A batch: named tensors sharing their first dimension. `batch["x"]`, `keys(batch)`."""
mutable struct Batch
    ptr::Ptr{accel_batch_t}
end

Base.unsafe_convert(::Type{Ptr{accel_batch_t}}, batch::Batch) = live_pointer(batch)

Base.close(batch::Batch) = release!(batch) do ptr
    accel_batch_free(ptr)
end

Base.length(batch::Batch) = Int(accel_batch_count(batch))

function Base.keys(batch::Batch)
    return String[string_or_nothing(accel_batch_name(batch, index))
                  for index in 0:length(batch)-1]
end

function Base.getindex(batch::Batch, name::AbstractString)
    return new_tensor() do out
        accel_batch_get(batch, name, out)
    end
end
