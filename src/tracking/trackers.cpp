#include "tracking/trackers.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/utf8.hpp"
#include "tracking/append_file.hpp"

namespace accel::tracking {

namespace {

std::vector<std::unique_ptr<Sink>> open_sinks(const std::string& log_with, const std::string& directory) {
  std::vector<std::unique_ptr<Sink>> sinks;
  std::set<std::string> seen;
  std::stringstream stream(log_with);
  for (std::string name; std::getline(stream, name, ',');) {
    if (!seen.insert(name).second) continue;
    if (name == "jsonl") {
      sinks.push_back(open_jsonl_sink(directory));
    } else if (name == "csv") {
      sinks.push_back(open_csv_sink(directory));
    } else if (name == "tensorboard") {
      sinks.push_back(open_tensorboard_sink(directory));
    } else {
      fail(Code::BadOptionValue, "option 'log_with': '" + name + "' is not a tracker (expected a comma-separated list "
                                 "of jsonl, csv and tensorboard)");
    }
  }
  if (sinks.empty()) fail(Code::BadOptionValue, "option 'log_with' names no tracker");
  return sinks;
}

// The files the sinks write, and only those: a fresh run in a directory that holds an earlier one.
void remove_metrics(const std::string& directory) {
  std::vector<std::string> doomed{directory + "/metrics.jsonl", directory + "/metrics.csv"};
  for (auto& path : tensorboard_event_files(directory)) doomed.push_back(std::move(path));
  for (const auto& path : doomed) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      fail(Code::Io, "cannot remove '" + path + "': " + std::strerror(errno));
    }
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Trackers::Trackers(bool main_process, const std::string& project_dir, const std::string& run_name,
                   const std::string& config_json, const Options* options)
    : main_process_(main_process), run_name_(run_name) {
  const auto settings = resolve_options(trackers_option_scope(), options);
  require_argument(!project_dir.empty(), "the project directory is empty");
  require_utf8(run_name, "run name");
  require_argument(!run_name.empty() && run_name != "." && run_name != ".." && run_name.find('/') == std::string::npos,
                   "run name '" + run_name + "' is not a single directory name");
  const std::string& log_with = settings.get_string("log_with");
  if (!main_process_) return;
  const std::string directory = project_dir + "/" + run_name;
  create_directories(directory);
  if (settings.get_bool("overwrite")) remove_metrics(directory);
  if (!config_json.empty()) {
    AppendFile config(directory + "/config.json.tmp");
    config.append(config_json);
    if (std::rename((directory + "/config.json.tmp").c_str(), (directory + "/config.json").c_str()) != 0) {
      fail(Code::Io, "cannot write '" + directory + "/config.json': " + std::strerror(errno));
    }
  }
  sinks_ = open_sinks(log_with, directory);
  for (const auto& sink : sinks_) {
    if (const auto last = sink->last_logged_step(); last && (!resumed_after_ || *last > *resumed_after_)) {
      resumed_after_ = last;
    }
  }
  last_logged_step_ = resumed_after_;
}

void Trackers::log(const std::vector<Scalar>& scalars, int64_t step) {
  require_argument(step >= 0, "step " + std::to_string(step) + " is negative");
  std::set<std::string> names;
  for (const auto& scalar : scalars) {
    require_argument(!scalar.name.empty(), "a scalar has an empty name");
    require_utf8(scalar.name, "scalar name");
    require_argument(names.insert(scalar.name).second, "scalar '" + scalar.name + "' is logged twice in one call");
  }
  if (!main_process_ || scalars.empty() || (resumed_after_ && step <= *resumed_after_)) return;
  const double wall_time = now_seconds();
  for (const auto& sink : sinks_) sink->write(step, wall_time, scalars);
  if (!sinks_.empty() && (!last_logged_step_ || step > *last_logged_step_)) last_logged_step_ = step;
}

}  // namespace accel::tracking
