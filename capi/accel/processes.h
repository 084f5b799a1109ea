/* accel: working with the processes of a state (Accelerate's split_between_processes,
 * main_process_first, local_main_process_first and send_to_device).
 *
 * Thread safety: the split functions and accel_state_send_to_device may run on several threads; the
 * main-process-first pair is collective and follows the rules of accel/state.h. */
#ifndef ACCEL_PROCESSES_H
#define ACCEL_PROCESSES_H

#include "accel/common.h"
#include "accel/state.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This process's share of length items, dealt as Accelerate deals them: contiguous, the first
 * length % num_processes ranks get one more. Items [*first, *first + *count) are this rank's; with
 * padding (Accelerate's apply_padding) every rank has *padded_count items, the missing ones repeating the
 * last of all length items. With one process: the whole range. first, count and padded_count may each be
 * NULL. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (length < 0). */
ACCEL_API ACCEL_NODISCARD int accel_state_split_range(const accel_state_t *state, int64_t length, int64_t *first,
                                                      int64_t *count, int64_t *padded_count);
/* *out receives this process's rows (dim 0) of input, as accel_state_split_range deals them, sharing
 * input's memory unless apply_padding adds rows (copies of the last row of input). Not collective.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (a 0-d tensor; padding an empty tensor;
 * apply_padding not 0 or 1). */
ACCEL_API ACCEL_NODISCARD int accel_state_split_tensor(const accel_state_t *state, const accel_tensor_t *input,
                                                       int apply_padding, accel_tensor_t **out);

/* A section the main process runs before the others ("download on rank 0 first"): every rank calls
 * begin, does the work, then calls end. The other ranks wait in begin until the main one reaches end.
 * Collective; call end even when the section failed, or the others wait until timeout_s. The local_
 * forms let the main process of each node go first.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_TIMEOUT; ACCEL_ERR_PEER_FAILED; ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_state_main_process_first_begin(accel_state_t *state);
/* Errors: as accel_state_main_process_first_begin. */
ACCEL_API ACCEL_NODISCARD int accel_state_main_process_first_end(accel_state_t *state);
/* Errors: as accel_state_main_process_first_begin. */
ACCEL_API ACCEL_NODISCARD int accel_state_local_main_process_first_begin(accel_state_t *state);
/* Errors: as accel_state_main_process_first_begin. */
ACCEL_API ACCEL_NODISCARD int accel_state_local_main_process_first_end(accel_state_t *state);

/* *out receives input on the state's device (Accelerate's send_to_device / x.to(accelerator.device)): a
 * new handle on the same tensor when it is already there, else a copy. non_blocking: an asynchronous copy
 * from pinned memory to CUDA. Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (non_blocking
 * not 0 or 1); ACCEL_ERR_TORCH (the copy failed). */
ACCEL_API ACCEL_NODISCARD int accel_state_send_to_device(const accel_state_t *state, const accel_tensor_t *input,
                                                         int non_blocking, accel_tensor_t **out);

#ifdef __cplusplus
}
#endif
#endif
