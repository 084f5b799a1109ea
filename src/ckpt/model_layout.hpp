// The files of a saved model, as Accelerate's save_model and transformers lay them out: one
// model.safetensors, or, when the tensors exceed the shard size, model-00001-of-0000N.safetensors shards
// and model.safetensors.index.json, {"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}.
// Free of LibTorch, as `accel checkpoint inspect` reads these files too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace accel::ckpt {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kModelIndex = "model.safetensors.index.json";
// Accelerate's default max_shard_size, "10GB".
constexpr uint64_t kDefaultMaxShardSize = 10'000'000'000;

// Which of a save's entry points directory holds: none, model.safetensors, or the index of its shards.
// Error(InvalidArgument) naming the directory when it holds both, which no save leaves together.
enum class SavedModelFiles { None, Single, Sharded };
SavedModelFiles saved_model_files(const std::string& directory);

// "model-00002-of-00005.safetensors" for index 1 of 5.
std::string shard_file(size_t index, size_t count);

// Whether a name in a model's directory is one of a save's files (model.safetensors, the index, a shard)
// or the temporary of one (core/files.hpp's AtomicFile) that a killed save left: the files a new save
// replaces, and nothing else of the directory.
bool is_model_file(const std::string& name);

// Tensors of these byte sizes split into shards, as transformers splits them: in order, each shard taking
// tensors until the next would take it past max_shard_size; a tensor larger than that fills a shard alone.
// Each shard lists indices into sizes; no tensors, no shards.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_shard_size);

struct ModelIndex {
  uint64_t total_size = 0;                        // the bytes of every tensor stored
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name

  // Shard file name -> the tensors mapped to it, both in name order.
  std::map<std::string, std::vector<std::string>> tensors_by_file() const;
};

// Written as transformers writes it (2-space indent, keys sorted), atomically. Error(Io) naming the path.
void write_model_index(const std::string& path, const ModelIndex& index);
// Error(Io) when the file cannot be read; Error(InvalidArgument) naming the path when it is not an index:
// malformed JSON, "weight_map" or "total_size" missing, a name twice, a shard outside the directory (a
// file name with a '/'). Metadata keys other than total_size (newer transformers add some) are skipped
// when their values are integers or strings.
ModelIndex read_model_index(const std::string& path);

// Error(InvalidArgument) naming shard_path and a tensor unless the shard `file` holds exactly the tensors
// the index maps to it (`held`: the names in the shard).
void check_shard_holds_its_tensors(const ModelIndex& index, const std::string& file, const std::string& shard_path,
                                   const std::vector<std::string>& held);

}  // namespace accel::ckpt
