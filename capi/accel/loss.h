/* accel: losses, for callers who cannot express theirs in TorchScript.
 *
 * Loss options (each an error on any other object): reduction ("mean", "sum", "none"), label_smoothing
 * (0), ignore_index (-100).
 * Thread safety: accel_loss_compute may run on several threads at once (it only reads its arguments). */
#ifndef ACCEL_LOSS_H
#define ACCEL_LOSS_H

#include "accel/common.h"
#include "accel/options.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *out receives a new tensor with the loss called name between input and target: "cross_entropy" (input
 * [N, C] logits, int64 target [N]; options label_smoothing, ignore_index), "nll", "mse", "l1" or
 * "bce_with_logits", reduced by the option reduction. options may be NULL (the defaults).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name; class index out of range;
 * an option of another object, naming it); ACCEL_ERR_DTYPE (a target of the wrong type, saying which is
 * expected); ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TORCH. */
ACCEL_API ACCEL_NODISCARD int accel_loss_compute(accel_tensor_t **out, const char *name, const accel_tensor_t *input,
                                                 const accel_tensor_t *target, const accel_options_t *options);

#ifdef __cplusplus
}
#endif
#endif
