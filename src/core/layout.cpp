#include "core/layout.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace accel {

std::string shape_string(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t d = 0; d < sizes.size(); ++d) out += (d > 0 ? ", " : "") + std::to_string(sizes[d]);
  return out + "]";
}

int64_t checked_numel(c10::IntArrayRef sizes, const std::string& what) {
  int64_t product_of_nonzero = 1;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      fail(Code::InvalidArgument,
           what + ": size " + std::to_string(sizes[d]) + " in dim " + std::to_string(d) + " is negative");
    }
    if (__builtin_mul_overflow(product_of_nonzero, std::max<int64_t>(sizes[d], 1), &product_of_nonzero)) {
      fail(Code::InvalidArgument, what + ": size of shape " + shape_string(sizes) + " overflows int64");
    }
    empty = empty || sizes[d] == 0;
  }
  return empty ? 0 : product_of_nonzero;
}

std::vector<int64_t> contiguous_strides(c10::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(sizes[d], 1);
  return strides;
}

int64_t checked_storage_bytes(c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t storage_offset,
                              size_t element_size, const std::string& what) {
  if (strides.size() != sizes.size()) {
    fail(Code::InvalidArgument,
         what + ": " + std::to_string(strides.size()) + " strides for " + std::to_string(sizes.size()) + " dims");
  }
  const int64_t numel = checked_numel(sizes, what);
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] < 0) {
      fail(Code::InvalidArgument,
           what + ": stride " + std::to_string(strides[d]) + " in dim " + std::to_string(d) + " is negative");
    }
  }
  if (storage_offset < 0) {
    fail(Code::InvalidArgument, what + ": storage offset " + std::to_string(storage_offset) + " is negative");
  }
  if (numel == 0) return 0;
  int64_t elements = storage_offset;
  bool overflowed = __builtin_add_overflow(elements, 1, &elements);
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t reach = 0;
    overflowed = overflowed || __builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
                 __builtin_add_overflow(elements, reach, &elements);
  }
  int64_t bytes = 0;
  overflowed = overflowed || __builtin_mul_overflow(elements, static_cast<int64_t>(element_size), &bytes);
  if (overflowed) {
    const std::string offset = storage_offset != 0 ? " and storage offset " + std::to_string(storage_offset) : "";
    fail(Code::InvalidArgument, what + ": the bytes reached by shape " + shape_string(sizes) + " with strides " +
                                    shape_string(strides) + offset + " overflow int64");
  }
  return bytes;
}

}  // namespace accel
