#include "cli/checkpoint_command.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.hpp"
#include "cli/checkpoint_merge.hpp"
#include "ckpt/model_layout.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "data/loader_state.hpp"
#include "formats/json.hpp"
#include "formats/mapped_file.hpp"
#include "formats/safetensors_header.hpp"

namespace accel::cli {

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: accel checkpoint inspect DIR\n"
               "       accel checkpoint merge DIR OUT [--max-shard-size SIZE] [--model I]\n"
               "prints what DIR holds as JSON: for a checkpoint (save_state), the versions, world size, step,\n"
               "epoch and object counts of its metadata.json, and each loader's place (epoch, steps taken, and the\n"
               "processes and global batch that saved it: a resume on another number of processes keeps the global\n"
               "batch); for a saved model (save_model), model.safetensors\n"
               "or the index and its shards; for both, each file with its size and tensor count, and the total,\n"
               "and for a model file that stores tied weights once, its ties (\"tied\": {name left out: name stored}).\n"
               "merge writes the model of a checkpoint (model I of it, default 0; saved whole, or in pieces by\n"
               "every process, checkpoint_model \"sharded\") or a saved model (one file or shards) into OUT as\n"
               "save_model writes a model held whole: model.safetensors, or shards and an index\n"
               "past SIZE (\"10GB\", Accelerate's default; \"500MiB\"; bytes), each file's tensors in name order, so\n"
               "a checkpoint of any ZeRO stage and number of processes gives stage 0's file byte for byte. OUT must\n"
               "hold no saved model. Needs no process group; each tensor is copied from the mapped input.\n");
}

// merge DIR OUT [--max-shard-size SIZE] [--model I]; prints the files written.
int run_merge(int argc, char** argv) {
  MergeRequest request;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    const bool valued = argument == "--max-shard-size" || argument == "--model";
    if (valued && i + 1 == argc) {
      std::fprintf(stderr, "accel checkpoint merge: %s needs a value\n", argument.c_str());
      return 2;
    }
    try {
      if (argument == "--max-shard-size") {
        request.max_shard_size = parse_shard_size(argv[++i]);
      } else if (argument == "--model") {
        const std::string value = argv[++i];
        if (value.empty() || value.size() > 9 || !std::all_of(value.begin(), value.end(), ::isdigit)) {
          fail(Code::InvalidArgument, "--model takes a model's index (0, 1, ...), not '" + value + "'");
        }
        request.model = std::stoul(value);
      } else {
        positional.push_back(argument);
      }
    } catch (const Error& error) {
      std::fprintf(stderr, "accel checkpoint merge: %s\n", error.what());
      return 2;
    }
  }
  if (positional.size() != 2) {
    usage(stderr);
    return 2;
  }
  request.source = positional[0];
  request.out = positional[1];
  try {
    for (const std::string& name : merge_model(request)) std::printf("%s\n", join_path(request.out, name).c_str());
  } catch (const Error& error) {
    std::fprintf(stderr, "accel checkpoint merge: %s\n", error.what());
    return 1;
  }
  return 0;
}

struct FileReport {
  std::string name;  // relative to the directory
  uint64_t bytes = 0;
  std::optional<size_t> tensors;  // for safetensors files
  uint64_t tensor_bytes = 0;
  std::vector<std::string> tensor_names;
  // Tied weights stored once: each name left out -> the name stored, as the metadata records them.
  std::map<std::string, std::string> ties;
};

// A safetensors file's header, with every tensor's bytes checked to lie inside the file.
FileReport safetensors_file(const std::string& directory, const std::string& name) {
  const std::string path = join_path(directory, name);
  const formats::MappedFile file(path);
  const formats::SafetensorsHeader header = formats::parse_safetensors_header(file.data(), file.size(), path);
  FileReport report;
  report.name = name;
  report.bytes = file.size();
  report.tensors = header.entries.size();
  for (const formats::SafetensorsEntry& entry : header.entries) {
    const auto [begin, end] = formats::data_extent(entry, path);
    formats::check_in_payload(entry, end, file.size() - header.data_start, path);
    report.tensor_bytes += end - begin;
    report.tensor_names.push_back(entry.name);
  }
  report.ties = formats::recorded_ties(header);
  return report;
}

FileReport other_file(const std::string& directory, const std::string& name) {
  FileReport report;
  report.name = name;
  report.bytes = formats::MappedFile(join_path(directory, name)).size();
  return report;
}

struct Report {
  std::vector<std::pair<std::string, std::string>> fields;  // key, JSON value
  std::vector<FileReport> files;
};

