#include "data/loader_state.hpp"

#include <cstring>

#include "core/error.hpp"

namespace accel::data {

namespace {

constexpr std::string_view kMagicV1{"ACCLDR01", 8};
constexpr std::string_view kMagicV2{"ACCLDR02", 8};

void put_int(std::string& out, int64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }

// Reads the fields in order, failing with the name of the first one that is missing.
class FieldReader {
 public:
  explicit FieldReader(std::string_view bytes) : bytes_(bytes) {}

  int64_t take_int(const char* field) {
    int64_t value = 0;
    std::memcpy(&value, take(sizeof value, field).data(), sizeof value);
    return value;
  }

  std::string_view take(size_t size, const char* field) {
    if (bytes_.size() - offset_ < size) {
      fail(Code::InvalidArgument, std::string("loader state is truncated (no ") + field + ")");
    }
    const std::string_view out = bytes_.substr(offset_, size);
    offset_ += size;
    return out;
  }

  bool at_end() const { return offset_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

}  // namespace

std::string encode_loader_state(const LoaderState& state) {
  const bool version2 = state.world_size != -1;
  std::string out(version2 ? kMagicV2 : kMagicV1);
  put_int(out, state.epoch);
  put_int(out, state.yielded);
  put_int(out, state.dataset_size);
  if (version2) {
    put_int(out, state.world_size);
    put_int(out, state.global_batch_size);
  }
  put_int(out, static_cast<int64_t>(state.generator_state.size()));
  out += state.generator_state;
  put_int(out, state.mid_epoch ? 1 : 0);
  return out;
}

LoaderState decode_loader_state(std::string_view bytes) {
  const std::string_view magic = bytes.substr(0, kMagicV2.size());
  const bool version2 = magic == kMagicV2;
  if (!version2 && magic != kMagicV1) {
    fail(Code::InvalidArgument, "loader state is corrupt or not an accel loader state (bad magic)");
  }
  FieldReader in(bytes.substr(kMagicV2.size()));
  LoaderState state;
  state.epoch = in.take_int("epoch");
  state.yielded = in.take_int("position");
  state.dataset_size = in.take_int("dataset size");
  if (version2) {
    state.world_size = in.take_int("process count");
    state.global_batch_size = in.take_int("global batch");
    if (state.world_size < 1 || state.global_batch_size < -1 || state.global_batch_size == 0) {
      fail(Code::InvalidArgument, "loader state is corrupt (process count " + std::to_string(state.world_size) +
                                      ", global batch " + std::to_string(state.global_batch_size) + ")");
    }
  }
  const int64_t generator_bytes = in.take_int("generator state size");
  if (state.epoch < 0 || state.yielded < 0) {
    fail(Code::InvalidArgument, "loader state is corrupt (negative epoch or position)");
  }
  if (generator_bytes <= 0) fail(Code::InvalidArgument, "loader state is corrupt (no generator state)");
  state.generator_state = std::string(in.take(static_cast<uint64_t>(generator_bytes), "generator state"));
  const int64_t flag = in.take_int("epoch flag");
  if (flag != 0 && flag != 1) fail(Code::InvalidArgument, "loader state is corrupt (epoch flag " + std::to_string(flag) + ")");
  state.mid_epoch = flag == 1;
  if (!in.at_end()) fail(Code::InvalidArgument, "loader state is corrupt (trailing bytes)");
  return state;
}

}  // namespace accel::data
