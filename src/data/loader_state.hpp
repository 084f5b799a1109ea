// The bytes of a saved loader position (Loader::save_state and load_state), encoded and decoded apart
// from any loader, so that decoding untrusted bytes can be tested and fuzzed alone (tests/fuzz).
//
// Layout, every integer int64 in host (little-endian) order: the magic "ACCLDR02", epoch, batches
// already yielded in that epoch, the dataset's size (-1 for an iterable dataset), the number of processes
// that saved it, the global batch (samples a step takes over every process; -1 when steps are not made of
// samples alike on every number of processes: batches given explicitly, a stream already sharded), the
// generator state's length N, its N bytes, then 1 when saved mid-epoch and 0 between epochs. "ACCLDR01"
// states (before the process count and global batch were kept) are read as saved by an unknown number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace accel::data {

struct LoaderState {
  int64_t epoch = 0;
  int64_t yielded = 0;
  int64_t dataset_size = -1;
  int64_t world_size = -1;         // -1: unknown (a version 1 state)
  int64_t global_batch_size = -1;  // -1: unknown, or no global batch of samples
  std::string generator_state;     // at::Generator::get_state()'s bytes
  bool mid_epoch = false;
};

// Version 2 when world_size is known (>= 1), else version 1.
std::string encode_loader_state(const LoaderState& state);

// Throws Error(InvalidArgument) naming what is wrong: bad magic, truncation, a negative epoch or
// position, a process count below 1 or a global batch below -1 or 0 (version 2), an empty generator state,
// an epoch flag other than 0 or 1, trailing bytes. Whatever it accepts, encode_loader_state gives back
// byte for byte.
LoaderState decode_loader_state(std::string_view bytes);

}  // namespace accel::data
