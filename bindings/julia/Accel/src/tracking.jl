# capi/accel/tracking.h: trackers (JSONL, CSV, TensorBoard), printing on the main process, a progress bar.
#
# Thread safety (tracking.h): one task at a time per state.

"""
    init_trackers(state, project_dir, run_name; config_json = nothing, options...)

Starts (or replaces) the trackers writing project_dir/run_name on the main process; `config_json` goes
verbatim to config.json; keywords: `log_with`, `overwrite`.
"""
function init_trackers(state::State, project_dir::AbstractString, run_name::AbstractString; config_json = nothing, settings...)
    options = Options(; settings...)
    try
        @check accel_state_init_trackers(state, project_dir, run_name, nullable_cstring(config_json), options)
    finally
        close(options)
    end
end

"""
    log_metrics(state, values, step)

Logs named scalars, a NamedTuple `(loss = 0.3, lr = 1e-3)` or a Dict, at `step`, on the main process.
"""
function log_metrics(state::State, metrics, step::Integer)
    names = String[String(name) for (name, _) in pairs(metrics)]
    numbers = Cdouble[value for (_, value) in pairs(metrics)]
    with_cstrings(names) do name_pointers
        @check accel_state_log(state, name_pointers, numbers, length(numbers), step)
    end
end

"""Closes the trackers' files (Accelerate's end_training without the collective shutdown)."""
finish_trackers(state::State) = @check accel_state_finish_trackers(state)

"""Prints a line on the local main process (once per machine), above the progress bar."""
print_main(state::State, text::AbstractString) = @check accel_state_print(state, text)

"""
    Progress(state, total; description = nothing)

A progress bar of `total` steps (<= 0: unknown) on the local main process; drawn to the end by `close`.
"""
mutable struct Progress
    ptr::Ptr{accel_progress_t}
end

Base.unsafe_convert(::Type{Ptr{accel_progress_t}}, progress::Progress) = live_pointer(progress)

Base.close(progress::Progress) = release!(progress) do ptr
    accel_progress_free(ptr)
end

function Progress(state::State, total::Integer; description = nothing)
    ptr = new_pointer(accel_progress_t) do out
        accel_progress_new(out, state, total, nullable_cstring(description))
    end
    return finalizer(close, Progress(ptr))
end

"""Advances the bar by `steps` and shows `loss` (NaN keeps the previous one)."""
update!(progress::Progress, steps::Integer = 1, loss::Real = NaN) =
    @check accel_progress_update(progress, steps, loss)
