// A file opened for appending whole records with one write(2) each (no user-space buffer to lose), whose
// torn last record from a killed run is cut off when it is opened again.
#pragma once

#include <string>

namespace accel::tracking {

class AppendFile {
 public:
  // Opens or creates path. With a record_end byte (e.g. '\n'), content after the last record_end (a
  // record the previous run did not finish) is truncated. Throws Error(Io) naming the path.
  AppendFile(std::string path, char record_end);
  // Without truncation: binary files whose records the caller validates.
  explicit AppendFile(std::string path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // Everything in the file when it was opened (after the truncation).
  const std::string& previous_content() const { return previous_; }
  // Writes bytes whole (retrying short writes). Throws Error(Io).
  void append(const std::string& bytes);
  const std::string& path() const { return path_; }

 private:
  void open(bool truncate_torn_record, char record_end);

  std::string path_;
  int fd_ = -1;
  std::string previous_;
};

}  // namespace accel::tracking
