#include "formats/header.hpp"

namespace accel::formats {

std::optional<size_t> array_nbytes(const std::vector<int64_t>& shape, size_t element_size) {
  size_t total = element_size;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void fail_in_file(Code code, const std::string& path, const std::string& problem) {
  fail(code, path + ": " + problem);
}

uint64_t read_le(const unsigned char* bytes, size_t width) {
  uint64_t value = 0;
  for (size_t i = width; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

void check_header_length(const std::string& path, size_t file_size, uint64_t prefix, uint64_t header_len) {
  if (header_len > kMaxHeaderBytes) {
    fail_in_file(Code::InvalidArgument, path,
                 "header length " + std::to_string(header_len) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
                     "-byte limit; the file is corrupt or not in this format");
  }
  if (prefix + header_len > file_size) {
    fail_in_file(Code::InvalidArgument, path,
                 "the file is " + std::to_string(file_size) + " bytes, shorter than its header claims (" +
                     std::to_string(prefix + header_len) + " bytes); it is truncated or corrupt");
  }
}

size_t checked_nbytes(const std::string& path, const std::string& what, const std::vector<int64_t>& shape,
                      size_t element_size) {
  for (int64_t dim : shape) {
    if (dim < 0) fail_in_file(Code::InvalidArgument, path, what + " has a negative dim in shape " + shape_string(shape));
  }
  auto nbytes = array_nbytes(shape, element_size);
  if (!nbytes) {
    fail_in_file(Code::InvalidArgument, path, what + " shape " + shape_string(shape) + " overflows the address space");
  }
  return *nbytes;
}

// ---- HeaderReader --------------------------------------------------------------------------------

void HeaderReader::error(const std::string& problem) const {
  fail_in_file(Code::InvalidArgument, path_,
               "malformed " + what_ + " at header byte " + std::to_string(pos_) + ": " + problem);
}

std::string HeaderReader::found() const {
  if (pos_ >= text_.size()) return " but the header ended";
  const unsigned char c = static_cast<unsigned char>(text_[pos_]);
  if (c >= 0x20 && c < 0x7f) return std::string(" but found '") + static_cast<char>(c) + "'";
  return " but found byte " + std::to_string(c);
}

void HeaderReader::skip_space() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
    ++pos_;
  }
}

char HeaderReader::peek() {
  skip_space();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool HeaderReader::at_end() {
  skip_space();
  return pos_ == text_.size();
}

bool HeaderReader::consume(char c) {
  if (at_end() || text_[pos_] != c) return false;
  ++pos_;
  return true;
}

void HeaderReader::expect(char c) {
  if (!consume(c)) error(std::string("expected '") + c + "'" + found());
}

bool HeaderReader::consume_word(std::string_view word) {
  skip_space();
  return consume_exactly(word);
}

int64_t HeaderReader::read_int() {
  skip_space();
  const bool negative = pos_ < text_.size() && text_[pos_] == '-';
  if (negative) ++pos_;
  if (!digit_at(pos_)) error("expected an integer" + found());
  if (text_[pos_] == '0' && digit_at(pos_ + 1)) error("integers may not have leading zeros");
  int64_t value = 0;
  for (; digit_at(pos_); ++pos_) {
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
      error("integer out of range");
    }
  }
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
    error("only integers are allowed here");
  }
  return negative ? -value : value;
}

std::optional<char> HeaderReader::next_char() {
  if (pos_ >= text_.size()) return std::nullopt;
  return text_[pos_++];
}

bool HeaderReader::consume_exactly(std::string_view text) {
  if (text_.substr(pos_, text.size()) != text) return false;
  pos_ += text.size();
  return true;
}

}  // namespace accel::formats
