#include "core/utf8.hpp"

#include <cstdio>

#include "core/error.hpp"

namespace accel {

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + 1 >= text.size() || byte(i + 1) < low || byte(i + 1) > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (i + k >= text.size() || byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

std::string escaped_bytes(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto value = static_cast<unsigned char>(c);
    if (value >= 0x80 || value < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned>(value));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

void require_utf8(std::string_view text, const std::string& what) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[*bad])));
  fail(Code::InvalidArgument, what + " '" + escaped_bytes(text) + "' is not UTF-8 (byte " + byte + " at offset " +
                                  std::to_string(*bad) + ")");
}

}  // namespace accel
