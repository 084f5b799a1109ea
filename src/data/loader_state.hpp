// The bytes of a saved loader position (Loader::save_state and load_state), encoded and decoded apart
// from any loader, so that decoding untrusted bytes can be tested and fuzzed alone (tests/fuzz).
//
// Layout, every integer int64 in host (little-endian) order: the magic "ACCLDR01", epoch, batches
// already yielded in that epoch, the dataset's size (-1 for an iterable dataset), the generator state's
// length N, its N bytes, then 1 when saved mid-epoch and 0 between epochs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace accel::data {

struct LoaderState {
  int64_t epoch = 0;
  int64_t yielded = 0;
  int64_t dataset_size = -1;
  std::string generator_state;  // at::Generator::get_state()'s bytes
  bool mid_epoch = false;
};

std::string encode_loader_state(const LoaderState& state);

// Throws Error(InvalidArgument) naming what is wrong: bad magic, truncation, a negative epoch or
// position, an empty generator state, an epoch flag other than 0 or 1, trailing bytes. Whatever it
// accepts, encode_loader_state gives back byte for byte.
LoaderState decode_loader_state(std::string_view bytes);

}  // namespace accel::data
