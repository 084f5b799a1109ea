// `accel checkpoint inspect DIR`: what a checkpoint (save_state) or a saved model (save_model) holds, as
// JSON, read from its manifest, index and safetensors headers without loading LibTorch; `accel checkpoint
// merge DIR OUT` (cli/checkpoint_merge.hpp): its model rewritten as save_model writes one held whole.
#pragma once

namespace accel::cli {

int run_checkpoint(int argc, char** argv);
// `accel merge-weights CHECKPOINT_DIR OUTPUT_PATH [--remove_checkpoint_dir]`: Accelerate's command, as
// `accel checkpoint merge`.
int run_merge_weights(int argc, char** argv);

}  // namespace accel::cli
