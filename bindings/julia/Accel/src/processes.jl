# capi/accel/processes.h: split_between_processes, main_process_first, send_to_device.

"""
    split_range(state, length) -> (indices, padded_count)

This process's share of `length` items as Accelerate deals them: `indices` (1-based) are its items;
with padding every rank has `padded_count` items, the missing ones repeating the last item.
"""
function split_range(state::State, length::Integer)
    first = Ref{Int64}(0)
    count = Ref{Int64}(0)
    padded_count = Ref{Int64}(0)
    @check accel_state_split_range(state, length, first, count, padded_count)
    return (indices = (first[] + 1):(first[] + count[]), padded_count = Int(padded_count[]))
end

"""This process's rows (first dimension) of `input`, sharing its memory unless padding adds rows."""
function split_tensor(state::State, input::Tensor; apply_padding::Bool = false)
    return new_tensor() do out
        accel_state_split_tensor(state, input, apply_padding, out)
    end
end

"""
    main_process_first(work, state)

Runs `work()` on the main process first, then on the others (collective): `main_process_first(state)
do ... end`. The section is ended even when `work` throws, so the other ranks do not wait in vain.
"""
function main_process_first(work, state::State)
    @check accel_state_main_process_first_begin(state)
    result = try
        work()
    catch
        accel_state_main_process_first_end(state)
        rethrow()
    end
    @check accel_state_main_process_first_end(state)
    return result
end

"""`main_process_first` with the main process of each machine going first."""
function local_main_process_first(work, state::State)
    @check accel_state_local_main_process_first_begin(state)
    result = try
        work()
    catch
        accel_state_local_main_process_first_end(state)
        rethrow()
    end
    @check accel_state_local_main_process_first_end(state)
    return result
end

"""`input` on the state's device: the same tensor when it is already there, else a copy."""
function send_to_device(state::State, input::Tensor; non_blocking::Bool = false)
    return new_tensor() do out
        accel_state_send_to_device(state, input, non_blocking, out)
    end
end
