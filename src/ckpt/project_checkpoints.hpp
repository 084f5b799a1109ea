// Numbered checkpoints in a project (Accelerate's ProjectConfiguration with automatic_checkpoint_naming):
// project_dir/checkpoints/checkpoint_<i>, i from the project's iteration, at most total_limit of them kept,
// and the latest one found by number (not by date) when no folder is named. A project belongs to an
// Accelerator (one state handle), as Accelerate's ProjectConfiguration does, not to the process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ckpt/background_save.hpp"
#include "ckpt/checkpoint.hpp"
#include "core/options.hpp"

namespace accel::ckpt {

struct ProjectConfig {
  std::string project_dir;  // empty: none (a numbered save or load is then an error)
  int64_t total_limit = 0;  // numbered checkpoints kept; 0: all
  int64_t iteration = 0;    // the number of the next numbered checkpoint
};

// The state options project_dir and total_limit (distributed/state_options.hpp), resolved.
ProjectConfig project_config(const ResolvedOptions& options);

// Collective. Saves into project_dir/checkpoints/checkpoint_<iteration>, the main process removing the
// oldest numbered checkpoints beyond total_limit - 1 just before it moves into place; then the iteration
// moves on by one. Throws Error(InvalidArgument) when the project has no project_dir, or when total_limit is
// negative; Error(Io) as save_state, and when the folder to write already exists (as Accelerate refuses to
// overwrite it).
void save_project_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                             const CheckpointObjects& objects);

// The same as a background save (BackgroundSaves::start): the previous save is waited for first, the
// folder numbered and checked, the iteration moved on at once (a save that fails in the background leaves
// its number unused), and rank 0's writer rotates once the new checkpoint is in place.
void save_project_checkpoint_in_background(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                                           BackgroundSaves& saves, const CheckpointObjects& objects);

// Loads the highest-numbered checkpoint of project_dir/checkpoints. Error(InvalidArgument) without a
// project_dir, Error(Io) when there is no numbered checkpoint; load_state's errors.
void load_latest_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                            const CheckpointObjects& objects);

// The number of a folder named checkpoint_<digits>; nullopt for any other name.
std::optional<int64_t> checkpoint_number(const std::string& folder_name);

// load_state, then, when the folder is a numbered checkpoint, the project's iteration set to its number + 1
// so that the next automatically named save does not overwrite it (Accelerate leaves it, so a resumed run
// had to set it by hand).
void load_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                     const std::string& directory, const CheckpointObjects& objects);

}  // namespace accel::ckpt
