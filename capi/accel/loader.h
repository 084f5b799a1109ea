/* accel: datasets and prepared data loaders (Accelerate's prepare(dataloader), DataLoaderShard).
 *
 * A loader re-creates, for this rank, the batches Python Accelerate would give it: the sampler order
 * (sequential, or a permutation that is the same on every rank: rank 0's generator state is broadcast
 * at the start of each epoch, or with use_seedable_sampler the seed is data_seed + epoch), batches of
 * batch_size, dealt to the ranks round-robin (or split, with split_batches), padded from the start of
 * the dataset so that every rank gets as many batches (even_batches). Batches arrive on the state's
 * device. With one process nothing is sharded. The loader's settings are the data keys of
 * accel/options.h.
 *
 * Shuffled orders are torch's to the bit: without data_seed the generator starts at torch's default seed,
 * like the fresh torch.Generator() Accelerate gives the sampler, and each epoch draws torch 1.13's
 * RandomSampler's two permutations (the second, sliced to nothing, only advances the generator), so
 * epoch e's order is the one torch.utils.data.RandomSampler(generator=torch.Generator()) gives in its
 * pass e, on any number of processes (Accelerate itself, on one process, seeds from the global RNG).
 *
 * Differences from Accelerate, on purpose: accel_loader_length is the number of batches this rank
 * really yields; a loader's saved state holds the epoch, the generator state and the position in the
 * epoch, so a resumed run continues exactly where it stopped.
 *
 * Thread safety: a loader is used by one thread at a time. Starting an epoch with shuffle on (and no
 * seedable sampler) is collective: every rank must call accel_loader_next in step. */
#ifndef ACCEL_LOADER_H
#define ACCEL_LOADER_H

#include "accel/common.h"
#include "accel/options.h"
#include "accel/state.h"
#include "accel/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_dataset accel_dataset_t;
typedef struct accel_loader accel_loader_t;
typedef struct accel_batch accel_batch_t;
typedef struct accel_sample accel_sample_t;

/* A dataset over count named tensors sharing dim 0 (one sample per row). The tensors are shared, not
 * copied: the dataset keeps them alive, the caller may free its handles. Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (no tensors, an empty or repeated name, a 0-d tensor, dim-0 sizes that differ:
 * named). */
ACCEL_API ACCEL_NODISCARD int accel_dataset_from_tensors(accel_dataset_t **out, const char *const *names,
                                                         accel_tensor_t *const *tensors, size_t count);

/* get_item fills sample with the named tensors of item index (accel_sample_add) and returns 0; any other
 * return aborts the batch with ACCEL_ERR_CALLBACK naming the index. Items are stacked into batches:
 * they must have the same names, shapes and dtypes (ACCEL_ERR_SHAPE_MISMATCH / ACCEL_ERR_DTYPE naming
 * the item and field otherwise). payload is passed back untouched; it must outlive the dataset. */
typedef int (*accel_get_item_fn)(int64_t index, accel_sample_t *sample, void *payload);

/* A map-style dataset of length items produced by get_item. Errors: ACCEL_ERR_NULL_ARGUMENT,
 * ACCEL_ERR_INVALID_ARGUMENT (negative length). */
ACCEL_API ACCEL_NODISCARD int accel_dataset_from_callback(accel_dataset_t **out, int64_t length,
                                                          accel_get_item_fn get_item, void *payload);

/* Adds a named tensor to the sample being built in a get_item callback; the sample shares the tensor.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (name empty or already in the sample). */
ACCEL_API ACCEL_NODISCARD int accel_sample_add(accel_sample_t *sample, const char *name, const accel_tensor_t *tensor);

/* start_epoch restarts the stream for an epoch (Accelerate's dataset.set_epoch, then a new iterator);
 * next_item fills sample with the next item and returns 0, or sets *end to 1 (sample untouched) at the
 * end of the stream. A non-zero return aborts with ACCEL_ERR_CALLBACK. */
