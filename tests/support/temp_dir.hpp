// Where tests put their files. Not std::filesystem::temp_directory_path: see tests/abi/check_no_std_filesystem.py.
#pragma once

#include <cstdlib>
#include <string>

namespace test_support {

// $TMPDIR when set, /tmp otherwise.
inline std::string temp_directory() {
  const char* dir = std::getenv("TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

}  // namespace test_support
