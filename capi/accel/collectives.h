/* accel: collectives across the processes of a state (Accelerate's gather, gather_object, reduce,
 * broadcast, pad_across_processes and gather_for_metrics; PyTorch's reduce_scatter_tensor and
 * all_gather_into_tensor), named accel_state_<verb>.
 *
 * Every rank must call the same collectives in the same order. With one process they work locally.
 * The check: unless the state's check_shapes option is off, every collective first exchanges a
 * description of each rank's call (one small all-gather, of the same size whatever the collective): which
 * collective it is, its reduction or source process, the shape and dtype of its tensor. Every rank reads
 * every rank's and reaches the same verdict at once: ranks in different collectives (gather on one,
 * all_gather on another; one of them inside save_state) fail with ACCEL_ERR_INVALID_STATE, "collectives
 * out of step", naming each process's call; different reductions or source processes with
 * ACCEL_ERR_INVALID_ARGUMENT; shapes or dtypes that differ where they must agree with
 * ACCEL_ERR_SHAPE_MISMATCH listing each rank's shape. Nothing else was sent, so the group stays usable:
 * never a hang, never garbage, never a crash. Switching it off saves that round trip for
 * accel_state_reduce, accel_state_reduce_named, accel_state_broadcast, accel_state_reduce_scatter and
 * accel_state_all_gather; mismatched calls among those are then undefined (a hang until the timeout, or
 * worse). accel_state_gather, accel_state_gather_for_metrics, accel_state_gather_bytes and
 * accel_state_pad_across_processes always exchange descriptions (they need every rank's sizes), as does
 * accel_state_wait_for_everyone (the exchange is its barrier), so they always check.
 * Failures of the process group: ACCEL_ERR_TIMEOUT when a rank does not join within the state's
 * timeout_s, ACCEL_ERR_PEER_FAILED when a rank went away. A timeout's message says which ranks did not
 * join and, for every rank, the collective it is in or last started and for how long. Either leaves the
 * group broken (accel_state_is_broken); later collectives, clipping and optimizer steps fail at once with
 * ACCEL_ERR_INVALID_STATE naming the first failure.
 * Thread safety: see accel/state.h. Input handles are only read; results are new handles owned by the
 * caller. */
#ifndef ACCEL_COLLECTIVES_H
#define ACCEL_COLLECTIVES_H

#include "accel/common.h"
#include "accel/state.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_bytes_list accel_bytes_list_t;

/* Concatenation of every rank's tensor along dim 0, in rank order (a 0-d tensor counts as shape [1]).
 * The number of rows (dim 0) may differ between ranks: the sizes are exchanged, each tensor is padded
 * to the longest, gathered, and the padding cut out again, so the result has the sum of the row counts
 * and the caller pads nothing (Accelerate needs equal shapes, hence pad_across_processes first). The
 * dtype, the number of dimensions and every size beyond dim 0 must be equal on every rank
 * (ACCEL_ERR_SHAPE_MISMATCH on every rank otherwise, whatever check_shapes says).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TIMEOUT; ACCEL_ERR_PEER_FAILED;
 * ACCEL_ERR_INVALID_STATE (shut down or broken group). */
ACCEL_API ACCEL_NODISCARD int accel_state_gather(accel_state_t *state, const accel_tensor_t *input, accel_tensor_t **out);

/* Gathers one byte string of any length (0 included) from every rank. *out holds
 * accel_state_num_processes entries in rank order; release it with accel_bytes_list_free.
 * data may be NULL when size is 0.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TIMEOUT; ACCEL_ERR_PEER_FAILED;
 * ACCEL_ERR_INVALID_STATE (shut down or broken group). */
ACCEL_API ACCEL_NODISCARD int accel_state_gather_bytes(accel_state_t *state, const void *data, size_t size,
                                                       accel_bytes_list_t **out);
ACCEL_API size_t accel_bytes_list_count(const accel_bytes_list_t *list);
/* Entry index's bytes, owned by the list; size goes to *size. Errors: ACCEL_ERR_NULL_ARGUMENT,
 * ACCEL_ERR_OUT_OF_RANGE. */
ACCEL_API ACCEL_NODISCARD int accel_bytes_list_get(const accel_bytes_list_t *list, size_t index, const void **data,
                                                   size_t *size);
ACCEL_API void accel_bytes_list_free(accel_bytes_list_t *list);

/* Element-wise reduction over ranks into a new tensor: reduction is "sum", "mean" or "max" (anything
 * else is ACCEL_ERR_INVALID_ARGUMENT naming it; Accelerate silently summed), the same on every rank
 * (ACCEL_ERR_INVALID_ARGUMENT on every rank otherwise, naming each rank's). "mean" needs a floating
 * dtype (ACCEL_ERR_DTYPE otherwise).
 * Errors: ACCEL_ERR_INVALID_ARGUMENT; ACCEL_ERR_DTYPE; and those of accel_state_gather. */
ACCEL_API ACCEL_NODISCARD int accel_state_reduce(accel_state_t *state, const accel_tensor_t *input, const char *reduction,
                                                 accel_tensor_t **out);

