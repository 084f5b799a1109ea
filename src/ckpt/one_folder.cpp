#include "ckpt/one_folder.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "core/error.hpp"
#include "distributed/collectives/collectives.hpp"

namespace accel::ckpt {

namespace {

// Relative to this process's working directory, which may differ between the processes.
std::string absolute(const std::string& directory) {
  if (!directory.empty() && directory.front() == '/') return directory;
  std::vector<char> cwd(PATH_MAX);
  if (::getcwd(cwd.data(), cwd.size()) == nullptr) return directory;
  return std::string(cwd.data()) + "/" + directory;
}

}  // namespace

void require_one_folder(distributed::State& state, const std::string& directory, const char* operation,
                        const std::string& model_files) {
  if (state.launch().world_size == 1) return;
  // The folder, then what is compared with it; a path holds no NUL.
  const auto all = distributed::texts_if_different(state, distributed::CallKind::CheckpointFolder,
                                                   absolute(directory) + '\0' + model_files);
  if (!all) return;
  const auto folder = [](const std::string& text) { return text.substr(0, text.find('\0')); };
  const auto files = [](const std::string& text) { return text.substr(text.find('\0') + 1); };
  const bool same_folder = std::all_of(all->begin(), all->end(), [&](const std::string& text) { return folder(text) == folder(all->front()); });
  std::string listed;
  for (size_t rank = 0; rank < all->size(); ++rank) {
    listed += (rank == 0 ? "" : ", ") + std::string("process ") + std::to_string(rank) + ": '" +
              (same_folder ? files((*all)[rank]) : folder((*all)[rank])) + "'";
  }
  if (same_folder) {
    fail(Code::InvalidArgument, std::string(operation) + ": the processes write the models differently (" + listed +
                                    "); every process must give each model the same checkpoint_model");
  }
  fail(Code::InvalidArgument, std::string(operation) + ": the processes name different checkpoint folders (" + listed +
                                  "); a checkpoint is one folder that every process writes its part into: give "
                                  "every process the same path");
}

}  // namespace accel::ckpt
