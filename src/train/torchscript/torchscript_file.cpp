#include "train/torchscript/torchscript_file.hpp"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/istream_adapter.h>
#include <torch/csrc/jit/mobile/file_format.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "train/torchscript/code_records.hpp"
#include "train/torchscript/pickle_lengths.hpp"
#include "train/torchscript/zip_record_sizes.hpp"

namespace accel::train {

namespace {

// Passes reads through, noting the destination and length of each read of a tensor record's bytes. The
// zip reader reads a stored (uncompressed) entry, as LibTorch writes every tensor record, in one read
// straight into the buffer that becomes the storage: after the load, a storage's data pointer finds the
// number of bytes behind it.
//
// And it hides the code's source-range records (code/**/*.py.debug_pkl) by changing the last letter of
// their names in the central directory: LibTorch 1.13 unpickles them only to word an error about the code,
// and its unpickler and range lookup crashed the process on damaged ones (fuzz_model_load, three inputs);
// without them its errors quote the code itself.
class RecordReads final : public caffe2::serialize::ReadAdapterInterface {
 public:
  RecordReads(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> archive,
              std::unordered_set<uint64_t> tensor_record_offsets)
      : archive_(std::move(archive)), tensor_record_offsets_(std::move(tensor_record_offsets)),
        hidden_name_ends_(directory_name_ends(*archive_, ".debug_pkl")) {}

  size_t size() const override { return archive_->size(); }

  size_t read(uint64_t pos, void* buf, size_t n, const char* what) const override {
    const size_t got = archive_->read(pos, buf, n, what);
    if (tensor_record_offsets_.count(pos) != 0) bytes_read_into_[buf] = got;
    for (const uint64_t end : hidden_name_ends_) {
      if (end >= pos && end - pos < got) static_cast<char*>(buf)[end - pos] = '~';
    }
    return got;
  }

  // Bytes of a tensor record read into `data`; nullopt when none was (a compressed or empty record).
  std::optional<size_t> bytes_behind(const void* data) const {
    const auto found = bytes_read_into_.find(data);
    if (found == bytes_read_into_.end()) return std::nullopt;
    return found->second;
  }

 private:
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> archive_;
  std::unordered_set<uint64_t> tensor_record_offsets_;
  std::vector<uint64_t> hidden_name_ends_;
  mutable std::unordered_map<const void*, size_t> bytes_read_into_;
};

// Where the bytes of each record under data/ (the pickled module's tensors) start in the archive. Throws
// std::runtime_error for a pickle record (*.pkl, *.debug_pkl) that announces more than it can hold
// (pickle_lengths.hpp), which LibTorch's unpickler would allocate before finding it missing, and for a
// code record with a class statement LibTorch's importer would crash on (code_records.hpp).
std::unordered_set<uint64_t> tensor_record_offsets(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& archive) {
  caffe2::serialize::PyTorchStreamReader reader(archive);
  std::unordered_set<uint64_t> offsets;
  for (const auto& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) == 0) offsets.insert(reader.getRecordOffset(name));
    if (name.size() > 4 && name.compare(name.size() - 3, 3, "pkl") == 0) {  // data.pkl, code/*.py.debug_pkl
      const auto [data, size] = reader.getRecord(name);
      const std::string pickle(static_cast<const char*>(data.get()), size);
      if (const auto problem = pickle_overreach(pickle)) {
        throw std::runtime_error("record '" + name + "' is a pickle with " + *problem);
      }
    }
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0) {  // code/**/*.py: the module's source
      const auto [data, size] = reader.getRecord(name);
      if (const auto problem = unimportable_class_statement(std::string(static_cast<const char*>(data.get()), size), name)) {
        throw std::runtime_error(*problem);
      }
    }
  }
  return offsets;
}

void check_storage(const RecordReads& reads, const std::string& what, const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;  // sparse and opaque tensors own no plain storage
  const int64_t needed =
      checked_storage_bytes(tensor.sizes(), tensor.strides(), tensor.storage_offset(), tensor.element_size(), what);
  // The storage's size is the one the pickle states. An empty record leaves it without any data: no read
  // fills it, so the pointer is null and nothing is behind it.
  size_t held = tensor.storage().data() == nullptr ? 0 : tensor.storage().nbytes();
  if (const auto record = reads.bytes_behind(tensor.storage().data())) held = std::min(held, *record);
  if (static_cast<uint64_t>(needed) > held) {
    fail(Code::InvalidArgument, what + " needs " + std::to_string(needed) + " bytes but its storage holds " +
                                    std::to_string(held) + " (the file is truncated or corrupt)");
  }
}

}  // namespace

torch::jit::Module load_torchscript(std::istream& archive, const std::string& source) {
  torch::jit::Module module;
  std::shared_ptr<RecordReads> reads;
  try {
    // The flatbuffer format (torch.jit.save(_use_flatbuffer=True), the mobile one): LibTorch 1.13 reads it
    // without verifying it, and a damaged file crashed the process (fuzz_model_load); its headers do not
    // ship the flatbuffers verifier, so no check can come first.
    if (torch::jit::getFileFormat(archive) == torch::jit::FileFormat::FlatbufferFileFormat) {
      throw std::runtime_error("it is in the flatbuffer format (torch.jit.save(_use_flatbuffer=True)), which accel "
                               "does not load: LibTorch 1.13 reads it unchecked; save it with torch.jit.save's "
                               "default format");
    }
    auto adapter = std::make_shared<caffe2::serialize::IStreamAdapter>(&archive);
    if (const auto problem = oversized_zip_record(*adapter)) throw std::runtime_error(*problem);
    reads = std::make_shared<RecordReads>(adapter, tensor_record_offsets(adapter));
    module = torch::jit::load(reads);
  } catch (const std::exception& error) {
    fail_from(error, Code::InvalidArgument, source + " is not a TorchScript model: ");
  }
  for (const auto& parameter : module.named_parameters(true)) {
    check_storage(*reads, source + ": parameter '" + parameter.name + "'", parameter.value);
  }
  for (const auto& buffer : module.named_buffers(true)) {
    check_storage(*reads, source + ": buffer '" + buffer.name + "'", buffer.value);
  }
  return module;
}

}  // namespace accel::train
