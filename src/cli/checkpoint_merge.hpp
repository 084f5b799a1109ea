// `accel checkpoint merge DIR OUT` (Accelerate's `accelerate merge-weights`): a model's weights rewritten as
// save_model writes a model held whole (ckpt/model_layout.hpp), from a checkpoint (save_state: its model file,
// or its pieces, every saving process's, joined: ckpt/model_pieces.hpp) or a saved model (one file, or shards
// and their index), into OUT: model.safetensors, or shards and an index
// above the shard size; each file's tensors in name order, tied weights stored once as the input stores them.
// A checkpoint saved under any ZeRO stage and number of processes, or a save in shards, so gives the very
// file a stage 0 save_model of the same weights writes; shards hold the same tensors, grouped in the
// input's order. Each tensor's bytes are copied from the mapped input as they are: no LibTorch, no process
// group, no more memory than the page cache lends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accel::cli {

struct MergeRequest {
  std::string source;  // a checkpoint or a saved model's directory
  std::string out;     // made if missing; must hold no saved model
  size_t model = 0;    // which model of a checkpoint (model.safetensors, model_1.safetensors, ...)
  uint64_t max_shard_size = 10'000'000'000;  // Accelerate's default, "10GB"
};

// Writes OUT's files and returns their names. A source named as Accelerate's SHARDED_STATE_DICT folder of model
// i, <checkpoint>/pytorch_model_fsdp_<i>, which an accel checkpoint lacks, is that checkpoint's model i.
// Error(Io) for what cannot be read or written;
// Error(InvalidArgument) naming the file for a source that is neither a checkpoint nor a saved model, a
// damaged header or index, a tensor in two shards, pieces that do not fit together (assemble_pieces), a model
// index the checkpoint does not hold, or an OUT that
// holds a saved model already (nothing of it is touched).
std::vector<std::string> merge_model(const MergeRequest& request);

// Error(InvalidArgument): directory is neither a checkpoint nor a saved model (the CLI's commands on one).
[[noreturn]] void fail_neither_checkpoint_nor_model(const std::string& directory);

// "10GB" (10^9 bytes a GB, as Accelerate's sizes), "500MiB" (2^20 a MiB), "2000" (bytes); KB, MB, GB, TB and
// KiB, MiB, GiB, TiB, any case. Error(InvalidArgument) naming the text otherwise, or for 0.
uint64_t parse_shard_size(const std::string& text);

}  // namespace accel::cli
