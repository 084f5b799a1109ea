// The JSON header of a .safetensors file (formats/safetensors.hpp describes the layout), read without
// LibTorch: `accel checkpoint inspect` counts a checkpoint's tensors with it, and the reader of
// safetensors.hpp starts from it before it checks each entry against its dtype and the payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

}  // namespace accel::formats
