// .safetensors files, both directions: the reader maps a file and parses only its header; the writer
// saves tensors atomically. They live together, over one JSON layer (formats/json.hpp), so that what
// accel writes it can read back, and both follow one reading of the format. They sit in src/formats
// rather than in data (the reader's user) or ckpt (the writer's) so that neither area depends on the
// other, and so the fuzz build (tests/fuzz) compiles the parsers without the rest of the library.
//
// The layout: an 8-byte little-endian header length N, N bytes of JSON describing each tensor (dtype
// F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL, shape, data_offsets relative to the byte after the header)
// and an optional "__metadata__" map of strings, then the payload. The header may be padded with
// trailing whitespace. Gaps between tensors are allowed; overlaps are not.
//
// Reading errors name the file:
//   Error(Io)               the file cannot be opened or mapped (formats/mapped_file.hpp)
//   Error(Dtype)            a tensor's dtype is not one of the above
//   Error(InvalidArgument)  the contents are malformed or inconsistent (empty file, bad header length or
//                           JSON, truncated payload, overlapping tensors, a repeated name or key), or a
//                           name asked for is not in the file
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "core/named_tensors.hpp"
#include "formats/array_view.hpp"
#include "formats/mapped_file.hpp"

namespace accel::formats {

struct SafetensorsContents {
  std::vector<ArrayView> arrays;  // sorted by name (not file order): lookups are binary searches
  std::map<std::string, std::string> metadata;
};

// The tensors of a whole .safetensors file held in bytes[0, size); the views point into `bytes`.
// `path` names the file in errors.
SafetensorsContents parse_safetensors(const unsigned char* bytes, size_t size, const std::string& path);

// A mapped .safetensors file. Immutable after construction, so concurrent reads are safe.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::vector<ArrayView>& arrays() const { return contents_.arrays; }
  // Error(InvalidArgument) naming the missing name and listing the available ones.
  const ArrayView& array(const std::string& name) const;
  // Null when the file holds no tensor of that name.
  const ArrayView* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return contents_.metadata; }
  const MappedFile& file() const { return file_; }

 private:
  MappedFile file_;
  SafetensorsContents contents_;
};

// Writes `tensors` atomically: a reader sees the old file or the new one, never a partial write (the
// bytes go to a temporary file in the same directory, then rename). Tensors are written in name order,
// as contiguous CPU copies, with {"format": "pt"} and `metadata` in __metadata__; the payload starts
// 8-byte aligned. Throws Error(Io) naming the path on any failure (the old file, if any, is untouched);
// Error(Dtype) for a dtype safetensors cannot hold; Error(InvalidArgument) for a repeated name.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same contents into `file`, left for the caller to commit: several files made visible together.
void write_safetensors(AtomicFile& file, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

// One tensor of a file written in parts: its name, dtype and shape.
struct TensorHeader {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
};
TensorHeader header_of(const std::string& name, const at::Tensor& tensor);

// A .safetensors file written one tensor at a time, its payload in the order `entries` gives (the header,
// written first, says where each lies): for tensors that never exist all at once, as a sharded model's
// parameters gathered unit by unit. append() each entry's tensor in that order (a CPU copy is written:
// Error(InvalidArgument) for another dtype or shape than the next entry's, or one too many); finish() is
// Error(InvalidState) unless every entry came. The file stays the caller's to commit. Not thread-safe.
class SafetensorsStream {
 public:
  SafetensorsStream(AtomicFile& file, std::vector<TensorHeader> entries, const std::map<std::string, std::string>& metadata = {});
  void append(const at::Tensor& tensor);
  void finish() const;

 private:
  AtomicFile& file_;
  std::vector<TensorHeader> entries_;
  size_t next_ = 0;
};

// A CPU tensor holding a copy of the view's bytes: views may be unaligned for their dtype (array_view.hpp),
// so they are copied rather than wrapped.
at::Tensor copy_to_tensor(const ArrayView& view);

}  // namespace accel::formats
