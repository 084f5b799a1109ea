// Optimizer state between ZeRO's pieces (train/optim/zero_optimizer.hpp) and whole parameters: a rank steps and
// keeps the state of its pieces only, while a checkpoint is loaded by any stage and number of processes. A
// checkpoint holds each process's pieces as that process saved them (piece_states, written by every process
// at once, so no process holds more than its share while saving); whoever loads assembles whole parameters'
// state from all of them (assemble_piece_states) and keeps what it steps.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

#include "core/named_tensors.hpp"

namespace accel::train {

class ZeroShard;

// The state `pieces` (an optimizer of the shard's kind over the shard's views) holds for this rank's pieces,
// as bytes: each piece's state with the name `names[p]` of its parameter (names parallel to
// shard.parameters(); a parameter named "" is not saved) and its first element. Not collective.
std::string piece_states(const ZeroShard& shard, const torch::optim::Optimizer& pieces,
                         const std::vector<std::string>& names);
// Replaces `whole`'s state (an optimizer of `kind` over `parameters`, by the names piece_states was given) with
// every parameter's state assembled from the pieces of `parts` (piece_states' bytes of every process that
// saved). A part that is not such bytes, a piece of a parameter `whole` lacks, or a parameter whose pieces do
// not cover its elements once: Error(InvalidArgument) naming it, and `whole` is unchanged.
void assemble_piece_states(const std::vector<std::string>& parts, const NamedTensors& parameters,
                           torch::optim::Optimizer& whole, const std::string& kind);
// Replaces `pieces`' state with this rank's pieces of `whole`'s (as loaded from a checkpoint).
void cut_piece_states(const ZeroShard& shard, const torch::optim::Optimizer& whole, torch::optim::Optimizer& pieces);

}  // namespace accel::train
