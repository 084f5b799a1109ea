/* accel: Accelerate's data rules for a loader the library does not drive (BatchSamplerShard,
 * IterableDatasetShard, DataLoaderDispatcher's slicing).
 *
 * A dealer is fed the base batches of one epoch as they come (the batch sampler's, or for an iterable
 * shard the positions 0, 1, 2, ... of the stream's items) and gives back the batches this rank yields,
 * as lists of those indices (positions), in order: the same rules, by the same code, as accel_loader_t
 * and `accel shard-plan`, for any num_processes and process_index, without a state. The Python
 * package's samplers over a user's own batch sampler or iterable dataset deal through it.
 *
 * Differences from Accelerate, on purpose: accel_dealer_length is the number of batches this rank
 * really yields, in every mode; split_batches needs a batch size divisible by num_processes.
 *
 * Thread safety: a dealer is used by one thread at a time; different dealers are independent. */
#ifndef ACCEL_DEALING_H
#define ACCEL_DEALING_H

#include "accel/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_dealer accel_dealer_t;

/* A dealer of BatchSamplerShard's batches: base batches of batch_size indices (0: dynamic batch sizes,
 * a plain list of batches, whose whole early batches pad the last round), the sampler's drop_last, dealt
 * round-robin (or, with split_batches, a contiguous slice of each), the last round completed from the
 * first batches with even_batches. Free with accel_dealer_free. Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (batch_size < 0; num_processes < 1; process_index outside [0,
 * num_processes); split_batches with a batch size of 0 or one not divisible by num_processes; a flag
 * not 0 or 1). */
ACCEL_API ACCEL_NODISCARD int accel_dealer_new_shard(accel_dealer_t **out, int64_t batch_size, int drop_last,
                                                     int64_t num_processes, int64_t process_index,
                                                     int split_batches, int even_batches);

/* A dealer of IterableDatasetShard's batches: every rank reads the whole stream (push the positions of
 * its items), cuts it into global batches (batch_size * num_processes items, batch_size with
 * split_batches) and yields its contiguous slice of each; without drop_last the last global batch is
 * completed with the first one's items. Errors: as accel_dealer_new_shard (batch_size < 1 too). */
ACCEL_API ACCEL_NODISCARD int accel_dealer_new_iterable(accel_dealer_t **out, int64_t batch_size, int drop_last,
                                                        int64_t num_processes, int64_t process_index,
                                                        int split_batches);

/* A dealer of DataLoaderDispatcher's batches: the base batches are rank 0's loader's; each step joins
 * num_processes of them (one with split_batches; a last group short of batches too, unless drop_last)
 * and every rank takes its equal contiguous part; without drop_last a last step whose rows do not divide
 * evenly is first completed with the first num_processes rows of the first step. Errors: as
 * accel_dealer_new_shard. */
ACCEL_API ACCEL_NODISCARD int accel_dealer_new_dispatch(accel_dealer_t **out, int64_t num_processes,
                                                        int64_t process_index, int split_batches, int drop_last);

/* Frees the dealer; NULL is ignored. */
ACCEL_API void accel_dealer_free(accel_dealer_t *dealer);

/* Feeds the next base batch: count indices (for an iterable dealer, the positions of the next count
 * items; any count). The indices are copied. Errors: ACCEL_ERR_NULL_ARGUMENT (dealer; indices with a
 * non-zero count); ACCEL_ERR_INVALID_ARGUMENT (a shard dealer's batch longer than its batch size);
 * ACCEL_ERR_INVALID_STATE (after accel_dealer_finish). */
ACCEL_API ACCEL_NODISCARD int accel_dealer_push(accel_dealer_t *dealer, const int64_t *indices, size_t count);

/* Ends the epoch: queues what this rank yields after the last base batch (leftovers, padding, the
 * last step). Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (called twice). */
ACCEL_API ACCEL_NODISCARD int accel_dealer_finish(accel_dealer_t *dealer);

/* The next batch this rank yields: *has_batch 1 and *indices / *count the batch, owned by the dealer and
 * valid until the next call on it; *has_batch 0 when none is queued (push more, or the epoch is over
 * after accel_dealer_finish). Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_dealer_next(accel_dealer_t *dealer, const int64_t **indices, size_t *count,
                                                int *has_batch);

/* *out receives how many batches this rank yields for base_len base batches (for an iterable dealer,
 * stream items), the last of last_batch_size indices (read by a shard dealer of a fixed batch size only:
 * in [1, batch_size] when base_len > 0). Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT
 * (base_len < 0; last_batch_size out of range; a short last batch with drop_last). */
ACCEL_API ACCEL_NODISCARD int accel_dealer_length(const accel_dealer_t *dealer, int64_t base_len,
                                                  int64_t last_batch_size, int64_t *out);

/* *out receives gather_for_metrics' remainder after accel_dealer_finish: for a dispatch dealer the real
 * rows of the last step (before completion), -1 when there was no step; -1 for the other kinds.
 * Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_dealer_remainder(const accel_dealer_t *dealer, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
