// Accelerate's save_state / load_state: everything a run needs to continue exactly where it stopped.
//
// A checkpoint directory holds:
//   metadata.json                    versions, world size, step, epoch, object counts (ckpt/manifest.hpp)
//   model.safetensors, model_<i>...  each model's parameters and buffers, tied weights once (main process;
//                                    ckpt/model_weights.hpp); for a model saved in pieces, none here but
//                                    rank<r>/model.safetensors, ... from every rank (ckpt/model_pieces.hpp)
//   states.safetensors               optimizer.<i>, scheduler.<i>, scaler: saved archives as uint8 tensors
//                                    (main process; they are the same on every rank; under ZeRO an
//                                    optimizer's holds its group options only)
//   rank<r>/states.safetensors       loader.<i> and rng.<generator>: what differs between ranks; under
//                                    ZeRO optimizer_part.<i>, the state of what the rank stepped, with its
//                                    index under the same key in __metadata__ (train/optim/zero_state.hpp)
//   rank<r>/custom_checkpoint_<name>.bin  each registered object's bytes, as its save function gave them
// Keeping the opaque archives inside safetensors files gives every file one format whose reader detects
// truncation, so loading can refuse a damaged checkpoint before touching anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/loader.hpp"
#include "distributed/state.hpp"
#include "train/model/model.hpp"
#include "train/training_loop.hpp"

namespace accel::tracking {
class Trackers;
}

namespace accel::ckpt {

// The bytes every process that saved a registered object wrote, read one at a time on request, so that a
// process loading a share of a large state holds one saving process's bytes at a time.
class SavedParts {
 public:
  SavedParts(std::string directory, std::string name, int64_t count);
  // How many processes saved the object (parts 0 .. count() - 1, by saving rank).
  int64_t count() const { return count_; }
  // The bytes process `part` saved. Error(OutOfRange) for a part not in [0, count()); Error(Io) naming the file.
  std::string read(int64_t part) const;
  // The file holding part `part`.
  std::string path(int64_t part) const;

 private:
  std::string directory_;
  std::string name_;
  int64_t count_;
};

// Accelerate's register_for_checkpointing: an object the caller saves to and restores from bytes. Every
// rank registers the same names; each rank's bytes go to its own folder. save returns the bytes. A
// per-process object sets load, which gets this rank's bytes back, and ties a checkpoint to its number of
// processes. An object any number of processes can load (a state every process holds alike, or a ZeRO
// optimizer's shares) sets load_parts instead, which reads whichever saving process's bytes it needs. Any of
// them may throw (the C API turns a callback's non-zero result into Error(Callback)).
struct CustomObject {
  std::string name;  // a file-name part: [A-Za-z0-9_.-], not empty, not starting with '.'
  std::function<std::string()> save;
  std::function<void(const std::string&)> load;
  std::function<void(const SavedParts&)> load_parts;
};

// Throws Error(InvalidArgument) naming the name when it is not usable as above.
void check_custom_object_name(const std::string& name);

// The objects a checkpoint covers; the caller keeps them alive during the call. Their order is part of
// the checkpoint: load with the same lists, in the same order, as at save.
struct CheckpointObjects {
  std::vector<train::Model*> models;
  std::vector<train::AcceleratedOptimizer*> optimizers;
  std::vector<train::AcceleratedScheduler*> schedulers;
  std::vector<data::Loader*> loaders;
  std::vector<const CustomObject*> custom;  // registration order; restored in that order
  train::GradScaler* scaler = nullptr;                 // the fp16 loss scaler, when the Accelerator has one
  const tracking::Trackers* trackers = nullptr;        // the run whose last logged step the manifest keeps
};

// Collective. The caller waits for its background save in flight first (accelerator/accelerator.hpp does).
// Writes into "<directory>.saving" (each rank its rank<r>/
// part, the main process the rest), waits for every rank, then the main process moves it into place:
// `directory`, if it already exists, is replaced in one atomic exchange, so a run killed while saving
// leaves the previous checkpoint whole. Registered objects are saved first, on every rank, before anything
// is written: a save function that throws (or any other part of the snapshot, ckpt/checkpoint_snapshot.hpp)
// fails the call on every rank (all_or_none), naming the object, and leaves no staging folder; nor does a
// failure to write or to move into place. `directory` is checked first (checkpoint_directory,
// ckpt/save_directory.hpp: a trailing slash is the same directory; "" and "./" are refused with
// Error(InvalidArgument) before anything is written). Throws Error(Io) naming the path on any file-system
// failure. before_move (optional) runs on the main process once every rank's part is written, just before
// the move into place (the rotation of numbered checkpoints: never more than total_limit of them at any
// moment, and none removed for a save that failed to write); every rank returns after it.
void save_state(const std::shared_ptr<distributed::State>& state, const std::string& directory, const CheckpointObjects& objects,
                const std::function<void()>& before_move = {});

// The caller waits for its background save in flight first, as for save_state. Reads and checks every
// file this rank needs (the manifest's world size and object counts, each model tensor's name, shape and dtype,
// each saved state's format) before changing anything; then restores
// models, optimizers, schedulers, the grad scaler, loaders (they resume at the saved batch), this rank's
// random generators and the accumulation counter. Collective: no rank restores anything unless every
// rank's files passed. Throws Error(Io) for a missing file and Error(InvalidArgument) naming the file and
// what is wrong for any mismatch or damage; Error(PeerFailed) naming the rank when only another failed.
// Registered objects: a name registered but not in the manifest, or in the manifest but not registered,
// is Error(InvalidArgument) naming it; every object's file is read before any load function runs. Their
// load functions run first, in registration order, before any built-in object is restored, so that one
// that throws (on any rank: all_or_none again) leaves models, optimizers, ... untouched.
void load_state(const std::shared_ptr<distributed::State>& state, const std::string& directory, const CheckpointObjects& objects);

}  // namespace accel::ckpt
