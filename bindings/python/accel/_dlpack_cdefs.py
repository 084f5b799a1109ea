"""The DLPack structs that capi/accel/tensor.h only forward-declares, as LibTorch 1.13's ATen/dlpack.h
(DLPack 0.6) defines them: the binding builds and reads DLManagedTensor itself. The last section of the
generated _cdefs.py; tests/test_cdefs_match_headers.py compiles it against ATen/dlpack.h. Written by hand:
DLPack is not accel's ABI, so capi/gen does not generate it.
"""

DLPACK_SECTION = ("ATen/dlpack.h", """
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int device_id;
} DLDevice;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
""")
