// Optimizer state between ZeRO's pieces (train/optim/zero_optimizer.hpp) and whole parameters: a rank steps and
// keeps the state of its pieces only, while a checkpoint is loaded by any stage and number of processes. A
// checkpoint holds each process's pieces as that process saved them (piece_states, written by every process
// at once, so no process holds more than its share while saving); whoever loads reads them one at a time and
// either assembles whole parameters' state (assemble_piece_states, stage 0) or keeps the elements it steps
// (cut_saved_pieces), so that a rank loading under ZeRO holds no more than its share and one saved part.
#pragma once

#include <torch/optim/optimizer.h>

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/named_tensors.hpp"

namespace accel::train {

class ZeroShard;

// The state `pieces` (an optimizer of the shard's kind over the shard's views) holds for this rank's pieces:
// `bytes`, each piece's state with the name `names[p]` of its parameter (names parallel to shard.parameters();
// a parameter named "" is not saved) and its first element; and `index`, a line "<first element> <state
// elements> <name>" per piece, which a loader reads without parsing the bytes to skip the parts that hold
// nothing it steps (empty when a name holds a line break: such parts are always read). Not collective.
struct SavedPieces {
  std::string bytes;
  std::string index;
};
SavedPieces piece_states(const ZeroShard& shard, const torch::optim::Optimizer& pieces, const std::vector<std::string>& names);
// The map of per-parameter states a torch::optim optimizer holds (its key is a string in LibTorch 1.13 and a
// parameter's address in 2.x).
using OptimizerStates = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
// Reads the bytes process `process` saved (piece_states'): a checkpoint hands the parts over one at a time.
using PartReader = std::function<std::string(size_t process)>;
// Reads the index process `process` saved with them (piece_states'), std::nullopt where there is none.
using PartIndexReader = std::function<std::optional<std::string>(size_t process)>;

// Replaces `whole`'s state (an optimizer of `kind` over `parameters`, by the names piece_states was given) with
// every parameter's state assembled from the pieces of the `count` parts (piece_states' bytes of every process
// that saved), read one at a time. A part that is not such bytes, a piece of a parameter `whole` lacks, or a
// parameter whose pieces do not cover its elements once: Error(InvalidArgument) naming it, and `whole` is
// unchanged.
void assemble_piece_states(const PartReader& read_part, size_t count, const NamedTensors& parameters,
                           torch::optim::Optimizer& whole, const std::string& kind);
// The state of this rank's pieces (keyed by the shard's views) cut from the `count` parts directly, read one at
// a time: no more than one part and this rank's share are held at once, whatever the number of processes that
// saved. A part whose index (read_index, when given) lists nothing this rank steps is not read at all, so a
// rank reads about its own share of the files, not every process's. names: the optimizer's names of the
// shard's parameters (piece_states'). Tensors go to `device`. The errors of assemble_piece_states, and
// Error(InvalidArgument) naming the process whose index is damaged.
OptimizerStates cut_saved_pieces(const PartReader& read_part, size_t count, const ZeroShard& shard,
                                 const std::vector<std::string>& names, const std::string& kind,
                                 const c10::Device& device, const PartIndexReader& read_index);
// This rank's pieces of `whole`'s state (as loaded from a checkpoint), keyed by the shard's views.
OptimizerStates cut_piece_states(const ZeroShard& shard, const torch::optim::Optimizer& whole);

}  // namespace accel::train
