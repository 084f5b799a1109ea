#include "distributed/processes.hpp"

#include <ATen/ops/cat.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/value_ranges.hpp"

namespace accel::distributed {

Share share_of(int64_t length, int32_t rank, int32_t world_size) {
  require_argument(length >= 0, "cannot split a negative number of items (" + std::to_string(length) + ")");
  require_argument(world_size >= 1 && rank >= 0 && rank < world_size,
                   "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world_size) + ")");
  const int64_t q = length / world_size, r = length % world_size;
  Share share;
  share.first = rank * q + std::min<int64_t>(rank, r);
  share.count = q + (rank < r ? 1 : 0);
  share.padded_count = q + (r > 0 ? 1 : 0);
  return share;
}

at::Tensor split_rows(const State& state, const at::Tensor& input, bool apply_padding) {
  require_argument(input.defined() && input.dim() > 0, "split_between_processes needs a tensor with a dim 0");
  const auto& launch = state.launch();
  if (launch.world_size == 1) return input;
  const Share share = share_of(input.size(0), launch.rank, launch.world_size);
  auto rows = input.narrow(0, share.first, share.count);
  if (!apply_padding || share.count == share.padded_count) return rows;
  require_argument(input.size(0) > 0, "split_between_processes cannot pad an empty tensor: it has no last row");
  const auto last = input.narrow(0, input.size(0) - 1, 1);
  std::vector<at::Tensor> parts{rows};
  for (int64_t i = share.count; i < share.padded_count; ++i) parts.push_back(last);
  return at::cat(parts, 0);
}

void goes_first_begin(State& state, bool local) {
  const auto& launch = state.launch();
  const bool main = local ? launch.local_rank == 0 : launch.rank == 0;
  if (!main) state.wait_for_everyone();
}

void goes_first_end(State& state, bool local) {
  const auto& launch = state.launch();
  const bool main = local ? launch.local_rank == 0 : launch.rank == 0;
  if (main) state.wait_for_everyone();
}

at::Tensor send_to_device(const State& state, const at::Tensor& input, bool non_blocking) {
  require_argument(input.defined(), "send_to_device: the tensor is undefined");
  return copy_to_device(input, at::Device(state.device()), non_blocking);
}

}  // namespace accel::distributed
