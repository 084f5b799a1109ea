// Options::set_text, as accel_options_set_text and the ACCEL_* variables feed it: the input is split at
// its first '=' into key and text. An accel::Error is a refusal, which is fine; a crash, a sanitizer
// report or any other exception is a finding, and so is an accepted value that, printed back the way
// `accel env` prints it, no longer parses.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t equals = input.find('=');
  if (equals == std::string::npos) return 0;
  const std::string key = input.substr(0, equals);
  accel::Options options;
  try {
    options.set_text(key, input.substr(equals + 1));
  } catch (const accel::Error&) {
    return 0;
  }
  const std::string printed = accel::format_option_value(options.values().at(key));
  try {
    options.set_text(key, printed);
  } catch (const accel::Error&) {
    __builtin_trap();
  }
  return 0;
}
