# Julia functions run by the library through C callbacks (dataset items, learning-rate multipliers).
#
# A C callback can only say "failed" (a non-zero return); the library then fails the call that ran it
# with ACCEL_ERR_CALLBACK. A Callbacks object keeps the first exception the Julia code threw, and the
# wrapper of that call throws it again instead of a bare AccelError.
#
# The payload the library passes back is the Callbacks object itself (pointer_from_objref). Every wrapper
# whose C object may call back (a dataset and its loaders, a scheduler) references it, so it outlives the
# C side whatever order the finalizers run in. Callbacks run on the thread of the accel call that runs
# them; the library's own threads (a loader's prefetch_threads) cannot run Julia code before Julia 1.9.

mutable struct Callbacks
    functions::NamedTuple
    stream::Any     # the items of the current epoch of an iterable dataset
    failure::Any    # the first exception thrown since the last call, or nothing
end

Callbacks(functions::NamedTuple) = Callbacks(functions, nothing, nothing)

payload(callbacks::Callbacks) = pointer_from_objref(callbacks)

"""Runs a callback body: 0 when it returns, 1 when it throws (the exception is kept for the caller)."""
function run_callback(body, callbacks::Callbacks)
    try
        body()
        return Cint(0)
    catch exception
        callbacks.failure === nothing && (callbacks.failure = exception)
        return Cint(1)
    end
end

"""Like `@check`, but a failure of a callback rethrows what the Julia code threw."""
function check_callback_call(callbacks::Union{Callbacks,Nothing}, code::Cint)
    code == ACCEL_OK && return nothing
    failure = callbacks === nothing ? nothing : callbacks.failure
    callbacks === nothing || (callbacks.failure = nothing)
    code == ACCEL_ERR_CALLBACK && failure !== nothing && throw(failure)
    throw_last_error(code)
end
