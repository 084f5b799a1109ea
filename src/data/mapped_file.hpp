// Read-only, zero-copy access to arrays stored in .npy and .safetensors files.
//
// The file is memory-mapped and only its header is parsed; payload bytes are paged in by the kernel
// when, and only when, a caller touches them. Files larger than memory therefore work, and a data
// loader can read one sample or batch with row_slice without reading the rest of the file.
//
// Every failure is an accel::Error whose message starts with the file's path:
//   Code::Io               the file cannot be opened, inspected or mapped (the message has strerror)
//   Code::Dtype            the array's dtype is unknown, big-endian or otherwise unsupported
//   Code::InvalidArgument  the contents are malformed or inconsistent (empty file, bad header, truncated
//                          payload, overlapping tensors, fortran order, ...) or a name is not in the file
//   Code::OutOfRange       row_slice asked for rows outside the array
//
// What a mapping implies for callers:
//   - A view is valid while the object it came from lives; moving that object keeps it valid.
//   - Bytes are handed out raw, in the files' little-endian order (the host must be little-endian,
//     which the implementation checks at compile time).
//   - `data` is aligned only as well as the writer aligned it (numpy: 64 bytes; safetensors writers:
//     usually 8), so copy elements out with memcpy rather than casting to a typed pointer when the
//     writer is unknown.
//   - If another process truncates the file while it is mapped, touching the lost pages raises SIGBUS,
//     as with any mapping.
// Objects are immutable after construction, so concurrent reads from several threads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace accel::data {

// A whole file mapped PROT_READ / MAP_PRIVATE; unmapped on destruction. Empty files are refused
// (Code::InvalidArgument): neither format allows one, and mmap cannot map zero bytes.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // Null and 0 only for a moved-from object.
  const unsigned char* data() const { return static_cast<const unsigned char*>(base_); }
  size_t size() const { return size_; }

 private:
  void unmap() noexcept;

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
};

// One array inside a mapping. `data` points into the mapping (never a copy); nbytes is the product
// of shape times element_size (1 element for a 0-d array, 0 bytes when a dim is 0).
struct ArrayView {
  std::string name;   // the tensor's name; for a .npy file, the file's path
  std::string dtype;  // float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  size_t element_size = 0;
};

// A .npy file, format versions 1.0, 2.0 and 3.0. Supported descr codes: <f4 <f8 <f2 |i1 <i2 <i4 <i8
// |u1 |b1 ('<' is accepted for the one-byte types too). fortran_order True is refused
// (Code::InvalidArgument), as are big-endian and other dtypes (Code::Dtype). Bytes after the payload
// are ignored, as numpy ignores them.
class NpyFile {
 public:
  explicit NpyFile(const std::string& path);

  const ArrayView& array() const { return array_; }
  const MappedFile& file() const { return file_; }

 private:
  MappedFile file_;
  ArrayView array_;
};

// A .safetensors file: an 8-byte little-endian header length N, N bytes of JSON describing each
// tensor (dtype F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL, shape, data_offsets relative to the byte
// after the header) and an optional "__metadata__" map of strings, then the payload. The header may
// be padded with trailing whitespace. Gaps between tensors are allowed; overlaps are not.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  // Sorted by name (not file order), so lookups are binary searches and listings are stable.
  const std::vector<ArrayView>& arrays() const { return arrays_; }
  // Code::InvalidArgument naming the missing name and listing the available ones.
  const ArrayView& array(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const MappedFile& file() const { return file_; }

 private:
  MappedFile file_;
  std::vector<ArrayView> arrays_;
  std::map<std::string, std::string> metadata_;
};

// Rows [begin, begin + count) of `view` along dim 0, as a view into the same mapping: nothing is
// read or copied. Code::OutOfRange when the rows fall outside dim 0; Code::InvalidArgument for a 0-d
// view or one whose nbytes does not match its shape.
ArrayView row_slice(const ArrayView& view, int64_t begin, int64_t count);

}  // namespace accel::data
