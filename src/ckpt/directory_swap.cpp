#include "ckpt/directory_swap.hpp"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "core/error.hpp"

namespace accel::ckpt {

namespace fs = std::filesystem;

void move_into_place(const fs::path& staging, const fs::path& target) {
  const auto refuse = [&](const std::string& why) {
    fail(Code::Io, "cannot move checkpoint '" + staging.string() + "' to '" + target.string() + "': " + why);
  };
  std::error_code error;
  if (!fs::exists(target, error)) {
    fs::rename(staging, target, error);
    if (error) refuse(error.message());
    return;
  }
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    refuse(std::strerror(errno));
  }
  fs::remove_all(staging, error);
  if (error) refuse("the old checkpoint, now at the first path, could not be removed: " + error.message());
}

}  // namespace accel::ckpt
