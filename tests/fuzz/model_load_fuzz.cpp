// The TorchScript loader on arbitrary bytes: what accel_model_load_buffer runs (Model::load_buffer reads
// the bytes through load_torchscript), over the zip records and their sizes, the storage records and the
// pickle. An accel::Error is a refusal, which is fine; a crash, a sanitizer report or any other exception
// is a finding. What it accepts must keep the promise that training relies on: every byte each parameter
// and buffer reaches in its storage can be read (the copy below is checked by AddressSanitizer).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "train/torchscript_file.hpp"

namespace {

void read_every_byte(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const int64_t needed = accel::checked_storage_bytes(tensor.sizes(), tensor.strides(), tensor.storage_offset(),
                                                      tensor.element_size(), "a loaded tensor");
  if (needed == 0) return;
  std::vector<char> bytes(static_cast<size_t>(needed));
  std::memcpy(bytes.data(), tensor.storage().data(), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream archive(std::string(reinterpret_cast<const char*>(data), size));
  torch::jit::Module module;
  try {
    module = accel::train::load_torchscript(archive, "the buffer");
  } catch (const accel::Error&) {
    return 0;
  }
  for (const auto& parameter : module.named_parameters(true)) read_every_byte(parameter.value);
  for (const auto& buffer : module.named_buffers(true)) read_every_byte(buffer.value);
  return 0;
}