typedef int (*accel_start_epoch_fn)(int64_t epoch, void *payload);
typedef int (*accel_next_item_fn)(accel_sample_t *sample, int *end, void *payload);

/* An iterable dataset. Its loaders dispatch by default (rank 0 reads the stream and sends each rank its
 * rows); with dispatch_batches=false every rank reads the whole stream and keeps its slice of each global
 * batch (Accelerate's IterableDatasetShard). A stream that already reads only this rank's shard is
 * declared with the loader option already_sharded: each rank then batches its own items, in order, and
 * nothing is sharded again nor dispatched (Accelerate would keep 1/num_processes of each shard, silently
 * dropping the rest); nothing is padded either, so ranks whose streams differ in length yield different
 * numbers of batches. Items are stacked like those of accel_dataset_from_callback.
 * shuffle is refused for it. payload must outlive the dataset. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_dataset_from_iterable(accel_dataset_t **out, accel_start_epoch_fn start_epoch,
                                                          accel_next_item_fn next_item, void *payload);

/* A dataset over a memory-mapped .safetensors file: each tensor in it is a field (names as in the file),
 * all sharing dim 0. Only the rows a batch needs are read, so files larger than memory work.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO (cannot open or map); ACCEL_ERR_INVALID_ARGUMENT (a
 * corrupt or truncated file, dim-0 sizes that differ, a tensor named ""; the message names the file);
 * ACCEL_ERR_DTYPE. */
ACCEL_API ACCEL_NODISCARD int accel_dataset_from_safetensors(accel_dataset_t **out, const char *path);

/* A dataset over count memory-mapped .npy files, one field each (names[i] from paths[i]). Same errors (an
 * empty names[i] too). */
ACCEL_API ACCEL_NODISCARD int accel_dataset_from_npy(accel_dataset_t **out, const char *const *names,
                                                     const char *const *paths, size_t count);

/* Number of samples; -1 for an iterable dataset, 0 for NULL. */
ACCEL_API int64_t accel_dataset_length(const accel_dataset_t *dataset);
ACCEL_API void accel_dataset_free(accel_dataset_t *dataset);

/* Prepares a loader over dataset for this process of state, with options' data keys (NULL: defaults
 * and ACCEL_* environment). The loader keeps the state and the dataset alive.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_BAD_OPTION_VALUE; ACCEL_ERR_INVALID_ARGUMENT (split_batches
 * with a batch_size that is not a multiple of the number of processes). */
ACCEL_API ACCEL_NODISCARD int accel_loader_new(accel_loader_t **out, accel_state_t *state, accel_dataset_t *dataset,
                                               const accel_options_t *options);
/* A loader over a given list of batches (dynamic batch sizes, like a list passed as a DataLoader's
 * batch_sampler): batch b holds batch_sizes[b] dataset indices, taken in turn from indices. The batches
 * are dealt to the ranks as Accelerate deals them (even_batches pads by reusing the first batches).
 * shuffle and split_batches are refused (ACCEL_ERR_INVALID_ARGUMENT), as is an empty batch; an index
 * outside the dataset is ACCEL_ERR_OUT_OF_RANGE. As in Accelerate, accel_state_gather_for_metrics then keeps
 * every row (the remainder is -1).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (see above); ACCEL_ERR_OUT_OF_RANGE;
 * ACCEL_ERR_OUT_OF_MEMORY (batch sizes that add up to more indices than the machine's memory holds, refused
 * before anything is allocated); ACCEL_ERR_UNKNOWN_OPTION; ACCEL_ERR_BAD_OPTION_VALUE. */
ACCEL_API ACCEL_NODISCARD int accel_loader_new_with_batches(accel_loader_t **out, accel_state_t *state,
                                                            accel_dataset_t *dataset, const int64_t *indices,
                                                            const size_t *batch_sizes, size_t num_batches,
                                                            const accel_options_t *options);
