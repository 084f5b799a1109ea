// JSONL ({"step":..,"wall_time":..,"<name>":..} per log call) and CSV (step,wall_time,name,value: one row per
// scalar, so that calls logging different names share one file).
#include <charconv>
#include <cmath>

#include "core/error.hpp"
#include "formats/json.hpp"
#include "tracking/append_file.hpp"
#include "tracking/sink.hpp"

namespace accel::tracking {

namespace {

// The shortest text that reads back as the same double; JSON has no NaN or infinity, so those are null.
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

// CSV readers (Python's float(), spreadsheets) take nan and inf where JSON has none.
std::string csv_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return json_number(value);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// The last complete line of content, or "" when there is none.
std::string last_line(const std::string& content) {
  if (content.empty()) return "";
  const size_t end = content.size() - 1;  // content ends with '\n' (AppendFile cut anything after it)
  const size_t start = content.rfind('\n', end - 1);
  return content.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1));
}

std::optional<int64_t> leading_integer(const std::string& text) {
  int64_t value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc()) return std::nullopt;
  return value;
}

class JsonlSink final : public Sink {
 public:
  explicit JsonlSink(const std::string& directory) : file_(directory + "/metrics.jsonl", '\n') {
    const std::string line = last_line(file_.previous_content());
    const std::string key = "\"step\":";
    if (const size_t at = line.find(key); at != std::string::npos) last_step_ = leading_integer(line.substr(at + key.size()));
  }
  std::optional<int64_t> last_logged_step() const override { return last_step_; }
  void write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) override {
    std::string line = "{\"step\":" + std::to_string(step) + ",\"wall_time\":" + json_number(wall_time);
    for (const auto& scalar : scalars) line += "," + formats::json_quote(scalar.name) + ":" + json_number(scalar.value);
    file_.append(line + "}\n");
  }

 private:
  AppendFile file_;
  std::optional<int64_t> last_step_;
};

class CsvSink final : public Sink {
 public:
  explicit CsvSink(const std::string& directory) : file_(directory + "/metrics.csv", '\n') {
    if (file_.previous_content().empty()) file_.append("step,wall_time,name,value\n");
    last_step_ = leading_integer(last_line(file_.previous_content()));
  }
  std::optional<int64_t> last_logged_step() const override { return last_step_; }
  void write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) override {
    std::string rows;
    for (const auto& scalar : scalars) {
      rows += std::to_string(step) + "," + json_number(wall_time) + "," + csv_field(scalar.name) + "," +
              csv_number(scalar.value) + "\n";
    }
    file_.append(rows);
  }

 private:
  AppendFile file_;
  std::optional<int64_t> last_step_;
};

}  // namespace

std::unique_ptr<Sink> open_jsonl_sink(const std::string& directory) { return std::make_unique<JsonlSink>(directory); }
std::unique_ptr<Sink> open_csv_sink(const std::string& directory) { return std::make_unique<CsvSink>(directory); }

}  // namespace accel::tracking
