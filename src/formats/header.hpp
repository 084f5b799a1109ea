// What the headers of .npy and .safetensors files have in common: a little-endian length field, a bound
// on that length, shapes to check against the element size, and header text read through one cursor
// whose errors name the file and the byte offset. npy.cpp reads Python literals with it, json.cpp JSON.
// Like json.hpp and safetensors_header.hpp, it needs no LibTorch library (it is in accel_base), so the
// CLI reads checkpoints' JSON with the same code as the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace accel::formats {

// Far above any real header; it bounds what a corrupt or hostile length field can make us parse
// (the same limit as the reference safetensors implementation).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Throws Error(code) with "path: problem".
[[noreturn]] void fail_in_file(Code code, const std::string& path, const std::string& problem);

// An unsigned little-endian integer of `width` (at most 8) bytes.
uint64_t read_le(const unsigned char* bytes, size_t width);

// Error(InvalidArgument) unless header_len stays below kMaxHeaderBytes and the header, after `prefix`
// bytes, fits in a file of file_size bytes.
void check_header_length(const std::string& path, size_t file_size, uint64_t prefix, uint64_t header_len);

// Bytes an array of `shape` occupies; nullopt when a dim is negative or the product overflows size_t.
std::optional<size_t> array_nbytes(const std::vector<int64_t>& shape, size_t element_size);

// "[2, 3]", for messages.
std::string shape_string(const std::vector<int64_t>& shape);

// Bytes an array of `shape` occupies; Error(InvalidArgument) naming `what` for a negative dim or a
// product that overflows the address space.
size_t checked_nbytes(const std::string& path, const std::string& what, const std::vector<int64_t>& shape,
                      size_t element_size);

// A cursor over header text. Every syntax error is Error(InvalidArgument):
// "<path>: malformed <what> at header byte <offset>: <problem>".
class HeaderReader {
 public:
  HeaderReader(std::string_view text, const std::string& path, std::string what)
      : text_(text), path_(path), what_(std::move(what)) {}

  [[noreturn]] void error(const std::string& problem) const;
  // " but found 'x'" (or the byte's value, or " but the header ended"), to complete a message.
  std::string found() const;
  const std::string& path() const { return path_; }

  // These skip spaces, tabs and line breaks first.
  char peek();  // '\0' at the end
  bool at_end();
  bool consume(char c);
  void expect(char c);
  bool consume_word(std::string_view word);
  // JSON and Python integer syntax agree: optional '-', no leading zeros. Fractions and exponents are
  // refused here rather than later so the message says why.
  int64_t read_int();

  // Raw access for the inside of string literals: nothing is skipped.
  std::optional<char> next_char();
  bool consume_exactly(std::string_view text);

 private:
  void skip_space();
  bool digit_at(size_t at) const { return at < text_.size() && text_[at] >= '0' && text_[at] <= '9'; }

  std::string_view text_;
  const std::string& path_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace accel::formats
