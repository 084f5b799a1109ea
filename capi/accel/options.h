/* accel: the options object, an opaque set of key/value settings handed to constructors.
 *
 * Precedence when a state is created: built-in default < ACCEL_<KEY> environment variable < value set
 * here. Keys (environment variable in brackets):
 *   use_cpu          bool    force the CPU even when CUDA is present            [ACCEL_USE_CPU]      default false
 *   mixed_precision  string  "no", "fp16" or "bf16"                             [ACCEL_MIXED_PRECISION] default "no"
 *   device           string  explicit device, e.g. "cpu" or "cuda:1"; "" = auto [ACCEL_DEVICE]       default ""
 *   backend          string  "auto", "gloo" or "nccl"                           [ACCEL_BACKEND]      default "auto"
 *   timeout_s        double  rendezvous and collective timeout in seconds (> 0, at most 1e9; larger
 *                            values are ACCEL_ERR_BAD_OPTION_VALUE)        [ACCEL_TIMEOUT_S]    default 1800
 *   check_shapes     bool    compare shapes across ranks before collectives     [ACCEL_CHECK_SHAPES] default true
 * Data loader keys (read by accel_loader_new; Accelerate's DataLoaderConfiguration and DataLoader arguments):
 *   batch_size       int     samples per batch (per process unless split_batches) [ACCEL_BATCH_SIZE] default 1
 *   shuffle          bool    a new random order every epoch                      [ACCEL_SHUFFLE]       default false
 *   drop_last        bool    drop the last incomplete batch                      [ACCEL_DROP_LAST]     default false
 *   split_batches    bool    batch_size is the global batch, split over ranks    [ACCEL_SPLIT_BATCHES] default false
 *   even_batches     bool    pad from the start so every rank gets equal batches [ACCEL_EVEN_BATCHES]  default true
 *   dispatch_batches string "auto" (dispatch for iterable datasets only), "true" or "false": rank 0 reads
 *                            each global batch and sends every rank its part      [ACCEL_DISPATCH_BATCHES] default "auto"
 *   use_seedable_sampler bool order of epoch e = permutation seeded data_seed+e  [ACCEL_USE_SEEDABLE_SAMPLER] default false
 *   data_seed        int     seed of the shuffling generator; -1 = random        [ACCEL_DATA_SEED]     default -1
 *   non_blocking     bool    non-blocking copies to the device                   [ACCEL_NON_BLOCKING]  default false
 *   pin_memory       bool    page-locked batches before a CUDA copy              [ACCEL_PIN_MEMORY]    default false
 *   prefetch_threads int     threads reading batches ahead (map-style datasets that are not dispatched;
 *                            a get_item callback then runs on them, concurrently when there are several
 *                            threads); 0 = read in accel_loader_next
 *                                                                                [ACCEL_PREFETCH_THREADS] default 0
 *   prefetch_depth   int     batches read ahead of the one in use (> 0)          [ACCEL_PREFETCH_DEPTH] default 2
 * Booleans accept 1/0, true/false, yes/no, on/off, y/n, t/f (any case) as strings.
 *
 * Thread safety: an options object may be read from several threads at once (by constructors), but
 * setters must not race with any other use of the same object. */
#ifndef ACCEL_OPTIONS_H
#define ACCEL_OPTIONS_H

#include "accel/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_options accel_options_t;

/* Creates an empty options object (every key at its default). On success *out owns it; release it with
 * accel_options_free. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_options_new(accel_options_t **out);
/* Releases the object; NULL is a no-op. Objects created from these options do not need it any more. */
ACCEL_API void accel_options_free(accel_options_t *options);

/* Typed setters. Errors: ACCEL_ERR_NULL_ARGUMENT (options or key NULL), ACCEL_ERR_UNKNOWN_OPTION (the
 * message names the key and lists the known ones), ACCEL_ERR_BAD_OPTION_VALUE (wrong type for the key or
 * value out of range; the message names the key and the value). On error the object is unchanged. */
ACCEL_API ACCEL_NODISCARD int accel_options_set_bool(accel_options_t *options, const char *key, int value);
ACCEL_API ACCEL_NODISCARD int accel_options_set_int(accel_options_t *options, const char *key, int64_t value);
ACCEL_API ACCEL_NODISCARD int accel_options_set_double(accel_options_t *options, const char *key, double value);
ACCEL_API ACCEL_NODISCARD int accel_options_set_string(accel_options_t *options, const char *key, const char *value);
/* Sets any key from its text form ("true", "30", "bf16"), parsed by the key's type. Same errors. */
ACCEL_API ACCEL_NODISCARD int accel_options_set(accel_options_t *options, const char *key, const char *value);

/* Writes the configuration these options resolve to right now (defaults, then ACCEL_* environment,
 * then explicit values), one "key=value (source)" line per key, source being default, env or set.
 * *out points to a string owned by the options object, valid until the next call on it.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_BAD_OPTION_VALUE when an environment variable does not
 * parse (the message names the variable). */
ACCEL_API ACCEL_NODISCARD int accel_options_dump(const accel_options_t *options, const char **out);

#ifdef __cplusplus
}
#endif
#endif
