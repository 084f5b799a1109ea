#include "formats/mapped_file.hpp"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace accel::formats {

namespace {

[[noreturn]] void fail_on(Code code, const std::string& path, const std::string& problem) {
  fail(code, path + ": " + problem);
}

std::string os_error(int err) { return std::generic_category().message(err); }

// The copy in progress on this thread, if any: where a fault inside [begin, end) jumps back to.
struct ActiveCopy {
  sigjmp_buf jump;
  const char* begin;
  const char* end;
};
thread_local ActiveCopy* active_copy = nullptr;
struct sigaction previous_sigbus {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
  ActiveCopy* copy = active_copy;
  const char* address = static_cast<const char*>(info->si_addr);
  // si_code > 0: raised by a fault, not sent by kill(); the address says it is the copy's source.
  if (copy != nullptr && info->si_code > 0 && address >= copy->begin && address < copy->end) {
    active_copy = nullptr;
    siglongjmp(copy->jump, 1);
  }
  if (previous_sigbus.sa_flags & SA_SIGINFO) {
    previous_sigbus.sa_sigaction(signal, info, context);
  } else if (previous_sigbus.sa_handler != SIG_DFL && previous_sigbus.sa_handler != SIG_IGN) {
    previous_sigbus.sa_handler(signal);
  } else {
    // The default action, as without this handler: the faulting access runs again and the signal kills.
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    ::sigaction(SIGBUS, &fallback, nullptr);
  }
}

void install_sigbus_handler() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (::sigaction(SIGBUS, &action, &previous_sigbus) != 0) {
      fail(Code::Internal, "cannot install the SIGBUS handler for mapped files: " + os_error(errno));
    }
  });
}

}  // namespace

void copy_from_mapping(void* destination, const void* source, size_t n, const std::string& path) {
  if (n == 0) return;
  install_sigbus_handler();
  ActiveCopy copy;
  copy.begin = static_cast<const char*>(source);
  copy.end = copy.begin + n;
  if (sigsetjmp(copy.jump, /*savemask=*/1) != 0) {
    fail_on(Code::Io, path,
            "the file was truncated while mapped (another process shortened it): " + std::to_string(n) +
                " bytes to read are gone");
  }
  active_copy = &copy;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // set before the copy starts, as the handler sees it
  std::memcpy(destination, source, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  active_copy = nullptr;
}

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
