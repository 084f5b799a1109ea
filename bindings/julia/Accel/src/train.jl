# capi/accel/train.h: the training step (accumulate, backward, clipping) and save_model.
#
# Thread safety (train.h): one task at a time per state.

"""Accelerate's accumulate(model): call at the start of each step; decides whether it synchronises."""
accumulate!(state::State) = @check ccall((:accel_state_accumulate, libaccel), Cint, (Ptr{accel_state_t},), state)

"""Whether the current step synchronises gradients and steps the optimizer."""
sync_gradients(state::State) = ccall((:accel_state_sync_gradients, libaccel), Cint, (Ptr{accel_state_t},), state) != 0

"""Backward of loss / gradient_accumulation_steps (scaled under fp16)."""
backward!(state::State, loss::Tensor) = @check ccall((:accel_state_backward, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}), state, loss)

"""Backward of a loss summed over this micro-batch's items, normalised by `num_items`, the items of the whole
accumulated global batch (every micro-batch of the optimizer step, on every rank): the gradient is that of
the full batch's mean loss."""
backward_with_items!(state::State, loss::Tensor, num_items::Integer) =
    @check ccall((:accel_state_backward_with_items, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Csize_t), state, loss, num_items)

"""Clips the gradients' total `norm_type`-norm to `max_norm`; returns the norm before clipping."""
function clip_grad_norm!(state::State, model::Model, max_norm::Real, norm_type::Real = 2.0)
    total = Ref{Cdouble}(0)
    @check ccall((:accel_state_clip_grad_norm, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_model_t}, Cdouble, Cdouble, Ptr{Cdouble}),
        state, model, max_norm, norm_type, total)
    return total[]
end

"""Clamps every gradient to [-clip_value, clip_value]."""
clip_grad_value!(state::State, model::Model, clip_value::Real) =
    @check ccall((:accel_state_clip_grad_value, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_model_t}, Cdouble), state, model, clip_value)

"""Saves the unwrapped model into directory/model.safetensors on the main process (collective)."""
save_model(state::State, model::Model, directory::AbstractString) =
    @check ccall((:accel_state_save_model, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_model_t}, Cstring), state, model, directory)
