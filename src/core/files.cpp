#include "core/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io("cannot read", path, errno);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
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

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temporary_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("cannot create", temporary_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) fail(Code::Io, "cannot write '" + temporary_ + "': already finished");
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail_io("cannot write", temporary_, errno);
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFile::finish() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  // A rename can reach the disk before the data it names; without the flush a crash could leave the new
  // name on an empty file.
  const bool flushed = ::fsync(fd) == 0;
  const int error = errno;
  if (::close(fd) != 0 && flushed) fail_io("cannot close", temporary_, errno);
  if (!flushed) fail_io("cannot flush", temporary_, error);
}

void AtomicFile::commit() {
  finish();
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    fail(Code::Io, "cannot move '" + temporary_ + "' to '" + path_ + "': " + std::strerror(errno));
  }
  committed_ = true;
}

}  // namespace accel
