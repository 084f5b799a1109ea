#include "core/files.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.hpp"

namespace accel {

namespace {

[[noreturn]] void fail_io(const std::string& what, const std::string& path, int error) {
  fail(Code::Io, what + " '" + path + "': " + std::strerror(error));
}

// stat's answer: false when path does not exist, as std::filesystem::status reports not_found.
bool stat_path(const std::string& path, struct stat& status) {
  if (::stat(path.c_str(), &status) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  fail_io("cannot access", path, errno);
}

}  // namespace

void create_directories(const std::string& path) {
  // Each prefix ending before a separator, then the whole path.
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0777) != 0) {
      // Another process (a rank beside this one) may have made it meanwhile: fine, if it is a directory.
      const int error = errno;
      struct stat status;
      if (::stat(prefix.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
        fail_io("cannot create directory", path, error == EEXIST ? ENOTDIR : error);
      }
    }
    if (end == std::string::npos) return;
  }
}

void remove_all(const std::string& path) {
  struct stat status;
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return;
    fail_io("cannot remove", path, errno);
  }
  if (S_ISDIR(status.st_mode)) {
    for (const std::string& name : list_directory(path)) remove_all(join_path(path, name));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) fail_io("cannot remove", path, errno);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    fail_io("cannot remove", path, errno);
  }
}

bool path_exists(const std::string& path) {
  struct stat status;
  return stat_path(path, status);
}

bool is_directory(const std::string& path) {
  struct stat status;
  return stat_path(path, status) && S_ISDIR(status.st_mode);
}

std::vector<std::string> list_directory(const std::string& directory) {
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(directory.c_str()), ::closedir);
  if (!dir) fail_io("cannot list", directory, errno);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) break;
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  if (errno != 0) fail_io("cannot list", directory, errno);
  return names;
}

std::string join_path(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

std::string last_name_in_path(const std::string& path) {
  std::vector<std::string> names;
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string name = path.substr(begin, end - begin);
    begin = end + 1;
    if (name.empty() || name == ".") continue;
    if (name == ".." && !names.empty() && names.back() != "..") {
      names.pop_back();
    } else if (name != ".." || path.front() != '/') {  // above the root is the root
      names.push_back(name);
    }
  }
  return names.empty() ? "" : names.back();
}

}  // namespace accel
