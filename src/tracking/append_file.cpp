#include "tracking/append_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/files.hpp"

namespace accel::tracking {

namespace {

[[noreturn]] void io_failure(const std::string& what, const std::string& path) {
  fail(Code::Io, what + " '" + path + "': " + std::strerror(errno));
}

}  // namespace

AppendFile::AppendFile(std::string path, char record_end) : path_(std::move(path)) { open(true, record_end); }

AppendFile::AppendFile(std::string path) : path_(std::move(path)) { open(false, '\0'); }

void AppendFile::open(bool truncate_torn_record, char record_end) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) io_failure("cannot open", path_);
  previous_ = read_file(path_);
  if (truncate_torn_record && !previous_.empty() && previous_.back() != record_end) {
    const size_t end = previous_.rfind(record_end);
    previous_.resize(end == std::string::npos ? 0 : end + 1);
    if (::ftruncate(fd_, static_cast<off_t>(previous_.size())) != 0) {
      const int saved = errno;
      ::close(fd_);
      errno = saved;
      io_failure("cannot cut the torn last record of", path_);
    }
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t written = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (written < 0) {
      if (errno == EINTR) continue;
      io_failure("cannot write to", path_);
    }
    done += static_cast<size_t>(written);
  }
}

}  // namespace accel::tracking
