# capi/accel/loss.h: losses computed by the library, for losses that are not in the TorchScript model.

"""
    compute_loss(name, input, target; options...)

The loss `name` ("cross_entropy", "nll", "mse", "l1", "bce_with_logits") of `input` against `target`,
with the loss keys as keywords (`reduction = "sum"`, `label_smoothing = 0.1`, `ignore_index = -100`).
"""
function compute_loss(name::AbstractString, input::Tensor, target::Tensor; settings...)
    options = Options(; settings...)
    try
        return new_tensor() do out
            accel_loss_compute(out, name, input, target, options)
        end
    finally
        close(options)
    end
end
