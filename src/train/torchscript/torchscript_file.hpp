// Reading TorchScript archives with the check LibTorch 1.13 leaves out. Its loader gives each storage the
// size the pickled tensor states, over a buffer only as long as the archive's record: a record cut short
// (a truncated or corrupt file) loads fine and is then read and written past its end.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <istream>
#include <string>

namespace accel::train {

// Loads the module in `archive`, on the CPU. Throws Error(InvalidArgument) "<source> is not a TorchScript
// model: ..." when LibTorch cannot load it, when a record claims more bytes than it holds
// (zip_record_sizes.hpp) or a pickle in it announces more than it can hold (pickle_lengths.hpp), and "<source>: parameter 'w' needs N bytes but its storage
// holds M ..." when a parameter's or buffer's sizes, strides and offset reach past the bytes its storage
// record holds (an empty record holds none).
torch::jit::Module load_torchscript(std::istream& archive, const std::string& source);

}  // namespace accel::train
