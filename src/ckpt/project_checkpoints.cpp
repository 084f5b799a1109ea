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

std::string checkpoints_dir(const distributed::State& state) {
  const std::string& project = state.options().get_string("project_dir");
  if (project.empty()) {
    fail(Code::InvalidArgument, "no checkpoint directory given and the state has no project_dir to name one");
  }
  return join_path(project, "checkpoints");
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
  std::function<void()> rotate;  // the main process's rotation once the checkpoint is in place; empty elsewhere
};

// The folder of the next numbered save, refused when it exists, with what to remove after it.
NextCheckpoint next_checkpoint(const distributed::State& state) {
  const std::string directory = checkpoints_dir(state);
  const int64_t total_limit = state.options().get_int("total_limit");
  if (total_limit < 0) fail(Code::InvalidArgument, "total_limit must be >= 0, got " + std::to_string(total_limit));
  NextCheckpoint next{join_path(directory, kPrefix + std::to_string(state.checkpoint_iteration())), {}};
  if (path_exists(next.directory)) {
    fail(Code::Io, "checkpoint '" + next.directory + "' already exists; a numbered checkpoint is never overwritten");
  }
  if (state.launch().rank == 0 && total_limit > 0) next.rotate = [directory, total_limit] { remove_beyond_limit(directory, total_limit); };
  return next;
}

}  // namespace

std::optional<int64_t> checkpoint_number(const std::string& folder_name) {
  const std::string prefix(kPrefix);
  if (folder_name.size() <= prefix.size() || folder_name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = folder_name.substr(prefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

void save_project_checkpoint(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects) {
  const NextCheckpoint next = next_checkpoint(*state);
  save_state(state, next.directory, objects);
  state->set_checkpoint_iteration(state->checkpoint_iteration() + 1);
  // Only once the new checkpoint is in place (save_state returns after every rank's part is renamed into
  // it): a save that fails never costs an older one. Accelerate rotates before saving.
  if (next.rotate) next.rotate();
}

void save_project_checkpoint_in_background(const std::shared_ptr<distributed::State>& state, BackgroundSaves& saves,
                                           const CheckpointObjects& objects) {
  // The previous save's folder and rotation are done before this one is numbered and checked.
  saves.wait();
  NextCheckpoint next = next_checkpoint(*state);
  saves.start(state, next.directory, objects, std::move(next.rotate));
  state->set_checkpoint_iteration(state->checkpoint_iteration() + 1);
}

void load_latest_checkpoint(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects) {
  const std::string directory = checkpoints_dir(*state);
  const auto existing = numbered_checkpoints(directory);
  if (existing.empty()) fail(Code::Io, "no checkpoint_<i> folder in '" + directory + "' to load");
  load_checkpoint(state, existing.back().second, objects);
}

void load_checkpoint(const std::shared_ptr<distributed::State>& state, const std::string& directory,
                     const CheckpointObjects& objects) {
  load_state(state, directory, objects);
  const auto number = checkpoint_number(last_name_in_path(directory));  // "checkpoint_3/" too
  if (number) state->set_checkpoint_iteration(*number + 1);
}

}  // namespace accel::ckpt
