#include "ckpt/project_checkpoints.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace accel::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "checkpoint_";

fs::path checkpoints_dir(const distributed::State& state) {
  const std::string& project = state.options().get_string("project_dir");
  if (project.empty()) {
    fail(Code::InvalidArgument, "no checkpoint directory given and the state has no project_dir to name one");
  }
  return fs::path(project) / "checkpoints";
}

// The numbered checkpoints (finished ones: staging folders end in .saving), lowest number first.
std::vector<std::pair<int64_t, fs::path>> numbered_checkpoints(const fs::path& directory) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  for (fs::directory_iterator entry(directory, error), end; !error && entry != end; entry.increment(error)) {
    const auto number = checkpoint_number(entry->path().filename().string());
    if (number && entry->is_directory()) found.emplace_back(*number, entry->path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void remove_beyond_limit(const fs::path& directory, int64_t total_limit) {
  auto existing = numbered_checkpoints(directory);
  // Room for the one about to be written.
  const int64_t excess = static_cast<int64_t>(existing.size()) + 1 - total_limit;
  for (int64_t i = 0; i < excess; ++i) {
    std::error_code error;
    fs::remove_all(existing[static_cast<size_t>(i)].second, error);
    if (error) fail(Code::Io, "cannot remove old checkpoint '" + existing[static_cast<size_t>(i)].second.string() + "': " + error.message());
  }
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
  const fs::path directory = checkpoints_dir(*state);
  const int64_t total_limit = state->options().get_int("total_limit");
  if (total_limit < 0) fail(Code::InvalidArgument, "total_limit must be >= 0, got " + std::to_string(total_limit));
  const fs::path target = directory / (kPrefix + std::to_string(state->checkpoint_iteration()));
  if (fs::exists(target)) {
    fail(Code::Io, "checkpoint '" + target.string() + "' already exists; a numbered checkpoint is never overwritten");
  }
  if (state->launch().rank == 0 && total_limit > 0) remove_beyond_limit(directory, total_limit);
  save_state(state, target.string(), objects);
  state->set_checkpoint_iteration(state->checkpoint_iteration() + 1);
}

void load_latest_checkpoint(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects) {
  const fs::path directory = checkpoints_dir(*state);
  const auto existing = numbered_checkpoints(directory);
  if (existing.empty()) fail(Code::Io, "no checkpoint_<i> folder in '" + directory.string() + "' to load");
  load_checkpoint(state, existing.back().second.string(), objects);
}

void load_checkpoint(const std::shared_ptr<distributed::State>& state, const std::string& directory,
                     const CheckpointObjects& objects) {
  load_state(state, directory, objects);
  fs::path folder = fs::path(directory).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // "checkpoint_3/"
  const auto number = checkpoint_number(folder.filename().string());
  if (number) state->set_checkpoint_iteration(*number + 1);
}

}  // namespace accel::ckpt
