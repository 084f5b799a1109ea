// The saved-loader-state decoder on arbitrary bytes. An accel::Error is a refusal, which is fine; a
// crash, a sanitizer report or any other exception is a finding, and so is accepted input that does
// not encode back to itself (decode_loader_state's promise).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "data/loader_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const accel::data::LoaderState state = accel::data::decode_loader_state(bytes);
    if (accel::data::encode_loader_state(state) != bytes) __builtin_trap();
  } catch (const accel::Error&) {
  }
  return 0;
}
