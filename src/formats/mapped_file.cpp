#include "formats/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace accel::formats {

namespace {

[[noreturn]] void fail_on(Code code, const std::string& path, const std::string& problem) {
  fail(code, path + ": " + problem);
}

std::string os_error(int err) { return std::generic_category().message(err); }

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_on(Code::Io, path, "cannot open: " + os_error(errno));
  // The mapping outlives the descriptor, so it is closed on every way out of here.
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_on(Code::Io, path, "cannot stat: " + os_error(errno));
  if (!S_ISREG(st.st_mode)) fail_on(Code::Io, path, "not a regular file");
  if (st.st_size == 0) fail_on(Code::InvalidArgument, path, "the file is empty");
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) fail_on(Code::Io, path, "cannot map " + std::to_string(size) + " bytes: " + os_error(errno));
  base_ = base;
  size_ = size;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

}  // namespace accel::formats
