// The TorchScript loader on arbitrary bytes: what accel_model_load_buffer runs (Model::load_buffer reads
// the bytes through load_torchscript), over the zip records and their sizes, the storage records and the
// pickles. An accel::Error is a refusal, which is fine; a crash, a sanitizer report or any other exception
// is a finding. What it accepts must keep the promise that training relies on: every byte each parameter
// and buffer reaches in its storage can be read (the copy below is checked by AddressSanitizer).
//
// The archive's TorchScript source (code/*.py) is held to the seeds' own: an input whose source differs is
// skipped. Compiling that source is LibTorch's frontend, which crashes on some mutations of it (a SEGV in
// ScriptTypeParser::parseClassConstant), and no check of accel's could tell good source from bad.
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/istream_adapter.h>
#include <dirent.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "train/torchscript/torchscript_file.hpp"
#include "train/torchscript/zip_record_sizes.hpp"

namespace {

std::set<std::string>& seed_sources() {
  static std::set<std::string> sources;
  return sources;
}

bool is_source(const std::string& record) {
  return record.rfind("code/", 0) == 0 && record.compare(record.size() - 3, 3, "pkl") != 0;
}

// The code/*.py records of the archive in `bytes`, in name order; throws what LibTorch's reader throws, and
// std::runtime_error for a record whose sizes LibTorch's reader would allocate unchecked (as the loader does).
std::vector<std::string> sources_of(const std::string& bytes) {
  std::istringstream stream(bytes);
  auto adapter = std::make_shared<caffe2::serialize::IStreamAdapter>(&stream);
  if (const auto problem = accel::train::oversized_zip_record(*adapter)) throw std::runtime_error(*problem);
  caffe2::serialize::PyTorchStreamReader reader(adapter);
  std::vector<std::string> sources;
  for (const auto& name : reader.getAllRecords()) {
    if (!is_source(name)) continue;
    const auto [data, size] = reader.getRecord(name);
    sources.emplace_back(static_cast<const char*>(data.get()), size);
  }
  return sources;
}

void read_every_byte(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const int64_t needed = accel::checked_storage_bytes(tensor.sizes(), tensor.strides(), tensor.storage_offset(),
                                                      tensor.element_size(), "a loaded tensor");
  if (needed == 0) return;
  std::vector<char> bytes(static_cast<size_t>(needed));
  std::memcpy(bytes.data(), tensor.storage().data(), bytes.size());
}

}  // namespace

// The source records of every committed seed (ACCEL_MODEL_SEEDS, the seed directory), read once.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  DIR* seeds = opendir(ACCEL_MODEL_SEEDS);
  if (seeds == nullptr) return 0;
  while (dirent* entry = readdir(seeds)) {
    std::ifstream file(std::string(ACCEL_MODEL_SEEDS) + "/" + entry->d_name, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    try {
      for (const std::string& source : sources_of(bytes.str())) seed_sources().insert(source);
    } catch (const std::exception&) {
      // not an archive LibTorch can read: it adds no source
    }
  }
  closedir(seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    for (const std::string& source : sources_of(bytes)) {
      if (seed_sources().count(source) == 0) return 0;
    }
  } catch (const std::exception&) {
    // an archive LibTorch cannot read: the loader must refuse it
  }
  std::istringstream archive(bytes);
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
