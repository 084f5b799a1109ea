// Accelerate's collectives (utils/operations.py) on LibTorch tensors, with the cross-rank shape check.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/named_tensors.hpp"
#include "distributed/call_agreement.hpp"
#include "distributed/state.hpp"

namespace accel::distributed {

// Rank-ordered concatenation on dim 0 (0-d counts as [1]). Result on the input's device.
at::Tensor gather(State& state, const at::Tensor& input);

// gather, then, while the innermost active loader is on its last batch, only the first `remainder` rows:
// the duplicates that padded the last global batch are dropped (Accelerate's gather_for_metrics).
at::Tensor gather_for_metrics(State& state, const at::Tensor& input);

// Every rank's bytes, in rank order.
std::vector<std::string> gather_bytes(State& state, const std::string& bytes);

// In place: every rank ends with from_process's bytes (any length).
void broadcast_bytes(State& state, std::string& bytes, int32_t from_process);

// Runs `body` on this rank, then every rank learns whether any rank's body failed, so that none carries
// on alone (a checkpoint restored on some ranks only; ranks waiting on a writer that failed). Rethrows
// this rank's own exception when its body failed; otherwise, when another's did, throws
// Error(PeerFailed) "rank <r> <what>: <its message>" for the lowest such rank. Collective.
void all_or_none(State& state, const std::function<void()>& body, const std::string& what);

// reduction: "sum", "mean" or "max" (Error(InvalidArgument) otherwise; "mean" needs a floating dtype).
at::Tensor reduce(State& state, const at::Tensor& input, const std::string& reduction);
// Accelerate's reduce on a nested structure, leaf by leaf: the leaves are named (their paths) and unique.
// With check_shapes, one exchange compares every rank's names, shapes and dtypes (Error(ShapeMismatch)
// listing each rank's); then one all-reduce per dtype carries all its leaves.
NamedTensors reduce(State& state, const NamedTensors& inputs, const std::string& reduction);

// Collective: every rank's `text` in rank order when they are not all the same, else nullopt (with one
// process too). Cheap when they are the same: their lengths and digests travel in the agreement of a
// collective of `kind` (call_agreement.hpp), the texts only when they differ.
std::optional<std::vector<std::string>> texts_if_different(State& state, CallKind kind, const std::string& text);

// In place: every rank ends with from_process's values.
void broadcast(State& state, at::Tensor& tensor, int32_t from_process);

// Pads along dim to the largest size on any rank.
at::Tensor pad_across_processes(State& state, const at::Tensor& input, int64_t dim, double pad_value, bool pad_first);

}  // namespace accel::distributed
