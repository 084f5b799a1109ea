// Optimizer state between ZeRO's pieces (train/optim/zero_optimizer.hpp) and whole parameters: a rank steps and
// keeps the state of its pieces only, while a checkpoint holds the state of whole parameters, the bytes
// zero_stage 0 saves, so that any stage and number of processes can resume from it.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>

namespace accel::train {

class ZeroShard;

// Replaces `whole`'s state (an optimizer over the shard's parameters) with every parameter's state
// assembled from every rank's pieces, as `pieces` (an optimizer of `kind` over the shard's views) holds
// them on each. Collective. A rank's state that cannot be read: Error(Internal).
void gather_piece_states(ZeroShard& shard, const torch::optim::Optimizer& pieces, torch::optim::Optimizer& whole,
                         const std::string& kind);
// Replaces `pieces`' state with this rank's pieces of `whole`'s (as loaded from a checkpoint).
void cut_piece_states(const ZeroShard& shard, const torch::optim::Optimizer& whole, torch::optim::Optimizer& pieces);

}  // namespace accel::train
