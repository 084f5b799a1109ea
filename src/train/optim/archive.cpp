#include "train/optim/archive.hpp"

#include "core/error.hpp"

namespace accel::train {

torch::serialize::InputArchive read_archive(const std::string& bytes, const std::string& what, const c10::Device& device) {
  torch::serialize::InputArchive archive;
  try {
    // Read in place: a string stream would copy the bytes first (a ZeRO part is a share of the whole state).
    archive.load_from(bytes.data(), bytes.size(), device);
  } catch (const c10::Error& error) {
    fail_from(error, Code::InvalidArgument, what + " state is not a saved " + what + " archive: ");
  }
  return archive;
}

std::string archive_bytes(torch::serialize::OutputArchive& archive) {
  // Appended as written: a string stream's str() would hold the state twice (its buffer and the copy).
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

namespace {
c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key, const std::string& what,
                       bool (c10::IValue::*is_kind)() const) {
  c10::IValue value;
  require_argument(archive.try_read(key, value) && (value.*is_kind)(), what + " state has no " + key);
  return value;
}
}  // namespace

double read_double(torch::serialize::InputArchive& archive, const std::string& key, const std::string& what) {
  return read_value(archive, key, what, &c10::IValue::isDouble).toDouble();
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key, const std::string& what) {
  return read_value(archive, key, what, &c10::IValue::isInt).toInt();
}

std::vector<double> read_double_list(torch::serialize::InputArchive& archive, const std::string& key,
                                     const std::string& what) {
  return read_value(archive, key, what, &c10::IValue::isDoubleList).toDoubleVector();
}

}  // namespace accel::train
