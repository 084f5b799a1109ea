// The collectives that split a tensor over the ranks or put it back together, into tensors the caller
// owns (PyTorch's reduce_scatter_tensor and all_gather_into_tensor): what sharding optimizer state or
// gradients is made of. They go through the group's transport (transport.hpp): shared memory on a node,
// Gloo (or NCCL) otherwise, the hierarchical pair across nodes.
//
// Shapes: every rank's input has the same shape and dtype; the output has the input's dtype and device and,
// for reduce_scatter, 1/world of its elements, for all_gather world times them (any shape: the elements
// count, in row-major order). With the state's check_shapes on, one small all-gather compares every rank's
// input and output first, so that a difference fails on every rank alike with the same message naming each
// process; with it off, only this rank's output is checked (ranks whose inputs differ then fail in the
// transport, or not at all). Failures of the group are those of the other collectives (collectives.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "distributed/state.hpp"

namespace accel::distributed {

// output, in place, receives this rank's share of the reduction of every rank's input: with n =
// output.numel(), elements [rank * n, (rank + 1) * n) of the flattened reduction. reduction: "sum" or "mean"
// (Error(InvalidArgument) otherwise; "mean" needs a floating dtype, Error(Dtype)).
// Errors: Error(ShapeMismatch) for an input of another shape on some rank or an output of the wrong element
// count; Error(Dtype) for an output of another dtype; Error(InvalidArgument) for one on another device or an
// undefined tensor; the group's failures.
void reduce_scatter(State& state, const at::Tensor& input, at::Tensor& output, const std::string& reduction);

// output, in place, receives every rank's input in rank order (rank r's elements from r * input.numel()).
// Errors: as reduce_scatter's, but for the reduction.
void all_gather(State& state, const at::Tensor& input, at::Tensor& output);

}  // namespace accel::distributed
