#include "ckpt/directory_swap.hpp"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/files.hpp"

namespace accel::ckpt {

void move_into_place(const std::string& staging, const std::string& target) {
  const auto refuse = [&](const std::string& why) {
    fail(Code::Io, "cannot move checkpoint '" + staging + "' to '" + target + "': " + why);
  };
  if (!path_exists(target)) {
    if (::rename(staging.c_str(), target.c_str()) != 0) refuse(std::strerror(errno));
    return;
  }
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    refuse(std::strerror(errno));
  }
  try {
    remove_all(staging);
  } catch (const Error& error) {
    refuse(std::string("the old checkpoint, now at the first path, could not be removed: ") + error.what());
  }
}

}  // namespace accel::ckpt