std::string to_json(const std::string& directory, const Report& report) {
  size_t tensors = 0;
  for (const FileReport& file : report.files) tensors += file.tensors.value_or(0);
  std::string out = "{\n  \"directory\": " + formats::json_quote(directory);
  for (const auto& [key, value] : report.fields) out += ",\n  " + formats::json_quote(key) + ": " + value;
  out += ",\n  \"tensors\": " + std::to_string(tensors) + ",\n  \"files\": [";
  for (size_t i = 0; i < report.files.size(); ++i) {
    const FileReport& file = report.files[i];
    out += std::string(i ? "," : "") + "\n    {\"path\": " + formats::json_quote(file.name) +
           ", \"bytes\": " + std::to_string(file.bytes);
    if (file.tensors) out += ", \"tensors\": " + std::to_string(*file.tensors);
    if (!file.ties.empty()) {
      std::string ties;
      for (const auto& [left_out, stored] : file.ties) {
        ties += (ties.empty() ? "" : ", ") + formats::json_quote(left_out) + ": " + formats::json_quote(stored);
      }
      out += ", \"tied\": {" + ties + "}";
    }
    out += "}";
  }
  return out + "\n  ]\n}\n";
}

// Rank 0's loader positions (every rank's is the same step), as a JSON list: the epoch, the step in it, and
// the processes and global batch that saved it, which a resume on another number of processes must keep.
std::string loader_states(const std::string& directory, const ckpt::Manifest& manifest) {
  const std::string path = join_path(directory, join_path(ckpt::rank_directory(0), ckpt::kStatesFile));
  const formats::MappedFile file(path);
  const formats::SafetensorsHeader header = formats::parse_safetensors_header(file.data(), file.size(), path);
  std::string out;
  for (int64_t i = 0; i < manifest.num_loaders; ++i) {
    const std::string name = ckpt::states_entry("loader", static_cast<size_t>(i));
    const auto entry = std::find_if(header.entries.begin(), header.entries.end(),
                                    [&](const formats::SafetensorsEntry& candidate) { return candidate.name == name; });
    if (entry == header.entries.end()) fail(Code::InvalidArgument, path + ": no '" + name + "', which metadata.json counts");
    const auto [begin, end] = formats::data_extent(*entry, path);
    formats::check_in_payload(*entry, end, file.size() - header.data_start, path);
    const auto* bytes = reinterpret_cast<const char*>(file.data()) + header.data_start + begin;
    data::LoaderState state;
    try {
      state = data::decode_loader_state(std::string_view(bytes, end - begin));
    } catch (const Error& error) {
      fail(error.code(), path + ": '" + name + "': " + error.what());
    }
    const auto known = [](int64_t value) { return value == -1 ? std::string("null") : std::to_string(value); };
    out += std::string(i ? ", " : "") + "{\"epoch\": " + std::to_string(state.epoch) + ", \"mid_epoch\": " +
           (state.mid_epoch ? "true" : "false") + ", \"steps_taken\": " + std::to_string(state.yielded) +
           ", \"saved_by_processes\": " + known(state.world_size) + ", \"global_batch\": " +
           known(state.global_batch_size) + "}";
  }
  return "[" + out + "]";
}

Report inspect_checkpoint(const std::string& directory) {
  const ckpt::Manifest manifest = ckpt::read_manifest(join_path(directory, ckpt::kManifestFile));
  Report report;
  report.fields = {{"kind", "\"checkpoint\""},
                   {"accel_version", formats::json_quote(manifest.accel_version)},
                   {"torch_version", formats::json_quote(manifest.torch_version)},
                   {"world_size", std::to_string(manifest.world_size)},
                   {"step", std::to_string(manifest.step)},
                   {"epoch", std::to_string(manifest.epoch)},
                   {"models", std::to_string(manifest.num_models)},
                   {"optimizers", std::to_string(manifest.num_optimizers)},
                   {"schedulers", std::to_string(manifest.num_schedulers)},
                   {"loaders", std::to_string(manifest.num_loaders)},
                   {"grad_scaler", manifest.has_scaler ? "true" : "false"}};
  if (manifest.zero_stage != 0) {
    // Each rank saved the optimizer state of what it stepped; the split says which rank stepped which parameter.
    std::string split;
    for (size_t rank = 0; rank < manifest.zero_split.size(); ++rank) {
      std::string names;
      for (const auto& name : manifest.zero_split[rank]) names += (names.empty() ? "" : ", ") + formats::json_quote(name);
      split += (rank ? ", " : "") + std::string("[") + names + "]";
    }
    report.fields.emplace_back("zero_stage", std::to_string(manifest.zero_stage));
    report.fields.emplace_back("zero_split", "[" + split + "]");
  }
  if (manifest.num_loaders > 0) report.fields.emplace_back("loaders_saved", loader_states(directory, manifest));
  report.files.push_back(other_file(directory, ckpt::kManifestFile));
  if (!manifest.models_in_pieces.empty()) {
    std::string models;
    for (int64_t i : manifest.models_in_pieces) models += (models.empty() ? "" : ", ") + std::to_string(i);
    report.fields.emplace_back("models_in_pieces", "[" + models + "]");
  }
  for (int64_t i = 0; i < manifest.num_models; ++i) {
    if (manifest.in_pieces(static_cast<size_t>(i))) continue;
    report.files.push_back(safetensors_file(directory, ckpt::checkpoint_model_file(static_cast<size_t>(i))));
  }
  report.files.push_back(safetensors_file(directory, ckpt::kStatesFile));
  for (int64_t rank = 0; rank < manifest.world_size; ++rank) {
    for (int64_t i : manifest.models_in_pieces) {
      const std::string part = ckpt::checkpoint_model_file(static_cast<size_t>(i));
      report.files.push_back(safetensors_file(directory, join_path(ckpt::rank_directory(rank), part)));
    }
    report.files.push_back(safetensors_file(directory, join_path(ckpt::rank_directory(rank), ckpt::kStatesFile)));
    for (const std::string& name : manifest.custom_objects) {
      report.files.push_back(other_file(directory, join_path(ckpt::rank_directory(rank), ckpt::custom_object_file(name))));
    }
  }
  return report;
}

