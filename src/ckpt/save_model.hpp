// Accelerate's save_model, and loading what it wrote: the unwrapped model's weights as safetensors in a
// directory (ckpt/model_layout.hpp: model.safetensors, or shards and their index), tied weights once.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/state.hpp"
#include "train/model/model.hpp"

namespace accel::ckpt {

// Collective: the main process writes while the others wait, and a failure of the writer reaches every
// rank (Error(PeerFailed) on the others). Creates `directory` (and its parents) when missing. Above
// max_shard_size bytes (0: Accelerate's default, 10 GB) the tensors go into shards (plan_shards) with an
// index. Files are written under temporary names first, then the previous save's model.safetensors or
// index is removed, the new files are renamed into place (the index last), and the files of the previous
// save that the new one did not replace go: a reader never finds two saves mixed, though one that looks
// while a save commits, or after a save killed while committing, finds no model. Other files of the
// directory are left alone. Throws Error(InvalidArgument) for the directory "" (model_directory,
// ckpt/save_directory.hpp), before anything is written; Error(Io) naming the path.
void save_model(distributed::State& state, const train::Model& model, const std::string& directory,
                uint64_t max_shard_size);

// Loads what save_model wrote into `directory` (ModelWeights::from_directory checks it all first, so on
// an error the model is unchanged), or a checkpoint's first model, whole or in pieces (from_file,
// from_parts), copying each tensor into the model's on its device. Not collective.
void load_model(const train::Model& model, const std::string& directory);

}  // namespace accel::ckpt
