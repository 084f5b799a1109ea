#include "formats/safetensors_header.hpp"

#include <set>

#include "core/error.hpp"
#include "formats/json.hpp"

namespace accel::formats {

namespace {

SafetensorsEntry read_tensor_entry(HeaderReader& in, const std::string& name) {
  SafetensorsEntry entry;
  entry.name = name;
  bool seen_dtype = false, seen_shape = false, seen_offsets = false;
  auto first_time = [&](bool& seen, const std::string& key) {
    if (seen) in.error("tensor '" + name + "' has key '" + key + "' twice");
    seen = true;
  };
  read_json_object(in, [&](const std::string& key) {
    if (key == "dtype") {
      first_time(seen_dtype, key);
      entry.dtype = read_json_string(in);
    } else if (key == "shape") {
      first_time(seen_shape, key);
      entry.shape = read_json_int_array(in);
    } else if (key == "data_offsets") {
      first_time(seen_offsets, key);
      entry.offsets = read_json_int_array(in);
    } else {
      in.error("tensor '" + name + "' has unexpected key '" + key + "'");
    }
  });
  if (!seen_dtype || !seen_shape || !seen_offsets) {
    fail_in_file(Code::InvalidArgument, in.path(),
                 "tensor '" + name + "' lacks '" + (!seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets") +
                     "'");
  }
  return entry;
}

std::map<std::string, std::string> read_metadata(HeaderReader& in) {
  std::map<std::string, std::string> metadata;
  read_json_object(in, [&](const std::string& key) {
    if (in.peek() != '"') in.error("__metadata__ values must be strings (key '" + key + "')");
    if (!metadata.emplace(key, read_json_string(in)).second) in.error("__metadata__ has key '" + key + "' twice");
  });
  return metadata;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const unsigned char* bytes, size_t size, const std::string& path) {
  if (size < 8) fail_in_file(Code::InvalidArgument, path, "too short for a .safetensors header length (8 bytes)");
  const uint64_t header_len = read_le(bytes, 8);
  check_header_length(path, size, 8, header_len);

  HeaderReader in(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len), path,
                  ".safetensors JSON header");
  SafetensorsHeader header;
  bool seen_metadata = false;
  read_json_object(in, [&](const std::string& key) {
    if (key != "__metadata__") {
      header.entries.push_back(read_tensor_entry(in, key));
      return;
    }
    if (seen_metadata) in.error("__metadata__ appears twice");
    seen_metadata = true;
    header.metadata = read_metadata(in);
  });
  if (!in.at_end()) in.error("unexpected text after the JSON object");
  header.data_start = 8 + header_len;
  return header;
}

std::pair<uint64_t, uint64_t> data_extent(const SafetensorsEntry& entry, const std::string& path) {
  const std::vector<int64_t>& off = entry.offsets;
  if (off.size() != 2 || off[0] < 0 || off[1] < off[0]) {
    fail_in_file(Code::InvalidArgument, path,
                 "tensor '" + entry.name + "' has data_offsets " + shape_string(off) +
                     "; expected [begin, end] with 0 <= begin <= end");
  }
  return {static_cast<uint64_t>(off[0]), static_cast<uint64_t>(off[1])};
}

void check_in_payload(const SafetensorsEntry& entry, uint64_t end, size_t payload_size, const std::string& path) {
  if (end > payload_size) {
    fail_in_file(Code::InvalidArgument, path,
                 "tensor '" + entry.name + "' ends at data byte " + std::to_string(end) + " but only " +
                     std::to_string(payload_size) + " bytes follow the header; the file is truncated");
  }
}

std::map<std::string, std::string> recorded_ties(const SafetensorsHeader& header) {
  std::set<std::string> names;
  for (const SafetensorsEntry& entry : header.entries) names.insert(entry.name);
  std::map<std::string, std::string> ties;
  for (const auto& [key, value] : header.metadata) {
    if (names.count(key) == 0 && names.count(value) != 0) ties.emplace(key, value);
  }
  return ties;
}

void write_safetensors_header(AtomicFile& file, const std::vector<HeaderEntry>& entries,
                              std::map<std::string, std::string> metadata) {
  std::set<std::string> names;
  for (const HeaderEntry& entry : entries) {
    if (!names.insert(entry.name).second) fail(Code::InvalidArgument, "tensor name '" + entry.name + "' appears twice");
  }
  metadata.emplace("format", "pt");
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    header += (first ? "" : ",") + json_quote(key) + ":" + json_quote(value);
    first = false;
  }
  header += "}";
  uint64_t offset = 0;
  for (const HeaderEntry& entry : entries) {
    header += "," + json_quote(entry.name) + ":{\"dtype\":\"" + entry.dtype + "\",\"shape\":[";
    for (size_t d = 0; d < entry.shape.size(); ++d) header += (d ? "," : "") + std::to_string(entry.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + entry.bytes) + "]}";
    offset += entry.bytes;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  const uint64_t header_size = header.size();
  file.write(&header_size, sizeof header_size);
  file.write(header.data(), header.size());
}

}  // namespace accel::formats
