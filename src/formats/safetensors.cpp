#include "formats/safetensors.hpp"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/json.hpp"
#include "formats/safetensors_header.hpp"

namespace accel::formats {

namespace {

// ---- reading -------------------------------------------------------------------------------------

// Checks one entry against its shape and the payload's extent, and points a view at its bytes.
ArrayView make_tensor_view(const SafetensorsEntry& entry, const unsigned char* payload, size_t payload_size,
                           const std::string& path) {
  const std::string what = "tensor '" + entry.name + "'";
  const DtypeInfo* dtype = dtype_from_safetensors(entry.dtype);
  if (dtype == nullptr) {
    fail_in_file(Code::Dtype, path,
                 what + " has unsupported dtype '" + entry.dtype + "'; supported: " + safetensors_dtype_names());
  }
  const size_t nbytes = checked_nbytes(path, what, entry.shape, dtype->size);
  const auto [begin, end] = data_extent(entry, path);
  if (end - begin != nbytes) {
    fail_in_file(Code::InvalidArgument, path,
                 what + " data_offsets " + shape_string(entry.offsets) + " span " + std::to_string(end - begin) +
                     " bytes but shape " + shape_string(entry.shape) + " of " + entry.dtype + " needs " +
                     std::to_string(nbytes));
  }
  check_in_payload(entry, end, payload_size, path);
  return ArrayView{entry.name, dtype->type, entry.shape, payload + begin, nbytes};
}

const unsigned char* first_byte(const ArrayView& view) { return static_cast<const unsigned char*>(view.data); }

// Sorting by start address puts any overlap next to the furthest-reaching earlier tensor. Empty
// tensors occupy no bytes and overlap nothing.
void check_no_overlap(const std::vector<ArrayView>& arrays, const std::string& path) {
  std::vector<const ArrayView*> order;
  for (const ArrayView& view : arrays) {
    if (view.nbytes > 0) order.push_back(&view);
  }
  std::sort(order.begin(), order.end(),
            [](const ArrayView* a, const ArrayView* b) { return first_byte(*a) < first_byte(*b); });
  const ArrayView* furthest = nullptr;
  for (const ArrayView* view : order) {
    if (furthest && first_byte(*view) < first_byte(*furthest) + furthest->nbytes) {
      fail_in_file(Code::InvalidArgument, path, "tensors '" + furthest->name + "' and '" + view->name + "' overlap");
    }
    if (!furthest || first_byte(*view) + view->nbytes > first_byte(*furthest) + furthest->nbytes) furthest = view;
  }
}

std::string list_names(const std::vector<ArrayView>& arrays) {
  // A checkpoint may hold thousands of tensors; the first few are enough to spot a naming mismatch.
  constexpr size_t kShown = 20;
  if (arrays.empty()) return "(none)";
  std::string out;
  for (size_t i = 0; i < arrays.size() && i < kShown; ++i) out += (i ? ", " : "") + arrays[i].name;
  if (arrays.size() > kShown) out += ", ... (" + std::to_string(arrays.size() - kShown) + " more)";
  return out;
}

// ---- writing -------------------------------------------------------------------------------------

size_t tensor_bytes(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()) * tensor.element_size(); }

// The JSON header, padded with spaces so that the payload after it starts 8-byte aligned, as the
// reference writer pads it.
std::string header_json(const std::map<std::string, at::Tensor>& sorted,
                        const std::map<std::string, std::string>& metadata) {
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    header += (first ? "" : ",") + json_quote(key) + ":" + json_quote(value);
    first = false;
  }
  header += "}";
  size_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    const size_t bytes = tensor_bytes(tensor);
    header += "," + json_quote(name) + ":{\"dtype\":\"" + dtype_info(tensor.scalar_type()).safetensors + "\",\"shape\":[";
    for (int64_t d = 0; d < tensor.dim(); ++d) header += (d ? "," : "") + std::to_string(tensor.size(d));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return header;
}

}  // namespace

SafetensorsContents parse_safetensors(const unsigned char* bytes, size_t size, const std::string& path) {
  const SafetensorsHeader header = parse_safetensors_header(bytes, size, path);
  SafetensorsContents contents;
  contents.metadata = header.metadata;
  for (const SafetensorsEntry& entry : header.entries) {
    contents.arrays.push_back(make_tensor_view(entry, bytes + header.data_start, size - header.data_start, path));
  }
  auto& arrays = contents.arrays;
  std::sort(arrays.begin(), arrays.end(), [](const ArrayView& a, const ArrayView& b) { return a.name < b.name; });
  auto twin = std::adjacent_find(arrays.begin(), arrays.end(),
                                 [](const ArrayView& a, const ArrayView& b) { return a.name == b.name; });
  if (twin != arrays.end()) fail_in_file(Code::InvalidArgument, path, "tensor '" + twin->name + "' appears twice");
  check_no_overlap(arrays, path);
  return contents;
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(path), contents_(parse_safetensors(file_.data(), file_.size(), path)) {}

const ArrayView* SafetensorsFile::find(const std::string& name) const {
  const auto& arrays = contents_.arrays;
  auto it = std::lower_bound(arrays.begin(), arrays.end(), name,
                             [](const ArrayView& view, const std::string& key) { return view.name < key; });
  return it == arrays.end() || it->name != name ? nullptr : &*it;
}

const ArrayView& SafetensorsFile::array(const std::string& name) const {
  const ArrayView* found = find(name);
  if (found == nullptr) {
    fail_in_file(Code::InvalidArgument, file_.path(), "no tensor named '" + name + "'; available: " + list_names(contents_.arrays));
  }
  return *found;
}

void write_safetensors(AtomicFile& file, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::map<std::string, at::Tensor> sorted;
  for (const auto& [name, tensor] : tensors) {
    if (!sorted.emplace(name, tensor.detach().cpu().contiguous()).second) {
      fail(Code::InvalidArgument, "tensor name '" + name + "' appears twice");
    }
  }
  std::map<std::string, std::string> all_metadata = metadata;
  all_metadata.emplace("format", "pt");
  const std::string header = header_json(sorted, all_metadata);
  const uint64_t header_size = header.size();
  file.write(&header_size, sizeof header_size);
  file.write(header.data(), header.size());
  for (const auto& [name, tensor] : sorted) file.write(tensor.data_ptr(), tensor_bytes(tensor));
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  AtomicFile file(path);
  write_safetensors(file, tensors, metadata);
  file.commit();
}

at::Tensor copy_to_tensor(const ArrayView& view) {
  auto tensor = at::empty(view.shape, at::TensorOptions().dtype(view.dtype));
  if (view.nbytes > 0) std::memcpy(tensor.data_ptr(), view.data, view.nbytes);  // an empty tensor may have no data
  return tensor;
}

}  // namespace accel::formats
