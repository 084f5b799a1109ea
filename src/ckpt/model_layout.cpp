#include "ckpt/model_layout.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/error.hpp"
#include "core/files.hpp"
#include "formats/header.hpp"
#include "formats/json.hpp"

namespace accel::ckpt {

namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "model-<digits>-of-<digits>.safetensors", whatever the width (more than 99999 shards widen it).
bool is_shard_file(const std::string& name) {
  const std::string prefix = "model-", middle = "-of-", suffix = ".safetensors";
  if (name.compare(0, prefix.size(), prefix) != 0 || !ends_with(name, suffix)) return false;
  const std::string numbers = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const size_t split = numbers.find(middle);
  return split != std::string::npos && all_digits(numbers.substr(0, split)) &&
         all_digits(numbers.substr(split + middle.size()));
}

}  // namespace

SavedModelFiles saved_model_files(const std::string& directory) {
  const bool has_single = path_exists(join_path(directory, kModelFile));
  const bool has_index = path_exists(join_path(directory, kModelIndex));
  if (has_single && has_index) {
    fail(Code::InvalidArgument, "'" + directory + "' holds both " + kModelFile + " and " + kModelIndex +
                                    ", which no save leaves together; remove the stale one");
  }
  return has_index ? SavedModelFiles::Sharded : has_single ? SavedModelFiles::Single : SavedModelFiles::None;
}

std::string shard_file(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

bool is_model_file(const std::string& name) {
  std::string base = name;
  const size_t tmp = base.rfind(".tmp.");
  if (tmp != std::string::npos && all_digits(base.substr(tmp + 5))) base.resize(tmp);
  return base == kModelFile || base == kModelIndex || is_shard_file(base);
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_shard_size) {
  std::vector<std::vector<size_t>> shards;
  uint64_t filled = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (shards.empty() || (!shards.back().empty() && filled + sizes[i] > max_shard_size)) {
      shards.emplace_back();
      filled = 0;
    }
    shards.back().push_back(i);
    filled += sizes[i];
  }
  return shards;
}

void write_model_index(const std::string& path, const ModelIndex& index) {
  std::string text = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(index.total_size) +
                     "\n  },\n  \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : index.weight_map) {
    text += (first ? "\n    " : ",\n    ") + formats::json_quote(name) + ": " + formats::json_quote(file);
    first = false;
  }
  text += "\n  }\n}\n";
  AtomicFile out(path);
  out.write(text.data(), text.size());
  out.commit();
}

ModelIndex read_model_index(const std::string& path) {
  const std::string text = read_file(path);
  ModelIndex index;
  bool seen_total = false, seen_map = false;
  formats::HeaderReader reader(text, path, "model index");
  formats::read_json_object(reader, [&](const std::string& key) {
    if (key == "metadata") {
      formats::read_json_object(reader, [&](const std::string& field) {
        if (field == "total_size") {
          const int64_t total = reader.read_int();
          if (total < 0) reader.error("negative total_size");
          index.total_size = static_cast<uint64_t>(total);
          seen_total = true;
        } else if (reader.peek() == '"') {
          formats::read_json_string(reader);
        } else {
          reader.read_int();
        }
      });
    } else if (key == "weight_map") {
      seen_map = true;
      formats::read_json_object(reader, [&](const std::string& name) {
        const std::string file = formats::read_json_string(reader);
        if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
          reader.error("tensor '" + name + "' is mapped to '" + file + "', not a file of the index's directory");
        }
        if (!index.weight_map.emplace(name, file).second) reader.error("tensor '" + name + "' appears twice");
      });
    } else {
      reader.error("unknown key '" + key + "'");
    }
  });
  if (!reader.at_end()) reader.error("unexpected text after the JSON object");
  if (!seen_map || !seen_total) {
    fail(Code::InvalidArgument, path + ": not a model index: no " + (seen_map ? "metadata.total_size" : "weight_map"));
  }
  return index;
}

std::map<std::string, std::vector<std::string>> ModelIndex::tensors_by_file() const {
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : weight_map) by_file[file].push_back(name);
  return by_file;
}

void check_shard_holds_its_tensors(const ModelIndex& index, const std::string& file, const std::string& shard_path,
                                   const std::vector<std::string>& held) {
  const std::set<std::string> in_shard(held.begin(), held.end());
  for (const auto& [name, mapped] : index.weight_map) {
    if (mapped == file && in_shard.count(name) == 0) {
      fail(Code::InvalidArgument, shard_path + ": no tensor '" + name + "', which " + kModelIndex + " maps to it");
    }
  }
  for (const std::string& name : held) {
    const auto mapped = index.weight_map.find(name);
    if (mapped == index.weight_map.end() || mapped->second != file) {
      fail(Code::InvalidArgument, shard_path + ": holds '" + name + "', which " + kModelIndex +
                                      (mapped == index.weight_map.end() ? " does not list" : " maps to " + mapped->second));
    }
  }
}

}  // namespace accel::ckpt
