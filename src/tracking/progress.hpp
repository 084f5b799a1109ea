// A progress bar on the main process, as tqdm draws it: steps done of the total, elapsed and remaining
// time, rate and the last loss; redrawn in place on a terminal, printed as plain periodic lines otherwise
// (logs and CI get a line per tenth of the run or per 30 s, not a redraw per step).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace accel::tracking {

struct ProgressSnapshot {
  std::string description;
  int64_t done = 0;
  int64_t total = 0;  // <= 0: unknown
  double elapsed_s = 0;
  std::optional<double> loss;
};

// One line, without a line break: "train  42% [########............] 420/1000 00:12<00:17 34.1 step/s loss 0.4312".
std::string render_progress(const ProgressSnapshot& snapshot);

class ProgressBar {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // Draws nothing unless main_process. terminal: redraw in place (else periodic plain lines).
  ProgressBar(bool main_process, int64_t total, std::string description, std::FILE* out, bool terminal, Clock clock);
  // The process's bar on stdout, with the steady clock.
  ProgressBar(bool main_process, int64_t total, std::string description);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Throws Error(InvalidArgument) for a negative step count, and for one that would take the count of
  // steps done past INT64_MAX.
  void advance(int64_t steps, std::optional<double> loss);
  // The final line (also drawn by the destructor); further advances draw nothing.
  void close();

  // Prints text on its own line on the main process, above the active bar if there is one.
  static void print(bool main_process, const std::string& text);

 private:
  void draw(bool final);
  ProgressSnapshot snapshot() const;
  void erase_line();

  bool main_process_;
  std::FILE* out_;
  bool terminal_;
  Clock clock_;
  std::string description_;
  int64_t total_;
  int64_t done_ = 0;
  std::optional<double> loss_;
  double start_;
  double last_draw_ = -1e30;
  int64_t last_tenth_ = -1;
  int64_t last_printed_done_ = -1;
  bool closed_ = false;
};

}  // namespace accel::tracking
