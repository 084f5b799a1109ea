// The .safetensors parser on arbitrary file contents. An accel::Error is a refusal, which is fine; a
// crash, a sanitizer report or any other exception is a finding. What it accepts must keep the reader's
// promises (views inside the payload, sorted by name, no two overlapping), and every name and metadata
// string must survive the writer's quoting: the one JSON layer reads back what it writes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "formats/json.hpp"
#include "formats/safetensors.hpp"

namespace {

using accel::formats::ArrayView;

void check_quoting_round_trips(const std::string& text) {
  const std::string quoted = accel::formats::json_quote(text);
  const std::string path = "quoted";
  accel::formats::HeaderReader in(quoted, path, "quoted string");
  if (accel::formats::read_json_string(in) != text || !in.at_end()) __builtin_trap();
}

const uint8_t* first_byte(const ArrayView& view) { return static_cast<const uint8_t*>(view.data); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accel::formats::SafetensorsContents contents;
  try {
    contents = accel::formats::parse_safetensors(data, size, "fuzz.safetensors");
  } catch (const accel::Error&) {
    return 0;
  }
  const ArrayView* previous = nullptr;
  for (const ArrayView& view : contents.arrays) {
    if (first_byte(view) < data || view.nbytes > size || first_byte(view) > data + size - view.nbytes) __builtin_trap();
    if (previous != nullptr && !(previous->name < view.name)) __builtin_trap();
    check_quoting_round_trips(view.name);
    previous = &view;
  }
  for (const ArrayView& a : contents.arrays) {
    for (const ArrayView& b : contents.arrays) {
      const bool disjoint = first_byte(a) + a.nbytes <= first_byte(b) || first_byte(b) + b.nbytes <= first_byte(a);
      if (&a != &b && a.nbytes > 0 && b.nbytes > 0 && !disjoint) __builtin_trap();
    }
  }
  for (const auto& [key, value] : contents.metadata) {
    check_quoting_round_trips(key);
    check_quoting_round_trips(value);
  }
  return 0;
}
