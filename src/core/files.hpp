// Filesystem steps several areas take, with accel's errors.
#pragma once

#include <string>

namespace accel {

// Creates path and its missing parents (mkdir -p). Throws Error(Io) naming the path and the reason.
void create_directories(const std::string& path);

}  // namespace accel
