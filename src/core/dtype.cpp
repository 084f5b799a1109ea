#include "core/dtype.hpp"

#include "core/error.hpp"

namespace accel {

const std::vector<DtypeInfo>& dtype_table() {
  static const std::vector<DtypeInfo> table{
      {at::kFloat, 1, "float32", "F32", "<f4", 4},
      {at::kDouble, 2, "float64", "F64", "<f8", 8},
      {at::kHalf, 3, "float16", "F16", "<f2", 2},
      {at::kBFloat16, 4, "bfloat16", "BF16", nullptr, 2},
      {at::kChar, 5, "int8", "I8", "|i1", 1},
      {at::kShort, 6, "int16", "I16", "<i2", 2},
      {at::kInt, 7, "int32", "I32", "<i4", 4},
      {at::kLong, 8, "int64", "I64", "<i8", 8},
      {at::kByte, 9, "uint8", "U8", "|u1", 1},
      {at::kBool, 10, "bool", "BOOL", "|b1", 1},
  };
  return table;
}

const DtypeInfo& dtype_info(at::ScalarType type) {
  for (const DtypeInfo& info : dtype_table()) {
    if (info.type == type) return info;
  }
  fail(Code::Dtype, std::string("dtype ") + c10::toString(type) + " is not supported (supported: " +
                        safetensors_dtype_names() + ")");
}

int32_t dtype_code(at::ScalarType type) {
  for (const DtypeInfo& info : dtype_table()) {
    if (info.type == type) return info.code;
  }
  return 0;
}

at::ScalarType scalar_type_of(int32_t code) {
  for (const DtypeInfo& info : dtype_table()) {
    if (info.code == code) return info.type;
  }
  fail(Code::Dtype, "unknown dtype code " + std::to_string(code) + " (expected an ACCEL_DTYPE_* value)");
}

const DtypeInfo* dtype_from_safetensors(std::string_view name) {
  for (const DtypeInfo& info : dtype_table()) {
    if (name == info.safetensors) return &info;
  }
  return nullptr;
}

const DtypeInfo* dtype_from_npy_descr(std::string_view descr) {
  if (descr.empty()) return nullptr;
  const char order = descr[0];
  for (const DtypeInfo& info : dtype_table()) {
    if (info.npy_descr == nullptr || descr.substr(1) != info.npy_descr + 1) continue;
    if (order == '<' || (info.size == 1 && (order == '|' || order == '>'))) return &info;
  }
  return nullptr;
}

std::string safetensors_dtype_names() {
  std::string out;
  for (const DtypeInfo& info : dtype_table()) out += (out.empty() ? "" : " ") + std::string(info.safetensors);
  return out;
}

std::string npy_descrs() {
  std::string out;
  for (const DtypeInfo& info : dtype_table()) {
    if (info.npy_descr != nullptr) out += (out.empty() ? "" : " ") + std::string(info.npy_descr);
  }
  return out;
}

}  // namespace accel
