// The element types accel moves across its boundaries, and every name each boundary gives them: the
// ACCEL_DTYPE_* codes of the C ABI, the dtype strings of .safetensors, the descr strings of .npy.
// One table (dtype.cpp) so that adding a type, or checking which formats can carry one, is one edit.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

struct DtypeInfo {
  at::ScalarType type;
  int32_t code;             // ACCEL_DTYPE_* of capi/accel/tensor.h, pinned forever
  const char* name;         // how messages name it: "float32"
  const char* safetensors;  // "F32"
  const char* npy_descr;    // as numpy writes it: "<f4", "|u1"; null where numpy has no such type (bfloat16)
  size_t size;              // bytes per element
};

// Every supported type, in ACCEL_DTYPE_* order.
const std::vector<DtypeInfo>& dtype_table();

// The row of `type`; throws Error(Dtype) naming `type` when accel cannot carry it.
const DtypeInfo& dtype_info(at::ScalarType type);

// ACCEL_DTYPE_* code of a scalar type (0 when it has none), and back (Error(Dtype) when unknown).
int32_t dtype_code(at::ScalarType type);
at::ScalarType scalar_type_of(int32_t dtype_code);

// The row whose safetensors dtype string is `name` exactly; null when none is.
const DtypeInfo* dtype_from_safetensors(std::string_view name);

// The row described by a numpy descr. One-byte types match under any byte-order mark ('|', '<' or '>'
// describe the same bytes); wider ones only little-endian ('<'). Null otherwise, big-endian included.
const DtypeInfo* dtype_from_npy_descr(std::string_view descr);

// "F32 F64 ..." and "<f4 <f8 ...": what the formats accept, for error messages.
std::string safetensors_dtype_names();
std::string npy_descrs();

}  // namespace accel
