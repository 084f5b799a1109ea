/* accel: version numbers. CMake reads the three macros below to name the library and its SONAME. */
#ifndef ACCEL_VERSION_H
#define ACCEL_VERSION_H

#include "accel/common.h"

#define ACCEL_VERSION_MAJOR 0
#define ACCEL_VERSION_MINOR 2
#define ACCEL_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH", spelled from the three numbers above so that it can never disagree with them. */
#define ACCEL_VERSION_STRINGIFY_(x) #x
#define ACCEL_VERSION_STRINGIFY(x) ACCEL_VERSION_STRINGIFY_(x)
#define ACCEL_VERSION_STRING                                                                    \
  ACCEL_VERSION_STRINGIFY(ACCEL_VERSION_MAJOR) "." ACCEL_VERSION_STRINGIFY(ACCEL_VERSION_MINOR) "." \
  ACCEL_VERSION_STRINGIFY(ACCEL_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library loaded at run time (may differ from the macros a program was compiled with).
 * Never fail; thread-safe. */
ACCEL_API int accel_version_major(void);
ACCEL_API int accel_version_minor(void);
ACCEL_API int accel_version_patch(void);
/* "MAJOR.MINOR.PATCH"; static storage owned by the library. */
ACCEL_API const char *accel_version_string(void);
/* Version of LibTorch the library was built against, e.g. "1.13.0"; static storage. */
ACCEL_API const char *accel_version_torch(void);

/* Whether a feature was compiled in: name is one of "gloo", "nccl", "cuda", "mpi".
 * Returns 1 (compiled in), 0 (not compiled in or unknown name, including NULL). Thread-safe. */
ACCEL_API int accel_version_has_feature(const char *name);
/* Comma-separated list of the compiled-in features, e.g. "gloo"; static storage. Thread-safe. */
ACCEL_API const char *accel_version_features(void);

#ifdef __cplusplus
}
#endif
#endif
