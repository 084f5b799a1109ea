#include "core/timeline.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"

namespace accel::timeline {

namespace detail {
std::atomic<bool> on{false};
}

namespace {

struct Event {
  std::string name;
  Track track;
  double start_us;
  double end_us;
  std::vector<Arg> args;
};

struct Recorder {
  std::mutex mutex;
  std::string path;
  int32_t rank = 0;
  size_t steps_kept = 100;
  std::deque<std::vector<Event>> finished_steps;
  std::vector<Event> current;
};

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

std::string json_event(const Event& event, int32_t rank) {
  char text[512];
  std::snprintf(text, sizeof text, "{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d",
                event.name.c_str(), event.start_us, std::max(0.0, event.end_us - event.start_us), rank,
                static_cast<int>(event.track));
  std::string line = text;
  for (size_t i = 0; i < event.args.size(); ++i) {
    // %.15g: integers (bytes) print as integers, microseconds with every digit they have.
    std::snprintf(text, sizeof text, "%s\"%s\":%.15g", i == 0 ? ",\"args\":{" : ",", event.args[i].name,
                  event.args[i].value);
    line += text;
  }
  if (!event.args.empty()) line += "}";
  return line + "}";
}

// Names for the process (one per rank) and its two tracks, so that a merged trace reads "rank 1 /
// communication".
std::vector<std::string> metadata(int32_t rank) {
  const std::string pid = std::to_string(rank);
  return {"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"name\":\"rank " + pid + "\"}}",
          "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}",
          "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":1,\"args\":{\"name\":\"main\"}}",
          "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":2,\"args\":{\"name\":\"communication\"}}"};
}

// One event per line between "[" and "]": merging traces is then joining lines.
std::string as_trace(const std::vector<std::string>& lines) {
  std::string text = "[\n";
  for (size_t i = 0; i < lines.size(); ++i) text += lines[i] + (i + 1 < lines.size() ? ",\n" : "\n");
  return text + "]\n";
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void start(const std::string& directory, int32_t rank, int64_t steps_kept) {
  require_argument(steps_kept >= 1, "timeline_steps must be at least 1, got " + std::to_string(steps_kept));
  require_argument(!directory.empty(), "the timeline directory is empty");
  create_directories(directory);
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.path = directory + "/timeline.rank" + std::to_string(rank) + ".json";
  r.rank = rank;
  r.steps_kept = static_cast<size_t>(steps_kept);
  r.finished_steps.clear();
  r.current.clear();
  detail::on.store(true);
}

void stop() {
  if (!enabled()) return;
  detail::on.store(false);
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> lines = metadata(r.rank);
  for (const auto& step : r.finished_steps) {
    for (const auto& event : step) lines.push_back(json_event(event, r.rank));
  }
  for (const auto& event : r.current) lines.push_back(json_event(event, r.rank));
  std::ofstream out(r.path, std::ios::trunc);
  out << as_trace(lines);
  if (!out) fail(Code::Io, "cannot write the timeline '" + r.path + "'");
}

void record(const std::string& name, Track track, double start_us, double end_us, std::vector<Arg> args) {
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.current.push_back({name, track, start_us, end_us, std::move(args)});
}

void end_step() {
  if (!enabled()) return;
  auto& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.finished_steps.push_back(std::move(r.current));
  r.current.clear();
  while (r.finished_steps.size() > r.steps_kept) r.finished_steps.pop_front();
}

std::string merge_directory(const std::string& directory) {
  std::vector<std::string> files;
  for (const std::string& name : list_directory(directory)) {
    if (name.rfind("timeline.rank", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json") {
      files.push_back(directory + "/" + name);
    }
  }
  require_argument(!files.empty(), "'" + directory + "' holds no timeline.rank<r>.json");
  std::sort(files.begin(), files.end());
  std::vector<std::string> lines;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) fail(Code::Io, "cannot read '" + file + "'");
    for (std::string line; std::getline(in, line);) {
      if (line == "[" || line == "]" || line.empty()) continue;
      if (line.back() == ',') line.pop_back();
      lines.push_back(line);
    }
  }
  return as_trace(lines);
}

}  // namespace accel::timeline
