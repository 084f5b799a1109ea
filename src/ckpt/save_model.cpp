#include "ckpt/save_model.hpp"

#include <set>

#include "ckpt/manifest.hpp"
#include "ckpt/model_layout.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/save_directory.hpp"
#include "ckpt/streamed_model.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/timeline.hpp"
#include "distributed/collectives/collectives.hpp"

namespace accel::ckpt {

void save_model(distributed::State& state, const train::Model& model, const std::string& requested_directory,
                uint64_t max_shard_size) {
  const std::string directory = model_directory(requested_directory);
  const timeline::Span span("save_model");
  distributed::all_or_none(
      state,
      [&] {
        // Under zero_stage 3 every rank takes part in gathering the parameters, unit by unit; rank 0 writes.
        const bool main = state.launch().rank == 0;
        const std::set<std::string> written =
            write_model_files(model, directory, max_shard_size == 0 ? kDefaultMaxShardSize : max_shard_size, main);
        if (!main) return;
        for (const std::string& name : list_directory(directory)) {
          if (is_model_file(name) && written.count(name) == 0) remove_all(join_path(directory, name));
        }
      },
      "could not save the model");
}

void load_model(const train::Model& model, const std::string& directory) {
  const timeline::Span span("load_model");
  // A checkpoint whose first model was saved in pieces has no model file at its top.
  const std::string manifest_path = join_path(directory, kManifestFile);
  if (path_exists(manifest_path)) {
    const Manifest manifest = read_manifest(manifest_path);
    if (manifest.in_pieces(0)) {
      ModelWeights::from_parts(model, directory, 0, manifest.world_size).copy_into(model);
      return;
    }
  }
  ModelWeights::from_directory(model, directory).copy_into(model);
}

}  // namespace accel::ckpt
