// A view of one array inside a file mapping (the shape arithmetic it relies on is in formats/header.hpp).
//
// What a view implies for callers:
//   - It is valid while the object it came from (NpyFile, SafetensorsFile) lives; moving that object
//     keeps it valid.
//   - Bytes are handed out raw, in the files' little-endian order (the host must be little-endian,
//     which array_view.cpp checks at compile time).
//   - `data` is aligned only as well as the writer aligned it (numpy: 64 bytes; safetensors writers:
//     usually 8), so copy elements out with memcpy rather than casting to a typed pointer.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/header.hpp"

namespace accel::formats {

// `data` points into a mapping (never a copy); nbytes is the product of shape times the element size
// (1 element for a 0-d array, 0 bytes when a dim is 0).
struct ArrayView {
  std::string name;  // the tensor's name; for a .npy file, the file's path
  at::ScalarType dtype = at::kByte;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Rows [begin, begin + count) of `view` along dim 0, as a view into the same mapping: nothing is
// read or copied. Error(OutOfRange) when the rows fall outside dim 0; Error(InvalidArgument) for a 0-d
// view or one whose nbytes does not match its shape.
ArrayView row_slice(const ArrayView& view, int64_t begin, int64_t count);

}  // namespace accel::formats
