#include "core/files.hpp"

#include <filesystem>
#include <system_error>

#include "core/error.hpp"

namespace accel {

void create_directories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) fail(Code::Io, "cannot create directory '" + path + "': " + error.message());
}

}  // namespace accel
