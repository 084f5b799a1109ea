// .npy files (format versions 1.0, 2.0 and 3.0), read in place: the file is mapped and only its header
// is parsed; the array's bytes are paged in when a caller touches them.
//
// Supported descr codes: <f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 |b1 (core/dtype.cpp; any byte-order mark is
// accepted for the one-byte types). Errors name the file:
//   Error(Io)               the file cannot be opened or mapped (formats/mapped_file.hpp)
//   Error(Dtype)            big-endian, structured or otherwise unsupported dtypes
//   Error(InvalidArgument)  empty file, bad magic or version, malformed header, fortran_order True,
//                           truncated payload. Bytes after the payload are ignored, as numpy ignores them.
// Objects are immutable after construction, so concurrent reads from several threads are safe.
#pragma once

#include <cstddef>
#include <string>

#include "formats/array_view.hpp"
#include "formats/mapped_file.hpp"

namespace accel::formats {

// The array of a whole .npy file held in bytes[0, size): its view points into `bytes`, and is named
// `path`, which the errors name too.
ArrayView parse_npy(const unsigned char* bytes, size_t size, const std::string& path);

class NpyFile {
 public:
  explicit NpyFile(const std::string& path);

  const ArrayView& array() const { return array_; }
  const MappedFile& file() const { return file_; }

 private:
  MappedFile file_;
  ArrayView array_;
};

}  // namespace accel::formats
