#include "formats/json.hpp"

#include <cstdio>

#include "core/utf8.hpp"

namespace accel::formats {

namespace {

uint32_t read_hex4(HeaderReader& in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const auto c = in.next_char();
    if (!c) in.error("truncated \\u escape");
    const int nibble = *c >= '0' && *c <= '9' ? *c - '0'
                       : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                       : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
                                                : -1;
    if (nibble < 0) in.error("bad hex digit in \\u escape");
    value = value << 4 | static_cast<uint32_t>(nibble);
  }
  return value;
}

// Characters outside the BMP arrive as a UTF-16 surrogate pair of two \u escapes.
uint32_t read_code_point(HeaderReader& in) {
  const uint32_t unit = read_hex4(in);
  if (unit >= 0xDC00 && unit <= 0xDFFF) in.error("lone low surrogate in \\u escape");
  if (unit < 0xD800 || unit > 0xDBFF) return unit;
  if (!in.consume_exactly("\\u")) in.error("high surrogate without its low half");
  const uint32_t low = read_hex4(in);
  if (low < 0xDC00 || low > 0xDFFF) in.error("high surrogate without its low half");
  return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | code_point >> 6);
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | code_point >> 12);
    out += static_cast<char>(0x80 | (code_point >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | code_point >> 18);
    out += static_cast<char>(0x80 | (code_point >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (code_point >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

void append_escape(HeaderReader& in, std::string& out) {
  const auto e = in.next_char();
  if (!e) in.error("unterminated escape");
  switch (*e) {
    case '"': case '\\': case '/': out += *e; return;
    case 'b': out += '\b'; return;
    case 'f': out += '\f'; return;
    case 'n': out += '\n'; return;
    case 'r': out += '\r'; return;
    case 't': out += '\t'; return;
    case 'u': append_utf8(out, read_code_point(in)); return;
    default: in.error(std::string("unknown escape '\\") + *e + "'");
  }
}

}  // namespace

std::string read_json_string(HeaderReader& in) {
  in.expect('"');
  std::string out;
  while (true) {
    const auto c = in.next_char();
    if (!c) in.error("unterminated string");
    if (*c == '"') {
      // JSON text is UTF-8 (RFC 8259): what the writer would refuse is refused here too.
      if (const auto bad = first_invalid_utf8(out)) {
        in.error("string '" + escaped_bytes(out) + "' is not UTF-8 (byte " + std::to_string(*bad) + " of it)");
      }
      return out;
    }
    if (static_cast<unsigned char>(*c) < 0x20) in.error("raw control character in a string");
    if (*c == '\\') {
      append_escape(in, out);
    } else {
      out += *c;
    }
  }
}

std::vector<int64_t> read_json_int_array(HeaderReader& in) {
  in.expect('[');
  std::vector<int64_t> items;
  if (in.consume(']')) return items;
  do {
    items.push_back(in.read_int());
  } while (in.consume(','));
  in.expect(']');
  return items;
}

std::string json_quote(std::string_view text) {
  require_utf8(text, "a JSON string");
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace accel::formats
