// Numbered checkpoints in a project (Accelerate's ProjectConfiguration with automatic_checkpoint_naming):
// project_dir/checkpoints/checkpoint_<i>, i from the state's checkpoint iteration, at most total_limit of
// them kept, and the latest one found by number (not by date) when no folder is named.
#pragma once

#include <optional>
#include <string>

#include "ckpt/background_save.hpp"
#include "ckpt/checkpoint.hpp"

namespace accel::ckpt {

// Collective. Saves into project_dir/checkpoints/checkpoint_<iteration>, after the main process removed
// the oldest numbered checkpoints beyond total_limit - 1; then the iteration moves on by one. Throws
// Error(InvalidArgument) when the state has no project_dir, or when total_limit is negative; Error(Io)
// as save_state, and when the folder to write already exists (as Accelerate refuses to overwrite it).
void save_project_checkpoint(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects);

// The same as a background save (BackgroundSaves::start): the previous save is waited for first, the
// folder numbered and checked, the iteration moved on at once (a save that fails in the background leaves
// its number unused), and rank 0's writer rotates once the new checkpoint is in place.
void save_project_checkpoint_in_background(const std::shared_ptr<distributed::State>& state, BackgroundSaves& saves,
                                           const CheckpointObjects& objects);

// Loads the highest-numbered checkpoint of project_dir/checkpoints. Error(InvalidArgument) without a
// project_dir, Error(Io) when there is no numbered checkpoint; load_state's errors.
void load_latest_checkpoint(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects);

// The number of a folder named checkpoint_<digits>; nullopt for any other name.
std::optional<int64_t> checkpoint_number(const std::string& folder_name);

// load_state, then, when the folder is a numbered checkpoint, the state's iteration set to its number + 1
// so that the next automatically named save does not overwrite it (Accelerate does the same).
void load_checkpoint(const std::shared_ptr<distributed::State>& state, const std::string& directory,
                     const CheckpointObjects& objects);

}  // namespace accel::ckpt
