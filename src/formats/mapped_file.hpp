// A whole file mapped read-only: the kernel pages bytes in when, and only when, a caller touches them,
// so files larger than memory work and a loader reads only the rows it needs.
//
// If another process truncates the file while it is mapped, touching the lost pages raises SIGBUS, as
// with any mapping.
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

}  // namespace accel::formats
