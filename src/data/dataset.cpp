#include "data/dataset.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "core/field_index.hpp"

namespace accel::data {


void check_index(int64_t index, int64_t size) {
  if (index < 0 || index >= size) {
    fail(Code::OutOfRange, "dataset index " + std::to_string(index) + " is outside [0, " + std::to_string(size) + ")");
  }
}

TensorDataset::TensorDataset(NamedTensors tensors) : tensors_(std::move(tensors)) {
  if (tensors_.empty()) fail(Code::InvalidArgument, "a tensor dataset needs at least one tensor");
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors_) {
    check_field_name(name);
    if (!names.insert(name).second) fail(Code::InvalidArgument, "tensor name '" + name + "' appears twice");
    if (!tensor.defined() || tensor.dim() == 0) {
      fail(Code::InvalidArgument, "tensor '" + name + "' has no dim 0 to index samples by");
    }
  }
  size_ = tensors_.front().second.size(0);
  for (const auto& [name, tensor] : tensors_) {
    if (tensor.size(0) != size_) {
      fail(Code::InvalidArgument, "tensors of a dataset must share dim 0: '" + tensors_.front().first + "' has " +
                                      std::to_string(size_) + " rows but '" + name + "' has " +
                                      std::to_string(tensor.size(0)));
    }
  }
}

namespace {

// Rows picked at random from a large tensor are cache misses one after the other; asking for the rows a
// few places ahead lets the memory system fetch them while the current one is copied.
constexpr size_t kRowsAhead = 6;
constexpr size_t kCacheLine = 64;

void prefetch_row(const char* row, size_t bytes) {
  for (size_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(row + offset);
}

size_t row_bytes_of(const at::Tensor& source) {
  return static_cast<size_t>(source.numel() / std::max<int64_t>(1, source.size(0))) * source.element_size();
}

void prefetch_first_rows(const at::Tensor& source, const std::vector<int64_t>& indices) {
  const size_t row_bytes = row_bytes_of(source);
  const auto* base = static_cast<const char*>(source.data_ptr());
  for (size_t i = 0; i < std::min(kRowsAhead, indices.size()); ++i) {
    prefetch_row(base + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  }
}

at::Tensor gather_rows(const at::Tensor& source, const std::vector<int64_t>& indices) {
  if (!source.is_cpu() || !source.is_contiguous()) {
    // The index vector outlives the call, so a borrowed view of it is enough.
    auto index = at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())}, at::kLong);
    return at::index_select(source, 0, index.to(source.device()));
  }
  std::vector<int64_t> shape = source.sizes().vec();
  shape.front() = static_cast<int64_t>(indices.size());
  auto out = at::empty(shape, source.options());
  const size_t row_bytes = row_bytes_of(source);
  const auto* base = static_cast<const char*>(source.data_ptr());
  auto* destination = static_cast<char*>(out.data_ptr());
  prefetch_first_rows(source, indices);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i + kRowsAhead < indices.size()) {
      prefetch_row(base + static_cast<size_t>(indices[i + kRowsAhead]) * row_bytes, row_bytes);
    }
    std::memcpy(destination + i * row_bytes, base + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

void TensorDataset::will_fetch(const std::vector<int64_t>& indices) {
  for (int64_t index : indices) {
    if (index < 0 || index >= size_) return;
  }
  for (const auto& field : tensors_) {
    if (field.second.is_cpu() && field.second.is_contiguous()) prefetch_first_rows(field.second, indices);
  }
}

NamedTensors TensorDataset::fetch(const std::vector<int64_t>& indices) {
  for (int64_t index : indices) check_index(index, size_);
  NamedTensors batch;
  batch.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) batch.emplace_back(name, gather_rows(tensor, indices));
  return batch;
}

ItemDataset::ItemDataset(int64_t size, GetItem get_item) : size_(size), get_item_(std::move(get_item)) {
  if (size_ < 0) fail(Code::InvalidArgument, "dataset length " + std::to_string(size_) + " is negative");
}

NamedTensors ItemDataset::fetch(const std::vector<int64_t>& indices) {
  std::vector<NamedTensors> items;
  items.reserve(indices.size());
  for (int64_t index : indices) {
    check_index(index, size_);
    items.push_back(get_item_(index));
  }
  return collate(items, indices);
}

NamedTensors collate(const std::vector<NamedTensors>& items, const std::vector<int64_t>& indices) {
  if (items.empty()) fail(Code::InvalidArgument, "cannot collate an empty batch");
  const NamedTensors& first = items.front();
  if (first.empty()) fail(Code::InvalidArgument, "item " + std::to_string(indices.front()) + " has no tensors");
  NamedTensors batch;
  for (size_t field = 0; field < first.size(); ++field) {
    const auto& [name, reference] = first[field];
    std::vector<at::Tensor> column;
    column.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item = "item " + std::to_string(indices[i]);
      if (items[i].size() != first.size() || items[i][field].first != name) {
        fail(Code::ShapeMismatch, item + " does not have the fields of item " + std::to_string(indices.front()) +
                                      " (expected '" + name + "' as field " + std::to_string(field) + ")");
      }
      const at::Tensor& tensor = items[i][field].second;
      if (!tensor.defined()) fail(Code::InvalidArgument, item + ": field '" + name + "' is undefined");
      if (tensor.scalar_type() != reference.scalar_type()) {
        fail(Code::Dtype, item + ": field '" + name + "' is " + c10::toString(tensor.scalar_type()) + " but item " +
                              std::to_string(indices.front()) + " has " + c10::toString(reference.scalar_type()) +
                              "; cannot stack");
      }
      if (tensor.sizes() != reference.sizes()) {
        fail(Code::ShapeMismatch, item + ": field '" + name + "' has shape " + c10::str(tensor.sizes()) + " but item " +
                                      std::to_string(indices.front()) + " has " + c10::str(reference.sizes()) +
                                      "; cannot stack");
      }
      column.push_back(tensor);
    }
    batch.emplace_back(name, at::stack(column, 0));
  }
  return batch;
}

}  // namespace accel::data
