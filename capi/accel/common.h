/* accel: definitions every module header shares: the visibility macro, error codes, the last error. */
#ifndef ACCEL_COMMON_H
#define ACCEL_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define ACCEL_API __attribute__((visibility("default")))
#define ACCEL_NODISCARD __attribute__((warn_unused_result))
#else
#define ACCEL_API
#define ACCEL_NODISCARD
#endif

/* Fallible functions return ACCEL_OK or one of these negative codes. The values are pinned forever;
 * new codes are only appended. The message of the last failure is read with accel_error_last(). */
#define ACCEL_OK 0
#define ACCEL_ERR_INVALID_ARGUMENT (-1) /* a value outside what the function accepts */
#define ACCEL_ERR_NULL_ARGUMENT (-2)    /* a required handle or out-parameter is NULL */
#define ACCEL_ERR_UNKNOWN_OPTION (-3)   /* an option key that does not exist */
#define ACCEL_ERR_BAD_OPTION_VALUE (-4) /* an option value of the wrong type or out of range */
#define ACCEL_ERR_DTYPE (-5)            /* a dtype the operation does not support */
#define ACCEL_ERR_SHAPE_MISMATCH (-6)   /* shapes differ across processes (or from what is expected) */
#define ACCEL_ERR_TIMEOUT (-7)          /* a rendezvous or collective did not complete in time */
#define ACCEL_ERR_PEER_FAILED (-8)      /* another process failed or went away during a collective */
#define ACCEL_ERR_INVALID_STATE (-9)    /* the object cannot do this now (shut down, broken group) */
#define ACCEL_ERR_ENVIRONMENT (-10)     /* a launch variable (RANK, WORLD_SIZE, ...) is missing or wrong */
#define ACCEL_ERR_IO (-11)              /* a file or socket operation failed */
#define ACCEL_ERR_CALLBACK (-12)        /* a user callback returned non-zero */
#define ACCEL_ERR_UNSUPPORTED (-13)     /* not available in this build or on this device */
#define ACCEL_ERR_OUT_OF_RANGE (-14)    /* an index outside its bounds */
#define ACCEL_ERR_TORCH (-15)           /* LibTorch reported an error; the message is LibTorch's */
#define ACCEL_ERR_OUT_OF_MEMORY (-16)   /* an allocation failed */
#define ACCEL_ERR_INTERNAL (-17)        /* anything else; please report it */

#ifdef __cplusplus
extern "C" {
#endif

/* Message describing the last failure of an accel call on the calling thread. Never NULL ("" when no
 * call has failed yet). Only failures write it: a successful call (a *_free included) leaves it as it
 * was, so a garbage collector freeing handles between a failed call and the read does not erase it.
 * Owned by the library, valid until the next failing accel call on this thread. Thread-safe (the
 * storage is thread-local). */
ACCEL_API const char *accel_error_last(void);

/* Symbolic name of an error code ("ACCEL_ERR_TIMEOUT"), or "ACCEL_ERR_UNKNOWN_CODE"; static storage. */
ACCEL_API const char *accel_error_name(int code);

/* Releases a string that an accel function returned as owned by the caller (accel_options_dump).
 * NULL is a no-op. */
ACCEL_API void accel_string_free(char *text);

#ifdef __cplusplus
}
#endif
#endif
