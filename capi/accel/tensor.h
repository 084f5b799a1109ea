/* accel: tensor handles, and their exchange with other frameworks through DLPack.
 *
 * An accel_tensor_t refers to a LibTorch tensor. accel_tensor_from_dlpack and accel_tensor_to_dlpack
 * never copy: the handle and the DLPack tensor share memory. accel_tensor_from_buffer copies, for C
 * callers holding plain arrays.
 *
 * The DLPack structs are only forward-declared here (LibTorch 1.13 ships its own dlpack.h with the same
 * include guard as upstream's); include the dlpack.h of your choice to build or read them.
 *
 * Streams: a DLPack struct carries none. accel never synchronises the device around an exchange and
 * queues its own work on the calling thread's current CUDA stream, so work queued on that stream before
 * an exchange is ordered before accel's (and the other way round). A producer that wrote on another
 * stream must synchronise with the current one first, as for any DLPack exchange without a stream.
 *
 * Thread safety: a tensor handle may be read from several threads; writes to its data (including a
 * broadcast into it) must not race with other uses. */
#ifndef ACCEL_TENSOR_H
#define ACCEL_TENSOR_H

#include "accel/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;
typedef struct accel_tensor accel_tensor_t;

/* Element types; values pinned forever. */
#define ACCEL_DTYPE_FLOAT32 1
#define ACCEL_DTYPE_FLOAT64 2
#define ACCEL_DTYPE_FLOAT16 3
#define ACCEL_DTYPE_BFLOAT16 4
#define ACCEL_DTYPE_INT8 5
#define ACCEL_DTYPE_INT16 6
#define ACCEL_DTYPE_INT32 7
#define ACCEL_DTYPE_INT64 8
#define ACCEL_DTYPE_UINT8 9
#define ACCEL_DTYPE_BOOL 10

/* Largest number of dimensions a tensor handle accepts. */
#define ACCEL_TENSOR_MAX_DIMS 64

/* Wraps a DLPack tensor without copying. On success the handle takes ownership of *managed and calls
 * its deleter once the last user of the memory is gone; on failure ownership stays with the caller.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (negative ndim or a dimension, NULL data
 * with elements, NULL shape, more than ACCEL_TENSOR_MAX_DIMS dimensions, negative strides, a byte size or
 * offset that overflows; the message names the field); ACCEL_ERR_DTYPE (a DLPack type LibTorch cannot
 * hold); ACCEL_ERR_UNSUPPORTED (a device type this build lacks). */
ACCEL_API ACCEL_NODISCARD int accel_tensor_from_dlpack(accel_tensor_t **out, struct DLManagedTensor *managed);

/* Exports the tensor as DLPack without copying. The caller owns *out and must call (*out)->deleter(*out)
 * exactly once; the memory stays valid until then, even after the handle is freed.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_DTYPE (bool tensors cannot be exported by LibTorch 1.13). */
ACCEL_API ACCEL_NODISCARD int accel_tensor_to_dlpack(struct DLManagedTensor **out, const accel_tensor_t *tensor);

/* Creates a CPU tensor holding a copy of ndim-dimensional, C-contiguous data of the given dtype.
 * data may be NULL only when the shape has no elements. Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_DTYPE (unknown dtype); ACCEL_ERR_INVALID_ARGUMENT (negative dimension, ndim too large, a byte
 * size that overflows); ACCEL_ERR_OUT_OF_MEMORY (the copy cannot be allocated). */
ACCEL_API ACCEL_NODISCARD int accel_tensor_from_buffer(accel_tensor_t **out, const void *data, int32_t dtype,
                                                       const int64_t *shape, size_t ndim);

/* Releases the handle; NULL is a no-op. Memory shared with a DLPack consumer stays valid for it. */
ACCEL_API void accel_tensor_free(accel_tensor_t *tensor);

/* Accessors: never fail; a NULL tensor gives 0 (NULL for shape, "" for device). */
ACCEL_API size_t accel_tensor_ndim(const accel_tensor_t *tensor);
/* Pointer to ndim sizes, owned by the handle, valid while it lives. */
ACCEL_API const int64_t *accel_tensor_shape(const accel_tensor_t *tensor);
ACCEL_API int64_t accel_tensor_numel(const accel_tensor_t *tensor);
/* One of ACCEL_DTYPE_*, or 0 for a type without a constant. */
ACCEL_API int32_t accel_tensor_dtype(const accel_tensor_t *tensor);
/* Bytes of one element. */
ACCEL_API size_t accel_tensor_element_size(const accel_tensor_t *tensor);
/* "cpu" or "cuda:<n>"; owned by the handle. */
ACCEL_API const char *accel_tensor_device(const accel_tensor_t *tensor);

/* Pointer to the tensor's memory, for CPU tensors that are contiguous. The memory is owned by the
 * tensor; it stays valid while the handle (or a DLPack export of it) lives.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (not on the CPU, or not contiguous). */
ACCEL_API ACCEL_NODISCARD int accel_tensor_data(const accel_tensor_t *tensor, void **out);

/* Copies the elements, in C order, into dst of capacity bytes (from any device); dst may be NULL when the
 * tensor has no elements.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (capacity smaller than numel * element size). */
ACCEL_API ACCEL_NODISCARD int accel_tensor_copy_to_buffer(const accel_tensor_t *tensor, void *dst, size_t capacity);

#ifdef __cplusplus
}
#endif
#endif
