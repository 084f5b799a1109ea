// Accelerate's trackers (init_trackers, log, end_training): scalars logged by the main process into the
// run directory project_dir/run_name, through the sinks the log_with option names. A run started again in
// the same directory resumes: steps up to the last one already logged are not written twice.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "tracking/sink.hpp"

namespace accel::tracking {

// Keys of accel_state_init_trackers: log_with, a comma-separated list of jsonl, csv and tensorboard;
// overwrite, to start the run directory's metrics afresh instead of resuming them.
const OptionScope& trackers_option_scope();

class Trackers {
 public:
  // On the main process, creates the run directory, writes config_json (verbatim) to config.json and
  // opens the sinks; elsewhere does nothing. Throws Error(InvalidArgument) for an empty project_dir or a
  // run_name that is not one path component, Error(BadOptionValue) for a bad log_with, Error(Io).
  Trackers(bool main_process, const std::string& project_dir, const std::string& run_name,
           const std::string& config_json, const Options* options);

  // Writes one record per sink (main process only). Throws Error(InvalidArgument) for a negative step, an
  // empty or repeated name; Error(Io). A step not after the previous run's last one is skipped.
  void log(const std::vector<Scalar>& scalars, int64_t step);
  // The last step a previous run logged here, when this run resumed one.
  std::optional<int64_t> resumed_after() const { return resumed_after_; }
  const std::string& run_name() const { return run_name_; }
  // The highest step written here, by this run or the one it resumed; nullopt before any (and off the
  // main process, which writes nothing).
  std::optional<int64_t> last_logged_step() const { return last_logged_step_; }

 private:
  bool main_process_;
  std::string run_name_;
  std::optional<int64_t> last_logged_step_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  std::optional<int64_t> resumed_after_;
};

}  // namespace accel::tracking
