// Saved states of optimizers, schedulers and the grad scaler: LibTorch archives held in strings.
#pragma once

#include <torch/serialize/archive.h>

#include <string>
#include <vector>

namespace accel::train {

// Parses bytes written by archive_bytes; Error(InvalidArgument) "<what> state is not a saved <what>
// archive" for anything else. Tensors are loaded onto `device`.
torch::serialize::InputArchive read_archive(const std::string& bytes, const std::string& what,
                                            const c10::Device& device = c10::Device(c10::kCPU));
std::string archive_bytes(torch::serialize::OutputArchive& archive);

// Values of a saved state; Error(InvalidArgument) "<what> state has no <key>" when missing or mistyped.
double read_double(torch::serialize::InputArchive& archive, const std::string& key, const std::string& what);
int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key, const std::string& what);
std::vector<double> read_double_list(torch::serialize::InputArchive& archive, const std::string& key,
                                     const std::string& what);

}  // namespace accel::train
