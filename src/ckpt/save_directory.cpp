#include "ckpt/save_directory.hpp"

#include "core/error.hpp"

namespace accel::ckpt {

namespace {

std::string without_trailing_slashes(const std::string& directory) {
  const size_t last = directory.find_last_not_of('/');
  if (last == std::string::npos) return directory.empty() ? directory : "/";
  return directory.substr(0, last + 1);
}

void refuse_empty(const std::string& directory, const char* what) {
  if (directory.empty()) fail(Code::InvalidArgument, std::string("the ") + what + " directory is \"\": name a directory");
}

}  // namespace

std::string checkpoint_directory(const std::string& directory) {
  refuse_empty(directory, "checkpoint");
  const std::string trimmed = without_trailing_slashes(directory);
  const std::string last_name = trimmed.substr(trimmed.find_last_of('/') + 1);
  if (trimmed == "/" || last_name == "." || last_name == "..") {
    fail(Code::InvalidArgument, "the checkpoint directory '" + directory +
                                    "' ends in '.' or '..' or is the root, which a new checkpoint cannot be renamed "
                                    "over (the working directory, say): name a directory of its own, such as "
                                    "'checkpoint'");
  }
  return trimmed;
}

std::string model_directory(const std::string& directory) {
  refuse_empty(directory, "model");
  return without_trailing_slashes(directory);
}

}  // namespace accel::ckpt
