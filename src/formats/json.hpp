// The JSON of .safetensors headers, in both directions. The reader and the writer share this one layer,
// so that any name the writer quotes, the reader decodes back (tests/formats/safetensors_test.cpp).
//
// Reading covers what a safetensors header holds: objects, strings (every escape, surrogate pairs
// included; UTF-8 only, as JSON text is and as the writer quotes), arrays of integers. Floats, booleans, null and nested arrays are refused, as no safetensors
// key takes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/header.hpp"

namespace accel::formats {

std::string read_json_string(HeaderReader& in);
std::vector<int64_t> read_json_int_array(HeaderReader& in);

// Calls on_member(key) for each member, with the cursor on the member's value, which it must read.
template <typename OnMember>
void read_json_object(HeaderReader& in, OnMember on_member) {
  in.expect('{');
  if (in.consume('}')) return;
  do {
    const std::string key = read_json_string(in);
    in.expect(':');
    on_member(key);
  } while (in.consume(','));
  in.expect('}');
}

// `text` as a JSON string literal, quotes included: '"' and '\' escaped, control characters as \u00XX,
// other bytes as they are (a UTF-8 name stays UTF-8). Error(InvalidArgument) when text is not UTF-8, which
// no JSON reader would take (the names that reach here are refused where they enter; this is the last
// guard before a file).
std::string json_quote(std::string_view text);

}  // namespace accel::formats