Report inspect_model(const std::string& directory, bool has_index) {
  Report report;
  report.fields = {{"kind", "\"model\""}};
  if (!has_index) {
    report.files.push_back(safetensors_file(directory, ckpt::kModelFile));
    report.fields.emplace_back("total_size", std::to_string(report.files.back().tensor_bytes));
    return report;
  }
  const ckpt::ModelIndex index = ckpt::read_model_index(join_path(directory, ckpt::kModelIndex));
  report.fields.emplace_back("total_size", std::to_string(index.total_size));
  report.files.push_back(other_file(directory, ckpt::kModelIndex));
  for (const auto& [file, names] : index.tensors_by_file()) {
    report.files.push_back(safetensors_file(directory, file));
    ckpt::check_shard_holds_its_tensors(index, file, join_path(directory, file), report.files.back().tensor_names);
  }
  return report;
}

Report inspect(const std::string& directory) {
  if (!is_directory(directory)) fail(Code::Io, "'" + directory + "' is not a directory");
  if (path_exists(join_path(directory, ckpt::kManifestFile))) return inspect_checkpoint(directory);
  const ckpt::SavedModelFiles files = ckpt::saved_model_files(directory);
  if (files == ckpt::SavedModelFiles::None) fail_neither_checkpoint_nor_model(directory);
  return inspect_model(directory, files == ckpt::SavedModelFiles::Sharded);
}

}  // namespace

int run_merge_weights(int argc, char** argv) {
  std::vector<char*> arguments{argv[0]};
  bool remove_source = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: accel merge-weights CHECKPOINT_DIR OUTPUT_PATH [--remove_checkpoint_dir]\n"
                  "Accelerate's merge-weights: accel checkpoint merge CHECKPOINT_DIR OUTPUT_PATH (see its --help),\n"
                  "then, with --remove_checkpoint_dir, CHECKPOINT_DIR removed once the merge succeeded.\n");
      return 0;
    }
    if (std::strcmp(argv[i], "--remove_checkpoint_dir") == 0) {
      remove_source = true;
    } else if (std::strcmp(argv[i], "--unsafe_serialization") == 0) {
      std::fprintf(stderr, "accel merge-weights: --unsafe_serialization (pickled .bin files) is not written: accel "
                           "writes model.safetensors, which torch and transformers load\n");
      return 2;
    } else if (std::strncmp(argv[i], "--", 2) == 0) {
      std::fprintf(stderr, "accel merge-weights: unknown option %s (accel checkpoint merge takes the shard size "
                           "and model index)\n", argv[i]);
      return 2;
    } else {
      arguments.push_back(argv[i]);
    }
  }
  if (arguments.size() != 3) {
    std::fprintf(stderr, "usage: accel merge-weights CHECKPOINT_DIR OUTPUT_PATH [--remove_checkpoint_dir]\n");
    return 2;
  }
  const int status = run_merge(static_cast<int>(arguments.size()), arguments.data());
  if (status != 0 || !remove_source) return status;
  if (!path_exists(arguments[1])) {  // Accelerate's model folder, named for a checkpoint of accel's
    std::fprintf(stderr, "accel merge-weights: merged; %s does not exist, so nothing was removed (an accel "
                         "checkpoint keeps its model's pieces in its rank folders, with the rest of its state)\n",
                 arguments[1]);
    return 0;
  }
  try {
    remove_all(arguments[1]);
  } catch (const Error& error) {
    std::fprintf(stderr, "accel merge-weights: merged, but %s\n", error.what());
    return 1;
  }
  return 0;
}

int run_checkpoint(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "merge") == 0) return run_merge(argc - 1, argv + 1);
  if (argc != 3 || std::strcmp(argv[1], "inspect") != 0) {
    usage(stderr);
    return 2;
  }
  const std::string directory = argv[2];
  try {
    const std::string json = to_json(directory, inspect(directory));
    std::fputs(json.c_str(), stdout);
  } catch (const Error& error) {
    std::fprintf(stderr, "accel checkpoint inspect: %s\n", error.what());
    return 1;
  }
  return 0;
}

}  // namespace accel::cli
