// The JSON header of a .safetensors file (formats/safetensors.hpp describes the layout), read without
// LibTorch: `accel checkpoint inspect` counts a checkpoint's tensors with it, and the reader of
// safetensors.hpp starts from it before it checks each entry against its dtype and the payload (with the
// extent checks below, which the CLI makes too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/files.hpp"
#include "formats/header.hpp"

namespace accel::formats {

// One tensor as the header describes it, unchecked: the dtype is a name, the offsets any integers.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> offsets;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order
  std::map<std::string, std::string> metadata;
  size_t data_start = 0;  // the payload's first byte: 8 + the header's length
};

// The header of the file held in bytes[0, size). Error(InvalidArgument) naming `path` when the file is
// too short, the length field is out of bounds, or the JSON is malformed (a key repeated inside an entry,
// one missing, a metadata value that is not a string).
SafetensorsHeader parse_safetensors_header(const unsigned char* bytes, size_t size, const std::string& path);

// The tied weights a file records in its metadata: name left out -> name stored, for each entry whose value
// names a tensor of the file and whose key names none.
std::map<std::string, std::string> recorded_ties(const SafetensorsHeader& header);

// Writing: a tensor as the header announces it, the payload laid out in the order of the entries given.
struct HeaderEntry {
  std::string name;
  std::string dtype;  // the safetensors name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};
// Writes the length field and the JSON header (metadata with "format": "pt" added, as torch's writer marks
// its files; then each entry, its data_offsets in order), padded with spaces so that the payload after it
// starts 8-byte aligned as the reference writer pads it. The payload is the caller's to write next, in the
// entries' order. Error(InvalidArgument) for a name given twice; Error(Io) from the file.
void write_safetensors_header(AtomicFile& file, const std::vector<HeaderEntry>& entries,
                              std::map<std::string, std::string> metadata);

// The entry's data_offsets as [begin, end); Error(InvalidArgument) naming the file and the tensor unless
// they are two integers with 0 <= begin <= end.
std::pair<uint64_t, uint64_t> data_extent(const SafetensorsEntry& entry, const std::string& path);
// Error(InvalidArgument) "... the file is truncated" when `end` lies beyond the payload_size bytes that
// follow the header.
void check_in_payload(const SafetensorsEntry& entry, uint64_t end, size_t payload_size, const std::string& path);

}  // namespace accel::formats
