// Options::set_text, as accel_options_set_text and the ACCEL_* variables feed it: the input is split at
// its first '=' into key and text. An accel::Error is a refusal, which is fine; a crash, a sanitizer
// report or any other exception is a finding, and so is an accepted value that, printed back the way
// `accel env` prints it, no longer parses or parses to another value. The keys: the state's (every type,
// choices, a maximum) and a few of the other objects' kinds, declared here since the fuzz build holds
// only the parsers.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cmath>
#include <variant>

#include "core/error.hpp"
#include "core/options.hpp"
#include "distributed/state_options.hpp"

namespace {

const accel::OptionScope& other_keys() {
  static const accel::OptionScope scope{
      "fuzzed object",
      "the fuzzer",
      false,
      {{"lr", accel::OptionType::Double, 1e-3, {}, false},
       {"batch_size", accel::OptionType::Int, int64_t{1}, {}, true},
       {"data_seed", accel::OptionType::Int, int64_t{-1}, {}, false},
       {"reduction", accel::OptionType::String, std::string("mean"), {"mean", "sum", "none"}, false}}};
  return scope;
}

bool same(const accel::OptionValue& a, const accel::OptionValue& b) {
  if (std::holds_alternative<double>(a) && std::holds_alternative<double>(b) && std::isnan(std::get<double>(a))) {
    return std::isnan(std::get<double>(b));
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t equals = input.find('=');
  if (equals == std::string::npos) return 0;
  const std::string key = input.substr(0, equals);
  accel::Options options({&accel::distributed::state_option_scope(), &other_keys()});
  try {
    options.set_text(key, input.substr(equals + 1));
  } catch (const accel::Error&) {
    return 0;
  }
  const accel::OptionValue accepted = options.values().at(key);
  const std::string printed = accel::format_option_value(accepted);
  try {
    options.set_text(key, printed);
  } catch (const accel::Error&) {
    __builtin_trap();
  }
  if (!same(options.values().at(key), accepted)) __builtin_trap();
  return 0;
}
