#include "ckpt/one_folder.hpp"

#include <unistd.h>

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

void require_one_folder(distributed::State& state, const std::string& directory, const char* operation) {
  if (state.launch().world_size == 1) return;
  const auto all = distributed::texts_if_different(state, distributed::CallKind::CheckpointFolder, absolute(directory));
  if (!all) return;
  std::string folders;
  for (size_t rank = 0; rank < all->size(); ++rank) {
    folders += (rank == 0 ? "" : ", ") + std::string("process ") + std::to_string(rank) + ": '" + (*all)[rank] + "'";
  }
  fail(Code::InvalidArgument, std::string(operation) + ": the processes name different checkpoint folders (" + folders +
                                  "); a checkpoint is one folder that every process writes its part into: give "
                                  "every process the same path");
}

}  // namespace accel::ckpt
