#include "tracking/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "core/error.hpp"

namespace accel::tracking {

namespace {

constexpr int kBarWidth = 20;
constexpr double kTerminalRedraw_s = 0.1;
constexpr double kPlainLineEvery_s = 30;

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto whole = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (whole >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(whole / 3600),
                  static_cast<long long>(whole / 60 % 60), static_cast<long long>(whole % 60));
  } else {
    std::snprintf(text, sizeof text, "%02lld:%02lld", static_cast<long long>(whole / 60), static_cast<long long>(whole % 60));
  }
  return text;
}

// The bar being drawn on this process's terminal, so that print() can keep it below the printed lines.
std::mutex active_mutex;
ProgressBar* active_bar = nullptr;

}  // namespace

std::string render_progress(const ProgressSnapshot& s) {
  const bool known = s.total > 0;
  const double fraction = known ? std::min(1.0, static_cast<double>(s.done) / static_cast<double>(s.total)) : 0.0;
  const double rate = s.elapsed_s > 0 ? static_cast<double>(s.done) / s.elapsed_s : 0.0;
  std::string line = s.description.empty() ? "" : s.description + " ";
  char text[160];
  if (known) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    std::snprintf(text, sizeof text, "%3d%% [%s%s] %lld/%lld ", static_cast<int>(fraction * 100),
                  std::string(static_cast<size_t>(filled), '#').c_str(),
                  std::string(static_cast<size_t>(kBarWidth - filled), '.').c_str(), static_cast<long long>(s.done),
                  static_cast<long long>(s.total));
    line += text;
    const double remaining = rate > 0 ? static_cast<double>(s.total - s.done) / rate : NAN;
    line += clock_text(s.elapsed_s) + "<" + clock_text(remaining);
  } else {
    std::snprintf(text, sizeof text, "%lld steps ", static_cast<long long>(s.done));
    line += text + clock_text(s.elapsed_s);
  }
  std::snprintf(text, sizeof text, " %.1f step/s", rate);
  line += text;
  if (s.loss) {
    std::snprintf(text, sizeof text, " loss %.4g", *s.loss);
    line += text;
  }
  return line;
}

ProgressBar::ProgressBar(bool main_process, int64_t total, std::string description, std::FILE* out, bool terminal,
                         Clock clock)
    : main_process_(main_process),
      out_(out),
      terminal_(terminal),
      clock_(std::move(clock)),
      description_(std::move(description)),
      total_(total),
      start_(clock_()) {
  if (!main_process_) return;
  if (terminal_) {
    std::lock_guard<std::mutex> lock(active_mutex);
    active_bar = this;
  }
  draw(false);
}

ProgressBar::ProgressBar(bool main_process, int64_t total, std::string description)
    : ProgressBar(main_process, total, std::move(description), stdout, ::isatty(STDOUT_FILENO) != 0, [] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      }) {}

ProgressBar::~ProgressBar() { close(); }

ProgressSnapshot ProgressBar::snapshot() const {
  return {description_, done_, total_, clock_() - start_, loss_};
}

void ProgressBar::erase_line() { std::fputs("\r\033[K", out_); }

void ProgressBar::draw(bool final) {
  const double now = clock_();
  if (terminal_) {
    if (!final && now - last_draw_ < kTerminalRedraw_s) return;
    erase_line();
    std::fputs(render_progress(snapshot()).c_str(), out_);
    if (final) std::fputc('\n', out_);
  } else {
    // In 128 bits: done_ * 10 overflows int64 from a tenth of INT64_MAX on.
    const int64_t tenth = total_ > 0 ? static_cast<int64_t>(static_cast<__int128>(done_) * 10 / total_) : -1;
    if (!final && tenth == last_tenth_ && now - last_draw_ < kPlainLineEvery_s) return;
    if (final && done_ == last_printed_done_) return;  // the last periodic line already says it all
    last_tenth_ = tenth;
    last_printed_done_ = done_;
    std::fprintf(out_, "%s\n", render_progress(snapshot()).c_str());
  }
  last_draw_ = now;
  std::fflush(out_);
}

void ProgressBar::advance(int64_t steps, std::optional<double> loss) {
  require_argument(steps >= 0, "a progress bar advances by a step count >= 0, got " + std::to_string(steps));
  require_argument(steps <= std::numeric_limits<int64_t>::max() - done_,
                   "advancing the progress bar by " + std::to_string(steps) + " steps from " + std::to_string(done_) +
                       " would count past INT64_MAX");
  if (closed_) return;
  done_ += steps;
  if (loss) loss_ = loss;
  if (main_process_) draw(false);
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (!main_process_) return;
  draw(true);
  std::lock_guard<std::mutex> lock(active_mutex);
  if (active_bar == this) active_bar = nullptr;
}

void ProgressBar::print(bool main_process, const std::string& text) {
  if (!main_process) return;
  std::lock_guard<std::mutex> lock(active_mutex);
  if (active_bar != nullptr) active_bar->erase_line();
  std::fprintf(stdout, "%s\n", text.c_str());
  if (active_bar != nullptr) {
    active_bar->last_draw_ = -1e30;
    active_bar->draw(false);
  }
  std::fflush(stdout);
}

}  // namespace accel::tracking
