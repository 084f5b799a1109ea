# capi/accel/dealing.h: Accelerate's data rules for a loader the library does not drive (BatchSamplerShard,
# IterableDatasetShard, DataLoaderDispatcher's slicing). A dealer is fed one epoch's base batches, or a
# stream's item positions, and gives back this rank's batches of those values.
#
# Thread safety (dealing.h): a dealer is used by one task at a time; different dealers are independent.

"""
    shard_dealer(; batch_size = nothing, drop_last = false, num_processes, process_index, split_batches = false, even_batches = true)
    iterable_dealer(; batch_size, drop_last = false, num_processes, process_index, split_batches = false)
    dispatch_dealer(; num_processes, process_index, split_batches = false, drop_last = false)

One epoch's dealing: `deal!(dealer, indices)` feeds the next base batch (or item positions) and returns
the batches this rank yields now, `finish!(dealer)` the rest. The batches are copies of the values fed, so
1-based indices come back 1-based.
"""
mutable struct Dealer
    ptr::Ptr{accel_dealer_t}
end

Base.unsafe_convert(::Type{Ptr{accel_dealer_t}}, dealer::Dealer) = live_pointer(dealer)

Base.close(dealer::Dealer) = release!(dealer) do ptr
    accel_dealer_free(ptr)
end

owned_dealer(ptr::Ptr{accel_dealer_t}) = finalizer(close, Dealer(ptr))

"""BatchSamplerShard's batches of base batches of `batch_size` indices (`nothing`: dynamic batch sizes)."""
function shard_dealer(; batch_size::Union{Integer,Nothing} = nothing, drop_last::Bool = false, num_processes::Integer,
                      process_index::Integer, split_batches::Bool = false, even_batches::Bool = true)
    ptr = new_pointer(accel_dealer_t) do out
        accel_dealer_new_shard(out, something(batch_size, 0), drop_last, num_processes, process_index, split_batches,
                               even_batches)
    end
    return owned_dealer(ptr)
end

"""IterableDatasetShard's: this rank's contiguous slice of each global batch of the stream's item positions."""
function iterable_dealer(; batch_size::Integer, drop_last::Bool = false, num_processes::Integer, process_index::Integer,
                         split_batches::Bool = false)
    ptr = new_pointer(accel_dealer_t) do out
        accel_dealer_new_iterable(out, batch_size, drop_last, num_processes, process_index, split_batches)
    end
    return owned_dealer(ptr)
end

"""DataLoaderDispatcher's: this rank's rows of each step made of the base batches rank 0 reads."""
function dispatch_dealer(; num_processes::Integer, process_index::Integer, split_batches::Bool = false,
                         drop_last::Bool = false)
    ptr = new_pointer(accel_dealer_t) do out
        accel_dealer_new_dispatch(out, num_processes, process_index, split_batches, drop_last)
    end
    return owned_dealer(ptr)
end

"""Feeds the next base batch (or item positions); returns the batches this rank yields now."""
function deal!(dealer::Dealer, indices)
    values = Int64[index for index in indices]
    @check accel_dealer_push(dealer, values, length(values))
    return ready_batches(dealer)
end

"""Ends the epoch; returns the batches this rank yields after the last base batch."""
function finish!(dealer::Dealer)
    @check accel_dealer_finish(dealer)
    return ready_batches(dealer)
end

"""The batches the dealer has queued, copied out of it."""
function ready_batches(dealer::Dealer)
    indices = Ref{Ptr{Int64}}(C_NULL)
    count = Ref{Csize_t}(0)
    has_batch = Ref{Cint}(0)
    batches = Vector{Int64}[]
    while true
        @check accel_dealer_next(dealer, indices, count, has_batch)
        has_batch[] == 0 && return batches
        push!(batches, count[] == 0 ? Int64[] : copy(unsafe_wrap(Array, indices[], Int(count[]))))
    end
end

"""
Batches this rank yields for `base_len` base batches (stream items, for an iterable dealer), the last of
`last_batch_size` indices (read only by a shard of a fixed batch size).
"""
function num_batches(dealer::Dealer, base_len::Integer, last_batch_size::Integer = 0)
    count = Ref{Int64}(0)
    @check accel_dealer_length(dealer, base_len, last_batch_size, count)
    return Int(count[])
end

"""
After `finish!`: the real rows of a dispatch dealer's last step (before completion); `nothing` when there
was no step, and for the other kinds.
"""
function remainder(dealer::Dealer)
    count = Ref{Int64}(0)
    @check accel_dealer_remainder(dealer, count)
    return count[] < 0 ? nothing : Int(count[])
end
