#include "ckpt/manifest.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ckpt/model_layout.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "formats/header.hpp"
#include "formats/json.hpp"

namespace accel::ckpt {

namespace {

// The integer members, by key; one table for both directions so that what is written is what is read.
std::map<std::string, int64_t*> integer_members(Manifest& manifest) {
  return {{"world_size", &manifest.world_size},         {"step", &manifest.step},
          {"epoch", &manifest.epoch},                   {"num_models", &manifest.num_models},
          {"num_optimizers", &manifest.num_optimizers}, {"num_schedulers", &manifest.num_schedulers},
          {"num_loaders", &manifest.num_loaders}};
}

// A JSON array of strings.
std::vector<std::string> read_names(formats::HeaderReader& reader) {
  std::vector<std::string> names;
  reader.expect('[');
  if (!reader.consume(']')) {
    do {
      names.push_back(formats::read_json_string(reader));
    } while (reader.consume(','));
    reader.expect(']');
  }
  return names;
}

}  // namespace

std::string checkpoint_model_file(size_t index) {
  return index == 0 ? kModelFile : "model_" + std::to_string(index) + ".safetensors";
}

std::string rank_directory(int64_t rank) { return "rank" + std::to_string(rank); }

std::string rank_file(const std::string& directory, int64_t rank, const std::string& file) {
  return join_path(join_path(directory, rank_directory(rank)), file);
}

std::string states_entry(const char* kind, size_t index) { return std::string(kind) + "." + std::to_string(index); }

bool Manifest::in_pieces(size_t model) const {
  return std::find(models_in_pieces.begin(), models_in_pieces.end(), static_cast<int64_t>(model)) != models_in_pieces.end();
}

std::string custom_object_file(const std::string& name) { return "custom_checkpoint_" + name + ".bin"; }

void write_manifest(const std::string& path, const Manifest& manifest) {
  Manifest copy = manifest;
  std::ostringstream text;
  text << "{\n  \"accel_version\": " << formats::json_quote(copy.accel_version)
       << ",\n  \"torch_version\": " << formats::json_quote(copy.torch_version)
       << ",\n  \"has_scaler\": " << (copy.has_scaler ? 1 : 0);
  for (const auto& [key, value] : integer_members(copy)) text << ",\n  \"" << key << "\": " << *value;
  if (!copy.custom_objects.empty()) {
    text << ",\n  \"custom_objects\": [";
    for (size_t i = 0; i < copy.custom_objects.size(); ++i) text << (i ? ", " : "") << formats::json_quote(copy.custom_objects[i]);
    text << "]";
  }
  if (copy.zero_stage != 0) {
    text << ",\n  \"zero_stage\": " << copy.zero_stage << ",\n  \"zero_split\": [";
    for (size_t r = 0; r < copy.zero_split.size(); ++r) {
      text << (r ? ", " : "") << "[";
      for (size_t i = 0; i < copy.zero_split[r].size(); ++i) text << (i ? ", " : "") << formats::json_quote(copy.zero_split[r][i]);
      text << "]";
    }
    text << "]";
  }
  if (!copy.models_in_pieces.empty()) {
    text << ",\n  \"models_in_pieces\": [";
    for (size_t i = 0; i < copy.models_in_pieces.size(); ++i) text << (i ? ", " : "") << copy.models_in_pieces[i];
    text << "]";
  }
  if (!copy.tracker_run.empty()) {
    text << ",\n  \"tracker_run\": " << formats::json_quote(copy.tracker_run) << ",\n  \"tracker_last_step\": " << copy.tracker_last_step;
  }
  text << "\n}\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text.str();
  out.flush();
  if (!out) fail(Code::Io, "cannot write '" + path + "'");
}

Manifest read_manifest(const std::string& path) {
  const std::string text = read_file(path);
  Manifest manifest;
  auto integers = integer_members(manifest);
  std::set<std::string> seen;
  formats::HeaderReader reader(text, path, "checkpoint manifest");
  formats::read_json_object(reader, [&](const std::string& key) {
    if (!seen.insert(key).second) reader.error("repeated key '" + key + "'");
    if (key == "accel_version") {
      manifest.accel_version = formats::read_json_string(reader);
    } else if (key == "torch_version") {
      manifest.torch_version = formats::read_json_string(reader);
    } else if (key == "has_scaler") {
      manifest.has_scaler = reader.read_int() != 0;
    } else if (key == "tracker_run") {
      manifest.tracker_run = formats::read_json_string(reader);
    } else if (key == "tracker_last_step") {
      manifest.tracker_last_step = reader.read_int();
    } else if (key == "custom_objects") {
      manifest.custom_objects = read_names(reader);
    } else if (key == "zero_stage") {
      manifest.zero_stage = reader.read_int();
    } else if (key == "models_in_pieces") {
      manifest.models_in_pieces = formats::read_json_int_array(reader);
    } else if (key == "zero_split") {
      reader.expect('[');
      if (!reader.consume(']')) {
        do {
          manifest.zero_split.push_back(read_names(reader));
        } while (reader.consume(','));
        reader.expect(']');
      }
    } else if (auto member = integers.find(key); member != integers.end()) {
      *member->second = reader.read_int();
    } else {
      reader.error("unknown key '" + key + "'");
    }
  });
  const size_t optional_keys = seen.count("custom_objects") + seen.count("tracker_run") +
                               seen.count("tracker_last_step") + seen.count("zero_stage") + seen.count("zero_split") +
                               seen.count("models_in_pieces");
  if (seen.size() - optional_keys != integers.size() + 3) fail(Code::InvalidArgument, path + ": checkpoint manifest misses keys");
  return manifest;
}

}  // namespace accel::ckpt
