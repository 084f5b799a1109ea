// The step timeline: a Chrome trace (JSON event format, read by Perfetto and chrome://tracing) of where a
// rank's time goes: forward, backward, each gradient bucket from ready to all-reduce done, the optimizer
// step, loader waits, collectives, saves. One track for the calling thread, one for communication.
// Off by default: every entry point then costs one relaxed atomic load. On, the events of the last
// steps_kept steps are kept (a ring, so memory stays bounded) and written when the timeline stops.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace accel::timeline {

enum class Track { Main = 1, Communication = 2 };

namespace detail {
extern std::atomic<bool> on;
}

inline bool enabled() { return detail::on.load(std::memory_order_relaxed); }

// Starts recording for rank; the trace goes to directory/timeline.rank<rank>.json when it stops.
// Throws Error(InvalidArgument) for steps_kept < 1, Error(Io) when the directory cannot be created.
void start(const std::string& directory, int32_t rank, int64_t steps_kept);
// Writes the trace and stops recording (no-op when not recording). Throws Error(Io).
void stop();

// Microseconds on the steady clock, the trace's time base.
double now_us();
// A number shown beside an event (a bucket's bytes, a step's overlap figures).
struct Arg {
  const char* name;  // a string literal: events outlive the caller
  double value;
};
// One complete event with its arguments. Thread-safe.
void record(const std::string& name, Track track, double start_us, double end_us, std::vector<Arg> args = {});
// Ends the current step: steps older than steps_kept are dropped.
void end_step();

// Records [construction, destruction) as one event, when the timeline is on.
class Span {
 public:
  explicit Span(const char* name, Track track = Track::Main)
      : name_(name), track_(track), start_us_(enabled() ? now_us() : -1) {}
  ~Span() {
    if (start_us_ >= 0 && enabled()) record(name_, track_, start_us_, now_us());
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* name_;
  Track track_;
  double start_us_;
};

// The ranks' traces of a directory (timeline.rank*.json) as one trace. Throws Error(Io), and
// Error(InvalidArgument) when the directory holds no trace.
std::string merge_directory(const std::string& directory);

}  // namespace accel::timeline
