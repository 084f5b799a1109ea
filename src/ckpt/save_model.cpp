#include "ckpt/save_model.hpp"

#include <memory>
#include <set>
#include <vector>

#include "ckpt/model_layout.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/save_directory.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/timeline.hpp"
#include "distributed/collectives/collectives.hpp"
#include "formats/safetensors.hpp"

namespace accel::ckpt {

namespace {

// Returns the names of the files written, which the caller keeps while it removes the previous save's
// others. The previous save's entry point (model.safetensors or the index) goes before any new file is
// renamed over one of its shards, so that no index ever names a shard of another save.
std::set<std::string> write_model_files(const NamedTensors& whole, const std::string& directory, uint64_t max_shard_size) {
  create_directories(directory);
  const StoredModel model_files = stored_model(whole);
  const NamedTensors& stored = model_files.tensors;
  std::vector<uint64_t> sizes;
  for (const auto& [name, tensor] : stored) sizes.push_back(static_cast<uint64_t>(tensor.numel()) * tensor.element_size());
  const std::vector<std::vector<size_t>> shards = plan_shards(sizes, max_shard_size);
  const std::string single = join_path(directory, kModelFile), index_path = join_path(directory, kModelIndex);

  if (shards.size() <= 1) {
    AtomicFile file(single);
    formats::write_safetensors(file, stored, model_files.ties);
    file.finish();
    remove_all(index_path);
    file.commit();
    return {kModelFile};
  }
  std::set<std::string> written{kModelIndex};
  ModelIndex index;
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shard_file(s, shards.size());
    NamedTensors part;
    std::vector<std::string> names;
    for (size_t i : shards[s]) {
      part.push_back(stored[i]);
      names.push_back(stored[i].first);
      index.weight_map.emplace(stored[i].first, name);
      index.total_size += sizes[i];
    }
    files.push_back(std::make_unique<AtomicFile>(join_path(directory, name)));
    formats::write_safetensors(*files.back(), part, model_files.ties_to(names));
    files.back()->finish();
    written.insert(name);
  }
  remove_all(index_path);
  remove_all(single);
  for (const auto& file : files) file->commit();
  write_model_index(index_path, index);
  return written;
}

}  // namespace

void save_model(distributed::State& state, const train::Model& model, const std::string& requested_directory,
                uint64_t max_shard_size) {
  const std::string directory = model_directory(requested_directory);
  const timeline::Span span("save_model");
  // Under zero_stage 3 every rank takes part in gathering the parameters; rank 0 keeps them.
  const NamedTensors whole = model.whole_parameters_and_buffers(state.launch().rank == 0);
  distributed::all_or_none(
      state,
      [&] {
        if (state.launch().rank != 0) return;
        const std::set<std::string> written =
            write_model_files(whole, directory, max_shard_size == 0 ? kDefaultMaxShardSize : max_shard_size);
        for (const std::string& name : list_directory(directory)) {
          if (is_model_file(name) && written.count(name) == 0) remove_all(join_path(directory, name));
        }
      },
      "could not save the model");
}

void load_model(const train::Model& model, const std::string& directory) {
  const timeline::Span span("load_model");
  ModelWeights::from_directory(model, directory).copy_into(model);
}

}  // namespace accel::ckpt
