#include "ckpt/project_checkpoints.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"

namespace accel::ckpt {

namespace {

constexpr const char* kPrefix = "checkpoint_";

std::string checkpoints_dir(const ProjectConfig& project) {
  if (project.project_dir.empty()) {
    fail(Code::InvalidArgument, "no checkpoint directory given and the state has no project_dir to name one");
  }
  return join_path(project.project_dir, "checkpoints");
}

// The numbered checkpoints (finished ones: staging folders end in .saving), lowest number first.
std::vector<std::pair<int64_t, std::string>> numbered_checkpoints(const std::string& directory) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!is_directory(directory)) return found;  // before the first save
  for (const std::string& name : list_directory(directory)) {
    const auto number = checkpoint_number(name);
    if (number && is_directory(join_path(directory, name))) found.emplace_back(*number, join_path(directory, name));
  }
  std::sort(found.begin(), found.end());
  return found;
}

void remove_beyond_limit(const std::string& directory, int64_t total_limit) {
  auto existing = numbered_checkpoints(directory);
  const int64_t excess = static_cast<int64_t>(existing.size()) - total_limit;
  for (int64_t i = 0; i < excess; ++i) remove_all(existing[static_cast<size_t>(i)].second);
}

struct NextCheckpoint {
  std::string directory;
  // The main process's rotation, just before the new checkpoint moves into place; empty elsewhere.
  std::function<void()> rotate;
};

// The folder of the next numbered save, refused when it exists, with what to remove after it.
NextCheckpoint next_checkpoint(const distributed::State& state, const ProjectConfig& project) {
  const std::string directory = checkpoints_dir(project);
  const int64_t total_limit = project.total_limit;
  if (total_limit < 0) fail(Code::InvalidArgument, "total_limit must be >= 0, got " + std::to_string(total_limit));
  NextCheckpoint next{join_path(directory, kPrefix + std::to_string(project.iteration)), {}};
  if (path_exists(next.directory)) {
    fail(Code::Io, "checkpoint '" + next.directory + "' already exists; a numbered checkpoint is never overwritten");
  }
  if (state.launch().rank == 0 && total_limit > 0) {
    next.rotate = [directory, total_limit] { remove_beyond_limit(directory, total_limit - 1); };
  }
  return next;
}

}  // namespace

ProjectConfig project_config(const ResolvedOptions& options) {
  return ProjectConfig{options.get_string("project_dir"), options.get_int("total_limit"), 0};
}

std::optional<int64_t> checkpoint_number(const std::string& folder_name) {
  const std::string prefix(kPrefix);
  if (folder_name.size() <= prefix.size() || folder_name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = folder_name.substr(prefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

void save_project_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                             const CheckpointObjects& objects) {
  const NextCheckpoint next = next_checkpoint(*state, project);
  // Once every rank's part is written, before the new one moves into place: a save that fails to write never
  // costs an older one (Accelerate rotates before saving), and no rank, during the save or after it, sees
  // more than total_limit checkpoints (rotating after the move let one see total_limit + 1).
  save_state(state, next.directory, objects, next.rotate);
  ++project.iteration;
}

void save_project_checkpoint_in_background(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                                           BackgroundSaves& saves, const CheckpointObjects& objects) {
  // The previous save's folder and rotation are done before this one is numbered and checked.
  saves.wait();
  NextCheckpoint next = next_checkpoint(*state, project);
  saves.start(state, next.directory, objects, std::move(next.rotate));
  ++project.iteration;
}

void load_latest_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                            const CheckpointObjects& objects) {
  const std::string directory = checkpoints_dir(project);
  const auto existing = numbered_checkpoints(directory);
  if (existing.empty()) fail(Code::Io, "no checkpoint_<i> folder in '" + directory + "' to load");
  load_checkpoint(state, project, existing.back().second, objects);
}

void load_checkpoint(const std::shared_ptr<distributed::State>& state, ProjectConfig& project,
                     const std::string& directory, const CheckpointObjects& objects) {
  load_state(state, directory, objects);
  const auto number = checkpoint_number(last_name_in_path(directory));  // "checkpoint_3/" too
  if (number) project.iteration = *number + 1;
}

}  // namespace accel::ckpt
