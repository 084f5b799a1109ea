// Working with the processes of a state (Accelerate's split_between_processes, main_process_first and
// send_to_device): what is this rank's share of some inputs, who goes first, where tensors go.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "distributed/state.hpp"

namespace accel::distributed {

// This rank's contiguous share of length items, as Accelerate deals them: q, r = divmod(length, P); rank
// i gets q + (i < r) items starting at i*q + min(i, r). padded_count is q + (r > 0): with apply_padding
// every rank ends with that many, the missing ones repeating the last item of the whole input.
struct Share {
  int64_t first = 0;
  int64_t count = 0;
  int64_t padded_count = 0;
};
// Throws Error(InvalidArgument) for a negative length or rank outside [0, world_size).
Share share_of(int64_t length, int32_t rank, int32_t world_size);

// The rows (dim 0) of input that are this rank's share; with apply_padding the last row of input
// repeats up to padded_count rows (Accelerate pads 1-D tensors so; for others it fails). Not collective.
// Throws Error(InvalidArgument) for a 0-d tensor, or padding with no row to repeat.
at::Tensor split_rows(const State& state, const at::Tensor& input, bool apply_padding);

// main_process_first as a begin/end pair: the ranks that are not the (local, with local) main process
// wait in begin until the main one reaches end; the main one passes begin at once and waits in end for
// the others. Collective (a barrier each); end must be called even when the section failed.
void goes_first_begin(State& state, bool local);
void goes_first_end(State& state, bool local);

// input on the state's device (the same tensor when it is already there).
at::Tensor send_to_device(const State& state, const at::Tensor& input, bool non_blocking);

}  // namespace accel::distributed
