#include "formats/safetensors.hpp"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>

#include "core/dtype.hpp"
#include "core/error.hpp"
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

size_t header_bytes(const TensorHeader& entry) {
  size_t elements = 1;
  for (int64_t size : entry.shape) elements *= static_cast<size_t>(size);
  return elements * c10::elementSize(entry.dtype);
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

TensorHeader header_of(const std::string& name, const at::Tensor& tensor) {
  return {name, tensor.scalar_type(), tensor.sizes().vec()};
}

void write_safetensors(AtomicFile& file, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, at::Tensor>> sorted;
  for (const auto& [name, tensor] : tensors) sorted.emplace_back(name, tensor);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TensorHeader> entries;
  for (const auto& [name, tensor] : sorted) entries.push_back(header_of(name, tensor));
  SafetensorsStream stream(file, std::move(entries), metadata);
  for (const auto& entry : sorted) stream.append(entry.second);
  stream.finish();
}

SafetensorsStream::SafetensorsStream(AtomicFile& file, std::vector<TensorHeader> entries,
                                     const std::map<std::string, std::string>& metadata)
    : file_(file), entries_(std::move(entries)) {
  std::vector<HeaderEntry> announced;
  for (const TensorHeader& entry : entries_) {
    announced.push_back({entry.name, dtype_info(entry.dtype).safetensors, entry.shape, header_bytes(entry)});
  }
  write_safetensors_header(file_, announced, metadata);
}

void SafetensorsStream::append(const at::Tensor& tensor) {
  if (next_ == entries_.size()) {
    fail(Code::InvalidArgument, file_.path() + ": a tensor more than the " + std::to_string(entries_.size()) + " announced");
  }
  const TensorHeader& entry = entries_[next_];
  if (tensor.scalar_type() != entry.dtype || tensor.sizes().vec() != entry.shape) {
    fail(Code::InvalidArgument, file_.path() + ": '" + entry.name + "' was announced as " + c10::toString(entry.dtype) +
                                    " " + c10::str(c10::IntArrayRef(entry.shape)) + ", its tensor is " +
                                    c10::toString(tensor.scalar_type()) + " " + c10::str(tensor.sizes()));
  }
  const at::Tensor bytes = tensor.detach().cpu().contiguous();
  file_.write(bytes.data_ptr(), tensor_bytes(bytes));
  ++next_;
}

void SafetensorsStream::finish() const {
  if (next_ != entries_.size()) {
    fail(Code::InvalidState, file_.path() + ": " + std::to_string(next_) + " of " + std::to_string(entries_.size()) +
                                 " announced tensors were written");
  }
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
