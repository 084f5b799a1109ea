// The one dtype table: ACCEL_DTYPE_* codes as the C header pins them, and the names the file formats use.
#include "core/dtype.hpp"

#include <gtest/gtest.h>

#include "accel/tensor.h"
#include "core/error.hpp"

namespace accel {
namespace {

TEST(Dtype, CodesAreTheOnesTheCHeaderPins) {
  const std::vector<std::pair<int32_t, at::ScalarType>> pinned = {
      {ACCEL_DTYPE_FLOAT32, at::kFloat}, {ACCEL_DTYPE_FLOAT64, at::kDouble}, {ACCEL_DTYPE_FLOAT16, at::kHalf},
      {ACCEL_DTYPE_BFLOAT16, at::kBFloat16}, {ACCEL_DTYPE_INT8, at::kChar}, {ACCEL_DTYPE_INT16, at::kShort},
      {ACCEL_DTYPE_INT32, at::kInt}, {ACCEL_DTYPE_INT64, at::kLong}, {ACCEL_DTYPE_UINT8, at::kByte},
      {ACCEL_DTYPE_BOOL, at::kBool},
  };
  ASSERT_EQ(dtype_table().size(), pinned.size());
  for (const auto& [code, type] : pinned) {
    SCOPED_TRACE(code);
    EXPECT_EQ(dtype_code(type), code);
    EXPECT_EQ(scalar_type_of(code), type);
    EXPECT_EQ(dtype_info(type).size, c10::elementSize(type));
  }
  EXPECT_EQ(dtype_code(at::kComplexFloat), 0);
  EXPECT_THROW(scalar_type_of(0), Error);
  EXPECT_THROW(scalar_type_of(11), Error);
  EXPECT_THROW(dtype_info(at::kComplexDouble), Error);
}

TEST(Dtype, SafetensorsNamesMatchExactly) {
  EXPECT_EQ(dtype_from_safetensors("F32")->type, at::kFloat);
  EXPECT_EQ(dtype_from_safetensors("BF16")->type, at::kBFloat16);
  EXPECT_EQ(dtype_from_safetensors("BOOL")->type, at::kBool);
  EXPECT_EQ(dtype_from_safetensors("f32"), nullptr);
  EXPECT_EQ(dtype_from_safetensors("F8_E4M3"), nullptr);
  EXPECT_EQ(dtype_from_safetensors(""), nullptr);
  EXPECT_EQ(safetensors_dtype_names(), "F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL");
}

TEST(Dtype, NpyDescrsNeedLittleEndianExceptForSingleBytes) {
  EXPECT_EQ(dtype_from_npy_descr("<f4")->type, at::kFloat);
  EXPECT_EQ(dtype_from_npy_descr("<i8")->type, at::kLong);
  EXPECT_EQ(dtype_from_npy_descr(">f4"), nullptr);
  EXPECT_EQ(dtype_from_npy_descr("|f4"), nullptr);
  for (const char* descr : {"|u1", "<u1", ">u1"}) EXPECT_EQ(dtype_from_npy_descr(descr)->type, at::kByte) << descr;
  EXPECT_EQ(dtype_from_npy_descr("|b1")->type, at::kBool);
  EXPECT_EQ(dtype_from_npy_descr("<c8"), nullptr);
  EXPECT_EQ(dtype_from_npy_descr(""), nullptr);
  EXPECT_EQ(dtype_from_npy_descr("<"), nullptr);
  EXPECT_EQ(npy_descrs(), "<f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 |b1");
}

}  // namespace
}  // namespace accel
