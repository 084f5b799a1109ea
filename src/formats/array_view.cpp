#include "formats/array_view.hpp"

#include "core/error.hpp"

// Views hand out the files' little-endian bytes as they are; a big-endian host would misread them.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "accel::formats assumes a little-endian host");

namespace accel::formats {

ArrayView row_slice(const ArrayView& view, int64_t begin, int64_t count) {
  if (view.shape.empty()) fail(Code::InvalidArgument, view.name + ": row_slice needs a dim 0, but the array is 0-d");
  // Checking nbytes against the shape bounds every product below, even for a hand-built view.
  const auto nbytes = array_nbytes(view.shape, c10::elementSize(view.dtype));
  if (!nbytes || *nbytes != view.nbytes) {
    fail(Code::InvalidArgument, view.name + ": view's nbytes " + std::to_string(view.nbytes) +
                                    " does not match shape " + shape_string(view.shape));
  }
  const int64_t rows = view.shape[0];
  if (begin < 0 || count < 0 || begin > rows || count > rows - begin) {
    fail(Code::OutOfRange, view.name + ": rows begin=" + std::to_string(begin) + " count=" + std::to_string(count) +
                               " fall outside dim 0 of size " + std::to_string(rows));
  }
  const size_t row_bytes = rows == 0 ? 0 : view.nbytes / static_cast<size_t>(rows);
  ArrayView out = view;
  out.shape[0] = count;
  out.data = static_cast<const unsigned char*>(view.data) + static_cast<size_t>(begin) * row_bytes;
  out.nbytes = static_cast<size_t>(count) * row_bytes;
  return out;
}

}  // namespace accel::formats
