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
 * Class indices are checked before the loss runs, on a GPU too, where an index out of range would end in a
 * device-side assert that leaves the CUDA context unusable. There a target that accel copied from host
 * memory (accel_state_send_to_device, a loader's device placement), or a view of one, is checked against
 * the range of values recorded at the copy, without touching the GPU, as long as nothing wrote to it since
 * and it was not exported through DLPack; any other target costs a read of its extremes, which waits for
 * the GPU's queued work.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown name; class index out of range;
 * an option of another object, naming it); ACCEL_ERR_DTYPE (a target of the wrong type, saying which is
 * expected); ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TORCH. */
ACCEL_API ACCEL_NODISCARD int accel_loss_compute(accel_tensor_t **out, const char *name, const accel_tensor_t *input,
                                                 const accel_tensor_t *target, const accel_options_t *options);

#ifdef __cplusplus
}
#endif
#endif
