// A checkpoint's metadata.json: which accel and LibTorch wrote it, for how many processes, at which step
// and epoch, and how many objects of each kind it holds. Loading reads it first, so that a checkpoint
// made for another world size or another set of objects is refused before anything else is read. Free of
// LibTorch, as `accel checkpoint inspect` reads it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accel::ckpt {

// The names of a checkpoint's files (ckpt/checkpoint.hpp lists what each holds), for save_state,
// load_state and `accel checkpoint inspect`.
constexpr const char* kManifestFile = "metadata.json";
constexpr const char* kStatesFile = "states.safetensors";  // in the checkpoint and in each rank's folder
// Accelerate's names: model.safetensors for the first model (as save_model names it, so that
// load_weights reads it), model_<i>.safetensors after it.
std::string checkpoint_model_file(size_t index);
// "rank<r>", the folder of what differs between ranks.
std::string rank_directory(int64_t rank);
// <directory>/rank<r>/<file>: a file of what rank r saved.
std::string rank_file(const std::string& directory, int64_t rank, const std::string& file);
// "<kind>.<index>" ("optimizer.0", "loader.1"): an object's entry in a states file.
std::string states_entry(const char* kind, size_t index);
// The kind of a ZeRO optimizer's entry in each rank's states file: the state of the pieces that rank
// stepped ("optimizer_part.0"); the checkpoint's own "optimizer.0" then holds its group options only.
constexpr const char* kOptimizerPartEntry = "optimizer_part";

struct Manifest {
  std::string accel_version;
  std::string torch_version;
  int64_t world_size = 1;
  int64_t step = 0;   // the accumulation counter (GradientState::step)
  int64_t epoch = 0;  // the first loader's epoch; 0 without loaders
  int64_t num_models = 0;
  int64_t num_optimizers = 0;
  int64_t num_schedulers = 0;
  int64_t num_loaders = 0;
  bool has_scaler = false;
  // The names of the objects registered with register_for_checkpointing, in registration order; each
  // rank's bytes are in rank<r>/custom_checkpoint_<name>.bin. The key is absent from older checkpoints,
  // which read as none.
  std::vector<std::string> custom_objects;
  // The trackers' run (accel_state_init_trackers' run_name) and the last step logged into it, when the
  // main process had trackers at save time: "tracker_run" and "tracker_last_step" (-1: nothing logged yet),
  // absent otherwise and from older checkpoints.
  std::string tracker_run;
  int64_t tracker_last_step = -1;
  // The highest ZeRO stage of the saved optimizers ("zero_stage", absent for 0 and from older
  // checkpoints) and how their parameters were split: per rank, what it stepped, a parameter's name or
  // "name[begin:end]" for a piece of its flattened elements ("zero_split"). The optimizer state itself is saved
  // by each rank (its pieces, kOptimizerPartEntry), and any stage and world size loads it.
  int64_t zero_stage = 0;
  std::vector<std::vector<std::string>> zero_split;
  // The models saved in pieces (prepare option checkpoint_model "sharded", ckpt/model_pieces.hpp), by index:
  // each saving process's piece of every tensor in rank<r>/ under the model's file name, none at the top.
  // "models_in_pieces", absent when none and from older checkpoints.
  std::vector<int64_t> models_in_pieces;
  bool in_pieces(size_t model) const;
};

// rank<r>/custom_checkpoint_<name>.bin: a registered object's bytes, in its rank's folder.
std::string custom_object_file(const std::string& name);

// Throws Error(Io) naming the path when it cannot be written.
void write_manifest(const std::string& path, const Manifest& manifest);
// Throws Error(Io) when the file cannot be read, Error(InvalidArgument) naming the path when it is not a
// manifest (malformed JSON, a missing or unknown key).
Manifest read_manifest(const std::string& path);

}  // namespace accel::ckpt
