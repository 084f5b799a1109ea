// TensorBoard event files written natively: TFRecord framing (length, masked CRC-32C of the length, data,
// masked CRC-32C of the data) around tensorflow.Event protobufs, the first one a file_version event. The
// protobuf wire format is small enough to write by hand: Event {1: wall_time double, 2: step int64,
// 3: file_version string, 5: summary Summary}, Summary {1: repeated Value}, Value {1: tag string,
// 2: simple_value float}.
#include <unistd.h>

#include <cstring>
#include <ctime>

#include "core/error.hpp"
#include "core/files.hpp"
#include "tracking/append_file.hpp"
#include "tracking/crc32c.hpp"
#include "tracking/sink.hpp"

namespace accel::tracking {

namespace {

// TensorBoard reads every file of a run directory whose name starts so.
constexpr const char* kEventFilePrefix = "events.out.tfevents.";

constexpr uint8_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_tag(std::string& out, uint32_t field, uint8_t wire_type) { put_varint(out, (field << 3) | wire_type); }

template <class T>
void put_little_endian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 are little-endian, as the format is
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event(double wall_time, int64_t step, const std::string& body) {
  std::string out;
  put_tag(out, 1, kFixed64);
  put_little_endian(out, wall_time);
  put_tag(out, 2, kVarint);
  put_varint(out, static_cast<uint64_t>(step));
  return out + body;
}

std::string framed(const std::string& data) {
  std::string record;
  put_little_endian(record, static_cast<uint64_t>(data.size()));
  put_little_endian(record, masked_crc32c(record.data(), 8));
  record += data;
  put_little_endian(record, masked_crc32c(data.data(), data.size()));
  return record;
}

uint64_t read_varint(const std::string& data, size_t& at) {
  uint64_t value = 0;
  for (int shift = 0; at < data.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(data[at++]);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  fail(Code::InvalidArgument, "truncated varint");
}

// The step of an Event message that carries a summary (the file_version event does not count).
std::optional<int64_t> summary_step_of(const std::string& data) {
  std::optional<int64_t> step;
  bool has_summary = false;
  size_t at = 0;
  while (at < data.size()) {
    const uint64_t tag = read_varint(data, at);
    const auto field = tag >> 3;
    switch (tag & 7) {
      case kVarint: {
        const uint64_t value = read_varint(data, at);
        if (field == 2) step = static_cast<int64_t>(value);
        break;
      }
      case kFixed64: at += 8; break;
      case kFixed32: at += 4; break;
      case kLengthDelimited:
        has_summary = has_summary || field == 5;
        at += read_varint(data, at);
        break;
      default: return std::nullopt;
    }
  }
  return has_summary ? step : std::nullopt;
}

// The largest step in one event file; a record cut short or failing its CRC ends the reading (a killed
// writer leaves at most one such record, at the end).
std::optional<int64_t> largest_step(const std::string& content) {
  std::optional<int64_t> largest;
  size_t at = 0;
  while (at + 12 <= content.size()) {
    uint64_t length = 0;
    uint32_t length_crc = 0;
    std::memcpy(&length, content.data() + at, 8);
    std::memcpy(&length_crc, content.data() + at + 8, 4);
    if (length_crc != masked_crc32c(content.data() + at, 8) || length > content.size() - at - 16) break;
    const std::string data = content.substr(at + 12, length);
    uint32_t data_crc = 0;
    std::memcpy(&data_crc, content.data() + at + 12 + length, 4);
    if (data_crc != masked_crc32c(data.data(), data.size())) break;
    try {
      if (const auto step = summary_step_of(data); step && (!largest || *step > *largest)) largest = step;
    } catch (const Error&) {
      break;
    }
    at += 16 + length;
  }
  return largest;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

class TensorBoardSink final : public Sink {
 public:
  explicit TensorBoardSink(const std::string& directory)
      : last_step_(largest_step_in(directory)),
        file_(directory + "/" + kEventFilePrefix + std::to_string(std::time(nullptr)) + "." + host_name() + "." +
              std::to_string(::getpid())) {
    std::string version;
    put_bytes(version, 3, "brain.Event:2");
    file_.append(framed(event(static_cast<double>(std::time(nullptr)), 0, version)));
  }
  std::optional<int64_t> last_logged_step() const override { return last_step_; }
  void write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) override {
    std::string summary;
    for (const auto& scalar : scalars) {
      std::string value;
      put_bytes(value, 1, scalar.name);
      put_tag(value, 2, kFixed32);
      put_little_endian(value, static_cast<float>(scalar.value));
      put_bytes(summary, 1, value);
    }
    std::string body;
    put_bytes(body, 5, summary);
    file_.append(framed(event(wall_time, step, body)));
  }

 private:
  static std::optional<int64_t> largest_step_in(const std::string& directory) {
    std::optional<int64_t> largest;
    for (const auto& path : tensorboard_event_files(directory)) {
      const auto step = largest_step(read_file(path));
      if (step && (!largest || *step > *largest)) largest = step;
    }
    return largest;
  }

  std::optional<int64_t> last_step_;
  AppendFile file_;
};

}  // namespace

std::vector<std::string> tensorboard_event_files(const std::string& directory) {
  std::vector<std::string> paths;
  for (const std::string& name : list_directory(directory)) {
    if (name.rfind(kEventFilePrefix, 0) == 0) paths.push_back(join_path(directory, name));
  }
  return paths;
}

std::unique_ptr<Sink> open_tensorboard_sink(const std::string& directory) {
  return std::make_unique<TensorBoardSink>(directory);
}

}  // namespace accel::tracking
