// A whole file mapped read-only: the kernel pages bytes in when, and only when, a caller touches them,
// so files larger than memory work and a loader reads only the rows it needs.
//
// A file another process truncates while it is mapped: touching the lost pages raises SIGBUS, which kills
// the process. Rather than copy every read through read(2) (a system call per row), accel reads mapped
// bytes only through copy_from_mapping, which catches that fault on the reading thread and turns it into
// an error naming the file, as LMDB and SQLite's mmap mode describe for theirs. Any other SIGBUS goes on
// to the handler installed before (by default: the process dies, as before).
#pragma once

#include <cstddef>
#include <string>

namespace accel::formats {

// PROT_READ / MAP_PRIVATE; unmapped on destruction. Errors name the path: Error(Io) with strerror when
// the file cannot be opened, inspected or mapped; Error(InvalidArgument) for an empty file (neither
// format allows one, and mmap cannot map zero bytes).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // Null and 0 only for a moved-from object.
  const unsigned char* data() const { return static_cast<const unsigned char*>(base_); }
  size_t size() const { return size_; }

 private:
  void unmap() noexcept;

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
};

// Copies n bytes from source, inside a mapping of the file at path, to destination (not a mapping). When
// the file was truncated underneath, so that some of those bytes are gone, throws Error(Io) "<path>: the
// file was truncated while mapped ...". The first call installs a process-wide SIGBUS handler (kept for
// the life of the process), which hands every fault outside such a copy to the handler it replaced. Any
// thread may call it.
void copy_from_mapping(void* destination, const void* source, size_t n, const std::string& path);

}  // namespace accel::formats
