// Where logged scalars go: a sink per format (JSONL, CSV, TensorBoard event files), each in the run's
// directory, each writing a whole record per call straight to the file so that a killed run loses at most
// the record being written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accel::tracking {

struct Scalar {
  std::string name;
  double value;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // The largest step an earlier run wrote into this directory, if any: a resumed run starts after it.
  virtual std::optional<int64_t> last_logged_step() const = 0;
  // Throws Error(Io) naming the file when the write fails.
  virtual void write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) = 0;
};

// Each opens (creating or resuming) its file in directory. Throws Error(Io) naming the file.
std::unique_ptr<Sink> open_jsonl_sink(const std::string& directory);
std::unique_ptr<Sink> open_csv_sink(const std::string& directory);
std::unique_ptr<Sink> open_tensorboard_sink(const std::string& directory);

// The TensorBoard event files in directory (what earlier runs wrote). Throws Error(Io) when it cannot be
// listed.
std::vector<std::string> tensorboard_event_files(const std::string& directory);

}  // namespace accel::tracking
