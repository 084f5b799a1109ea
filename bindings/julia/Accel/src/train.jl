# capi/accel/train.h: the training step (accumulate, backward, clipping) and save_model.
#
# Thread safety (train.h): one task at a time per state.

"""Accelerate's accumulate(model): call at the start of each step; decides whether it synchronises."""
accumulate!(state::State) = @check accel_state_accumulate(state)

"""Whether the current step synchronises gradients and steps the optimizer."""
sync_gradients(state::State) = accel_state_sync_gradients(state) != 0

"""This handle's gradient_accumulation_steps: what backward! divides the loss by."""
gradient_accumulation_steps(state::State) = accel_state_gradient_accumulation_steps(state)

"""Sets this handle's accumulation from the next accumulate! on (Accelerate's setter); steps >= 1."""
set_gradient_accumulation_steps!(state::State, steps::Integer) =
    @check accel_state_set_gradient_accumulation_steps(state, Int64(steps))

"""Sets whether the current step synchronises, until the next accumulate! decides again (the process's flag)."""
set_sync_gradients!(state::State, sync::Bool) = @check accel_state_set_sync_gradients(state, Cint(sync))

"""Backward of loss / gradient_accumulation_steps (scaled under fp16)."""
backward!(state::State, loss::Tensor) = @check accel_state_backward(state, loss)

"""Backward of a loss summed over this micro-batch's items, normalised by `num_items`, the items of the whole
accumulated global batch (every micro-batch of the optimizer step, on every rank): the gradient is that of
the full batch's mean loss."""
backward_with_items!(state::State, loss::Tensor, num_items::Integer) =
    @check accel_state_backward_with_items(state, loss, num_items)

"""
    no_sync(work, state, model)

Accelerate's no_sync(model), `no_sync(state, model) do ... end`: backwards of forwards run in `work` only
accumulate gradients on this process (no all-reduce); the next synchronising backward averages the sum.
"""
function no_sync(work, state::State, model::Model)
    @check accel_state_no_sync_begin(state, model)
    result = try
        work()
    finally
        @check accel_state_no_sync_end(state, model)
    end
    return result
end

"""
    autocast(work, state)

Accelerate's autocast(), `autocast(state) do ... end`: the library's operations on this thread in `work`
(a loss computed outside the model's forward) run under the state's mixed precision.
"""
function autocast(work, state::State)
    @check accel_state_autocast_begin(state)
    result = try
        work()
    finally
        @check accel_state_autocast_end(state)
    end
    return result
end

"""Accelerate's free_memory for what the state holds: the accumulation counter restarts, loaders in an
epoch are no longer tracked, and CUDA's cached blocks are returned."""
free_memory!(state::State) = @check accel_state_free_memory(state)

"""The fp16 loss scale for a model of the program's tensors trained by an optimizer that is not accel's: a
0-dim float32 tensor on the state's device (the same memory every call; 1 without fp16 loss scaling) to
multiply the loss by before the program's backward."""
function grad_scale(state::State)
    return new_tensor() do out
        accel_state_grad_scale(state, out)
    end
end

"""Divides the model's gradients by the loss scale (once per optimizer step, before clipping); `true` when
any holds inf or NaN (skip the step then). Without fp16 loss scaling nothing changes: `false`."""
function unscale_gradients!(state::State, model::Model)
    found_inf = Ref{Cint}(0)
    @check accel_state_unscale_gradients(state, model, found_inf)
    return found_inf[] != 0
end

"""GradScaler.update: the scale grows or backs off after a step that was taken (`found_inf` false) or
skipped (true). Without fp16 loss scaling, nothing."""
update_grad_scale!(state::State, found_inf::Bool) =
    @check accel_state_update_grad_scale(state, found_inf)

"""Clips the gradients' total `norm_type`-norm to `max_norm`; returns the norm before clipping."""
function clip_grad_norm!(state::State, model::Model, max_norm::Real, norm_type::Real = 2.0)
    total = Ref{Cdouble}(0)
    @check accel_state_clip_grad_norm(state, model, max_norm, norm_type, total)
    return total[]
end

"""Clamps every gradient to [-clip_value, clip_value]."""
clip_grad_value!(state::State, model::Model, clip_value::Real) =
    @check accel_state_clip_grad_value(state, model, clip_value)

"""Accelerate's save_model on the main process (collective): the unwrapped model's weights in
directory/model.safetensors, or, above `max_shard_size` bytes (0: Accelerate's 10 GB), in
model-0000i-of-0000N.safetensors shards with model.safetensors.index.json; tied weights once.
`load_weights!` reads them back."""
save_model(state::State, model::Model, directory::AbstractString; max_shard_size::Integer=0) =
    @check accel_state_save_model(state, model, directory, max_shard_size)
