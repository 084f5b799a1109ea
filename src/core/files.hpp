// Filesystem steps several areas take, with accel's errors.
//
// POSIX calls rather than std::filesystem: pip's LibTorch (libtorch.so, libtorch_cpu.so) exports its own
// copies of std::filesystem's symbols, which the dynamic linker finds before libstdc++'s, and calls from
// our code then land in them and crash. tests/abi/check_no_std_filesystem.py keeps std::filesystem out.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace accel {

// Creates path and its missing parents (mkdir -p); a directory already there is fine. Throws Error(Io)
// naming the path and the reason, also when path or a parent exists and is not a directory.
void create_directories(const std::string& path);

// Removes path and, when it is a directory, everything under it (rm -rf). Symbolic links are removed,
// never followed, so nothing outside path is touched. A missing path is not an error. Throws Error(Io)
// naming the first entry that could not be listed or removed, and the reason.
void remove_all(const std::string& path);

// Whether path names something, following symbolic links (a dangling link: false). Throws Error(Io)
// naming the path when the file system cannot tell (a parent that may not be searched, say).
bool path_exists(const std::string& path);

// Whether path is a directory or a symbolic link to one; false when it does not exist. Throws Error(Io)
// as path_exists does.
bool is_directory(const std::string& path);

// The names in a directory, without "." and "..", in no particular order. Throws Error(Io) naming the
// directory when it cannot be read (missing, not a directory, not permitted).
std::vector<std::string> list_directory(const std::string& directory);

// The whole file. Throws Error(Io) naming the path and the reason.
std::string read_file(const std::string& path);

// directory + "/" + name, without doubling a separator directory ends in; name alone when directory is
// empty.
std::string join_path(const std::string& directory, const std::string& name);

// The last name in path once "." and "name/.." are resolved lexically (the file system is not asked),
// ignoring trailing separators: "a/b", "a/b/" and "a/b/." give "b", "a/b/.." gives "a"; "/" and "" give "".
std::string last_name_in_path(const std::string& path);

// A file that readers see whole or not at all: the bytes go to a temporary file beside `path` (path +
// ".tmp.<pid>"), which commit() flushes to disk and renames over path. Until then path keeps its old
// contents; a temporary never committed is removed when the object goes. Every failure is Error(Io)
// naming the file and the reason.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  void write(const void* data, size_t size);
  // Flushes and closes the temporary, so that many files can wait for their commit without holding a
  // descriptor each. Writing after it is an error.
  void finish();
  // finish(), then the rename over path.
  void commit();

 private:
  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace accel
