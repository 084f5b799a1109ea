// What the tests of src/formats share: builders of .npy and .safetensors bytes laid out as numpy and the
// reference writer lay them out, a fixture with a fresh directory per test, and an error matcher.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "formats/array_view.hpp"
#include "formats/mapped_file.hpp"
#include "temp_dir.hpp"

namespace accel::formats::testing {

inline std::string le_bytes(uint64_t value, size_t width) {
  std::string out;
  for (size_t i = 0; i < width; ++i) out += static_cast<char>(value >> (8 * i) & 0xFF);
  return out;
}

// Distinct-looking bytes, so a view that points at the wrong offset fails the comparison.
inline std::string pattern(size_t n, unsigned seed = 0) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((i * 7 + 3 + seed * 31) & 0xFF);
  return out;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

inline std::string npy_dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
         ", }";
}

// A .npy file laid out as numpy writes it: magic, version, header length, then the dict padded with
// spaces and a newline so that the payload starts on a 64-byte boundary.
inline std::string npy_bytes(const std::string& dict, const std::string& payload, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  return out + le_bytes(header.size(), major == 1 ? 2 : 4) + header + payload;
}

inline std::string safetensors_bytes(const std::string& json, const std::string& payload) {
  return le_bytes(json.size(), 8) + json + payload;
}

// Runs `body` and expects an accel::Error with `code` whose message contains each of `parts`.
template <typename Body>
void expect_error(Body body, Code code, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), code) << message;
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "message '" << message << "' lacks '" << part << "'";
    }
    return;
  }
  ADD_FAILURE() << "no accel::Error was thrown";
}

inline bool inside(const ArrayView& view, const MappedFile& file) {
  const auto* begin = static_cast<const unsigned char*>(view.data);
  return begin >= file.data() && begin + view.nbytes <= file.data() + file.size();
}

inline std::string bytes_of(const ArrayView& view) {
  return std::string(static_cast<const char*>(view.data), view.nbytes);
}

// Each test gets a fresh directory, removed afterwards.
class FormatFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = test_support::temp_directory() + "/accel_formats_test.XXXXXX";
    ASSERT_NE(mkdtemp(name.data()), nullptr) << std::strerror(errno);
    dir_ = name;
  }
  void TearDown() override { remove_all(dir_); }

  std::string path(const std::string& name) const { return join_path(dir_, name); }

  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good());
    return path(name);
  }

  std::string read(const std::string& file) const {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  // A copy of the file at `from` without its last `cut` bytes.
  std::string truncated_copy(const std::string& from, size_t cut) const {
    const std::string bytes = read(from);
    return write("truncated_" + last_name_in_path(from), bytes.substr(0, bytes.size() - cut));
  }

  std::string dir_;
};

// Each supported type as the two formats and LibTorch name it, written out by hand rather than read from
// core/dtype.cpp, so that a wrong row there fails these tests.
struct DtypeCase {
  const char* npy;  // null: numpy has no such type
  const char* safetensors;
  at::ScalarType type;
  size_t size;
};

inline const std::vector<DtypeCase>& dtype_cases() {
  static const std::vector<DtypeCase> cases = {
      {"<f4", "F32", at::kFloat, 4}, {"<f8", "F64", at::kDouble, 8}, {"<f2", "F16", at::kHalf, 2},
      {nullptr, "BF16", at::kBFloat16, 2}, {"|i1", "I8", at::kChar, 1}, {"<i2", "I16", at::kShort, 2},
      {"<i4", "I32", at::kInt, 4}, {"<i8", "I64", at::kLong, 8}, {"|u1", "U8", at::kByte, 1},
      {"|b1", "BOOL", at::kBool, 1},
  };
  return cases;
}

}  // namespace accel::formats::testing