ACCEL_API void accel_loader_free(accel_loader_t *loader);

/* The next batch of the epoch in *out (owned by the caller, accel_batch_free), or *out = NULL when the
 * epoch is over; the next call then starts the next epoch. Errors: ACCEL_ERR_NULL_ARGUMENT, the dataset's
 * errors (ACCEL_ERR_CALLBACK, ACCEL_ERR_OUT_OF_RANGE, ...; with dispatched batches rank 0's read error
 * reaches every rank, with its code and message), collective errors when an epoch starts;
 * ACCEL_ERR_INVALID_STATE when the epoch to start is INT64_MAX (set by accel_loader_set_epoch or a loaded
 * state), as the epoch after it could not be numbered. */
ACCEL_API ACCEL_NODISCARD int accel_loader_next(accel_loader_t *loader, accel_batch_t **out);

/* *out receives the number of batches this rank yields in a full epoch (less those skipped by
 * accel_loader_skip_first_batches), or -1 for an iterable dataset, whose length is unknown.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (a dataset whose size with these settings
 * cannot be dealt, e.g. a batch count that overflows). */
ACCEL_API ACCEL_NODISCARD int accel_loader_length(const accel_loader_t *loader, int64_t *out);
/* 1 while the batch last returned is the last of the epoch (Accelerate's end_of_dataloader). */
ACCEL_API int accel_loader_end_of_dataloader(const accel_loader_t *loader);
/* Real samples in the last global batch, used by accel_state_gather_for_metrics; -1 when unknown (drop_last). */
ACCEL_API int64_t accel_loader_remainder(const accel_loader_t *loader);
/* The epoch the loader is in (or starts next). */
ACCEL_API int64_t accel_loader_epoch(const accel_loader_t *loader);

/* Between epochs only (ACCEL_ERR_INVALID_STATE during one): the number of the next epoch.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (during an epoch). */
ACCEL_API ACCEL_NODISCARD int accel_loader_set_epoch(accel_loader_t *loader, int64_t epoch);
/* Between epochs only: the next epoch skips its first n batches of this rank. accel counts this rank's
 * batches in every mode (Accelerate counted base batches for a map-style dispatcher).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_STATE (during an epoch);
 * ACCEL_ERR_INVALID_ARGUMENT (n < 0). */
ACCEL_API ACCEL_NODISCARD int accel_loader_skip_first_batches(accel_loader_t *loader, int64_t n);

/* The loader's position (epoch, generator state, batches already yielded) as bytes: *data (owned by the
 * loader, valid until the next call on it) and *size.
 * Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_loader_save_state(accel_loader_t *loader, const void **data, size_t *size);
/* Restores a position saved by accel_loader_save_state over the same dataset and settings; the next
 * batches are exactly those that remained. Between epochs only. Errors: ACCEL_ERR_INVALID_ARGUMENT for a
 * corrupt, truncated or foreign state (the loader is unchanged). */
ACCEL_API ACCEL_NODISCARD int accel_loader_load_state(accel_loader_t *loader, const void *data, size_t size);

/* A batch: named tensors sharing dim 0, in the dataset's order. */
ACCEL_API size_t accel_batch_count(const accel_batch_t *batch);
/* Name of entry index, owned by the batch; NULL when out of range. */
ACCEL_API const char *accel_batch_name(const accel_batch_t *batch, size_t index);
/* A new handle (sharing memory) for the tensor called name. Errors: ACCEL_ERR_NULL_ARGUMENT,
 * ACCEL_ERR_INVALID_ARGUMENT (no such name; the message lists the names). */
ACCEL_API ACCEL_NODISCARD int accel_batch_get(const accel_batch_t *batch, const char *name, accel_tensor_t **out);
ACCEL_API void accel_batch_free(accel_batch_t *batch);

#ifdef __cplusplus
}
#endif
#endif