/* accel_state_reduce over many tensors at once, as Accelerate reduces a nested structure leaf by leaf:
 * names[i] names inputs[i] (a path such as "metrics.loss" or "outputs.0"; names must be unique), and
 * outputs[i] receives a new handle on its reduction, for i < count (outputs is the caller's array of count
 * pointers; all NULL unless the call succeeds). One exchange compares every rank's names, shapes and dtypes
 * (unless check_shapes is off; ACCEL_ERR_SHAPE_MISMATCH on every rank, listing each rank's), then one
 * all-reduce per dtype carries all its tensors. "mean" needs floating dtypes (ACCEL_ERR_DTYPE naming the
 * tensor). count 0 reduces nothing. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (unknown
 * reduction, a repeated name); ACCEL_ERR_DTYPE; ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TIMEOUT;
 * ACCEL_ERR_PEER_FAILED; ACCEL_ERR_INVALID_STATE (shut down or broken group). */
ACCEL_API ACCEL_NODISCARD int accel_state_reduce_named(accel_state_t *state, const char *const *names,
                                                       accel_tensor_t *const *inputs, size_t count,
                                                       const char *reduction, accel_tensor_t **outputs);

/* Overwrites tensor, on every rank, with the values of rank from_process, in place (memory shared with
 * a DLPack producer sees the new values). Errors also: ACCEL_ERR_OUT_OF_RANGE for a bad from_process;
 * ACCEL_ERR_INVALID_ARGUMENT when the ranks name different source processes. */
ACCEL_API ACCEL_NODISCARD int accel_state_broadcast(accel_state_t *state, accel_tensor_t *tensor, int32_t from_process);

/* Reduce-scatter into the caller's tensor (PyTorch's reduce_scatter_tensor): output receives, in place,
 * this process's share of the element-wise reduction of every rank's input, that is with n elements in
 * output, elements [rank * n, (rank + 1) * n) of the reduction in row-major order. reduction is "sum" or
 * "mean" (anything else is ACCEL_ERR_INVALID_ARGUMENT naming it; "mean" needs a floating dtype,
 * ACCEL_ERR_DTYPE). Every rank's input has the same shape and dtype; output has the input's dtype and device
 * and 1/num_processes of its elements, in any shape (a non-contiguous output is written through a copy).
 * Memory shared with a DLPack producer sees the new values. With check_shapes on (the default), every rank's
 * input and output are compared first and a difference fails on every rank alike, naming the process:
 * ACCEL_ERR_SHAPE_MISMATCH (the inputs differ, an output has the wrong element count, an input that does not
 * split evenly), ACCEL_ERR_DTYPE (an output of another dtype), ACCEL_ERR_INVALID_ARGUMENT (an output on
 * another device). With one process output receives the input.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; those above; ACCEL_ERR_TIMEOUT; ACCEL_ERR_PEER_FAILED;
 * ACCEL_ERR_INVALID_STATE (shut down or broken group). */
ACCEL_API ACCEL_NODISCARD int accel_state_reduce_scatter(accel_state_t *state, const accel_tensor_t *input,
                                                         const char *reduction, accel_tensor_t *output);

/* All-gather into the caller's tensor (PyTorch's all_gather_into_tensor): output receives, in place, every
 * rank's input in rank order (rank r's elements from r * numel(input) on, row-major). Every rank's input has
 * the same shape and dtype; output has the input's dtype and device and num_processes times its elements, in
 * any shape (a [num_processes * rows, ...] tensor concatenates along dim 0, a [num_processes, ...] one
 * stacks). Shape checks and errors as accel_state_reduce_scatter's, but for the reduction. */
ACCEL_API ACCEL_NODISCARD int accel_state_all_gather(accel_state_t *state, const accel_tensor_t *input,
                                                     accel_tensor_t *output);

/* Pads the tensor along dim (negative counts from the end) to the largest size any rank has there,
 * filling with pad_value, at the end or, with pad_first, at the start. The number of dimensions must be
 * equal on every rank (ACCEL_ERR_SHAPE_MISMATCH otherwise, whatever check_shapes says, on every rank).
 * A dim outside [-ndim, ndim) is ACCEL_ERR_OUT_OF_RANGE. *out is a new handle (same data when no
 * padding is needed).
 * Errors: ACCEL_ERR_OUT_OF_RANGE; ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_INVALID_ARGUMENT (pad_first not 0 or 1);
 * and those of accel_state_gather. */
ACCEL_API ACCEL_NODISCARD int accel_state_pad_across_processes(accel_state_t *state, const accel_tensor_t *input,
                                                               int64_t dim, double pad_value, int pad_first,
                                                               accel_tensor_t **out);

/* accel_state_gather (row counts may differ between ranks), then, while the innermost active loader is
 * on its last batch, only the first accel_loader_remainder rows (accel/loader.h): the samples that padded
 * the last global batch are dropped.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_SHAPE_MISMATCH; ACCEL_ERR_TIMEOUT; ACCEL_ERR_PEER_FAILED;
 * ACCEL_ERR_INVALID_STATE (shut down or broken group). */
ACCEL_API ACCEL_NODISCARD int accel_state_gather_for_metrics(accel_state_t *state, const accel_tensor_t *input,
                                                             accel_tensor_t **out);

#ifdef __cplusplus
}
#endif
#endif
