// The Accelerator a program holds (Accelerate's Accelerator): one per accel_state_t handle, over the
// process state that every handle of the process shares (distributed/state.hpp, Accelerate's
// PartialState). It owns what Accelerate keeps on its Accelerator object: the training loop
// (train/training_loop.hpp: accumulation, backward, the fp16 scaler, the prepared optimizers), the objects
// registered for checkpointing, the trackers and the background saves; and it holds the policies that
// join them: a checkpoint carries this Accelerator's scaler, registered objects and tracker run; a save or
// load first waits for the background save in flight; a training call first reports that save's failure;
// a checkpoint call without a directory means the project's numbered checkpoints.
//
// Thread safety: one thread at a time, as the training loop that drives it (the background save's writer
// is its own thread and touches nothing here).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/background_save.hpp"
#include "ckpt/checkpoint.hpp"
#include "ckpt/project_checkpoints.hpp"
#include "core/env.hpp"
#include "core/options.hpp"
#include "distributed/state.hpp"
#include "tracking/trackers.hpp"
#include "train/training_loop.hpp"

namespace accel {

class Accelerator {
 public:
  // Joins (or makes) the process state (distributed::State::acquire) with these options; the project
  // (project_dir, total_limit), as Accelerate's ProjectConfiguration, and gradient_accumulation_steps, which
  // a later Accelerate Accelerator sets anew, are this Accelerator's own.
  Accelerator(const Options* options, const EnvLookup& env);
  // Waits for the background save in flight while the process group still lives (rank 0 serves the
  // store its writer reports to); a failure no call reported goes to stderr.
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  const std::shared_ptr<distributed::State>& state() const { return state_; }
  // Accumulation, backward, clipping, the fp16 scaler and the optimizers. Shared with what is made from it
  // (optimizers, train steps), which may outlive this object.
  const std::shared_ptr<train::TrainingLoop>& training() const { return training_; }
  int64_t gradient_accumulation_steps() const { return training_->gradient_accumulation_steps(); }

  // Accelerate's register_for_checkpointing: saved and loaded with every checkpoint of this Accelerator,
  // in registration order. Error(InvalidArgument) for a name unusable in a file name
  // (ckpt::check_custom_object_name) or already registered.
  void register_for_checkpointing(ckpt::CustomObject object);
  // Accelerate's free_memory for what this Accelerator holds: the training half's (train::TrainingLoop::
  // free_memory) and the objects registered for checkpointing, so that the objects a program prepares and
  // registers afresh afterwards (to resume into new objects) take the same names again.
  void free_memory();

  // Collective save_state / load_state of the caller's objects plus this Accelerator's own (registered
  // objects, the scaler, the tracker run). Each first waits for the background save in flight, throwing
  // its unreported failure instead. No directory: the project's next numbered checkpoint, or the latest
  // one for a load (ckpt/project_checkpoints.hpp); otherwise ckpt::save_state / load_checkpoint. Errors
  // as those.
  void save_state(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects);
  void load_state(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects);
  // The same save, written by a thread of its own (ckpt/background_save.hpp) while training goes on; its
  // failure is thrown by the next save, load, wait_for_save, backward or train step.
  void save_state_async(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects);
  // Waits for the background save in flight, then throws its failure if no call reported it yet.
  void wait_for_save();
  // The number of the next numbered checkpoint (ckpt/project_checkpoints.hpp); set: Error(InvalidArgument)
  // when negative.
  int64_t checkpoint_iteration() const { return project_.iteration; }
  void set_checkpoint_iteration(int64_t iteration);
  // Collective teardown of the process group (distributed::State::shutdown), after the background save.
  void shutdown();

  // Accelerate's init_trackers: replaces the trackers (tracking::Trackers' constructor and errors).
  void init_trackers(const std::string& project_dir, const std::string& run_name, const std::string& config_json,
                     const Options* options);
  // Error(InvalidState) when init_trackers was not called or the trackers were finished.
  tracking::Trackers& trackers();
  // Accelerate's end_training: closes the files; logging needs a new init_trackers. Idempotent.
  void finish_trackers() { trackers_.reset(); }

 private:
  Accelerator(const Options* options, const EnvLookup& env, const ResolvedOptions& own);
  ckpt::CheckpointObjects with_own(ckpt::CheckpointObjects objects) const;

  std::shared_ptr<distributed::State> state_;
  std::shared_ptr<train::TrainingLoop> training_;
  ckpt::ProjectConfig project_;
  std::vector<std::unique_ptr<ckpt::CustomObject>> custom_objects_;
  std::unique_ptr<tracking::Trackers> trackers_;
  // Declared last, so that it goes first: destroying it waits for the save in flight.
  std::shared_ptr<ckpt::BackgroundSaves> background_saves_;
};

}  // namespace accel
