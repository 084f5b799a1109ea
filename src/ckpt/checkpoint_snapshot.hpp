// What one rank writes into a checkpoint, taken apart from the writing: save_state takes it and writes it
// at once; a background save (ckpt/background_save.hpp) takes it on the caller's thread, with the model
// tensors copied to host memory, and writes it on another while training changes the originals.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/model_weights.hpp"
#include "core/named_tensors.hpp"

namespace accel::ckpt {

struct CheckpointSnapshot {
  int32_t rank = 0;
  // The main process's part (empty elsewhere): each model's tensors, the optimizer, scheduler and
  // grad-scaler archives as uint8 tensors, and the manifest. A model saved in pieces, or sharded by
  // zero_stage 3, has no tensors here: model_parts holds the former, and begin_save writes the latter's file as
  // its units are gathered (written_models).
  std::vector<StoredModel> models;
  std::vector<bool> written_models;
  NamedTensors shared_states;
  Manifest manifest;
  // Every rank's, per model: its piece of each tensor of a model saved in pieces (Model::checkpoint_in_pieces,
  // ckpt/model_pieces.hpp), written into its own folder; none for a model saved whole.
  std::vector<std::optional<ModelPart>> model_parts;
  // This rank's part: loader positions and random generator states, and each registered object's bytes
  // under its file name.
  NamedTensors rank_states;
  // The __metadata__ of this rank's states file: the index of each ZeRO optimizer's part, by its entry.
  std::map<std::string, std::string> rank_metadata;
  std::vector<std::pair<std::string, std::string>> custom_files;
};

// Runs the registered objects' save functions and captures everything else of this rank's part.
// copy_tensors: the model tensors are copied to host memory, so that the snapshot no longer changes with
// the model; otherwise they are the model's own (write them before the model changes). Optimizer,
// scheduler, scaler and loader states are serialised into bytes, and the random states copied, either way.
// Throws what the objects' save functions throw.
CheckpointSnapshot take_snapshot(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects,
                                 bool copy_tensors);

// Writes the snapshot's files into directory (existing), the main process's part included when the
// snapshot has one. Touches nothing but the snapshot and the files, so any thread may call it. Throws
// Error(Io) naming the path on any file-system failure.
void write_snapshot(const CheckpointSnapshot& snapshot, const std::string& directory);

// "<directory>.saving": where a checkpoint is written before it is moved into place.
std::string staging_directory(const std::string& directory);

// Removes a staging folder after a failed save. Never throws: the failure that led here is the one to
// report, and the next save to the same directory clears a leftover anyway.
void discard_staging(const std::string& staging) noexcept;

// The first half of every save, on the calling thread: this rank's snapshot (take_snapshot), then the main
// process clears and makes the staging folder, and the files of models sharded by zero_stage 3 are written
// into it as their units are gathered (every rank takes part; never in the background). Collective: when any rank fails, every rank throws (its own
// error, or Error(PeerFailed) naming the rank), the previous checkpoint stays and no staging folder is left.
CheckpointSnapshot begin_save(const std::shared_ptr<distributed::State>& state, const std::string& directory,
                              const CheckpointObjects& objects, bool copy_tensors);

}  // namespace accel::ckpt
