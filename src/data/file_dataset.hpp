// A dataset over memory-mapped .safetensors and .npy files: a batch copies only the rows it needs, so
// data larger than memory works and untouched rows are never read. A file truncated by another process
// while the dataset maps it fails the batch that reads its lost rows with Error(Io) naming the file
// (formats::copy_from_mapping), instead of the SIGBUS that would kill the process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "formats/array_view.hpp"

namespace accel::data {

class FileDataset final : public Dataset {
 public:
  // Every tensor of a .safetensors file becomes a field named like the tensor.
  static std::shared_ptr<FileDataset> from_safetensors(const std::string& path);
  // One .npy file per field.
  static std::shared_ptr<FileDataset> from_npy(const std::vector<std::string>& names, const std::vector<std::string>& paths);

  int64_t size() const override { return size_; }
  NamedTensors fetch(const std::vector<int64_t>& indices) override;

 private:
  // The views point into these mappings, which live as long as the dataset; files[i] is the path of
  // fields[i]'s file, for errors.
  FileDataset(std::vector<std::shared_ptr<void>> owners, std::vector<formats::ArrayView> fields,
              std::vector<std::string> files);

  std::vector<std::shared_ptr<void>> owners_;
  std::vector<formats::ArrayView> fields_;
  std::vector<std::string> files_;
  int64_t size_ = 0;
};

}  // namespace accel::data
