#include "data/file_dataset.hpp"

#include <ATen/ops/empty.h>

#include "core/error.hpp"
#include "core/field_index.hpp"
#include "formats/mapped_file.hpp"
#include "formats/npy.hpp"
#include "formats/safetensors.hpp"

namespace accel::data {

using formats::ArrayView;

FileDataset::FileDataset(std::vector<std::shared_ptr<void>> owners, std::vector<ArrayView> fields,
                         std::vector<std::string> files)
    : owners_(std::move(owners)), fields_(std::move(fields)), files_(std::move(files)) {
  if (fields_.empty()) fail(Code::InvalidArgument, "a file dataset needs at least one array");
  for (const auto& field : fields_) {
    check_field_name(field.name);
    if (field.shape.empty()) fail(Code::InvalidArgument, "array '" + field.name + "' is 0-d: it has no samples to index");
  }
  size_ = fields_.front().shape.front();
  for (const auto& field : fields_) {
    if (field.shape.front() != size_) {
      fail(Code::InvalidArgument, "arrays of a dataset must share dim 0: '" + fields_.front().name + "' has " +
                                      std::to_string(size_) + " rows but '" + field.name + "' has " +
                                      std::to_string(field.shape.front()));
    }
  }
}

std::shared_ptr<FileDataset> FileDataset::from_safetensors(const std::string& path) {
  auto file = std::make_shared<formats::SafetensorsFile>(path);
  std::vector<ArrayView> fields = file->arrays();
  std::vector<std::string> files(fields.size(), path);
  return std::shared_ptr<FileDataset>(new FileDataset({file}, std::move(fields), std::move(files)));
}

std::shared_ptr<FileDataset> FileDataset::from_npy(const std::vector<std::string>& names,
                                                   const std::vector<std::string>& paths) {
  std::vector<std::shared_ptr<void>> owners;
  std::vector<ArrayView> fields;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto file = std::make_shared<formats::NpyFile>(paths[i]);
    ArrayView view = file->array();
    view.name = names[i];
    owners.push_back(file);
    fields.push_back(view);
  }
  return std::shared_ptr<FileDataset>(new FileDataset(std::move(owners), std::move(fields), paths));
}

NamedTensors FileDataset::fetch(const std::vector<int64_t>& indices) {
  NamedTensors batch;
  for (size_t f = 0; f < fields_.size(); ++f) {
    const ArrayView& field = fields_[f];
    std::vector<int64_t> shape = field.shape;
    shape.front() = static_cast<int64_t>(indices.size());
    auto out = at::empty(shape, at::TensorOptions(field.dtype));
    auto* destination = static_cast<char*>(out.data_ptr());
    for (size_t i = 0; i < indices.size(); ++i) {
      check_index(indices[i], size_);
      const ArrayView row = formats::row_slice(field, indices[i], 1);
      formats::copy_from_mapping(destination + i * row.nbytes, row.data, row.nbytes, files_[f]);
    }
    batch.emplace_back(field.name, out);
  }
  return batch;
}

}  // namespace accel::data
