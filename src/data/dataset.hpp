// Datasets: where samples come from. A batch is a list of named tensors sharing dim 0.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/named_tensors.hpp"

namespace accel::data {



// A map-style dataset: a length and random access. fetch returns the rows for `indices`, collated along
// a new dim 0, so that datasets that can gather rows at once (tensors, mapped files) never stack items.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual NamedTensors fetch(const std::vector<int64_t>& indices) = 0;
  // A hint that these rows come next: a dataset may start bringing them into cache.
  virtual void will_fetch(const std::vector<int64_t>& indices) { (void)indices; }
};

// Named tensors sharing dim 0; rows are gathered with index_select, without copying the source.
class TensorDataset final : public Dataset {
 public:
  // Throws Error(InvalidArgument) when there are none, a name repeats, or dim-0 sizes differ (naming them).
  explicit TensorDataset(NamedTensors tensors);
  int64_t size() const override { return size_; }
  NamedTensors fetch(const std::vector<int64_t>& indices) override;
  void will_fetch(const std::vector<int64_t>& indices) override;

 private:
  NamedTensors tensors_;
  int64_t size_ = 0;
};

// Items produced one at a time by a function (a C callback behind the ABI), stacked into batches.
class ItemDataset final : public Dataset {
 public:
  using GetItem = std::function<NamedTensors(int64_t index)>;
  ItemDataset(int64_t size, GetItem get_item);
  int64_t size() const override { return size_; }
  NamedTensors fetch(const std::vector<int64_t>& indices) override;

 private:
  int64_t size_;
  GetItem get_item_;
};

// An iterable dataset: a stream of items, restarted for each epoch. Only rank 0 reads it when batches
// are dispatched; every rank reads all of it otherwise (and keeps its share).
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  // Restarts the stream for `epoch` (Accelerate's set_epoch on the dataset).
  virtual void start_epoch(int64_t epoch) = 0;
  // The next item, or nullopt at the end of the stream.
  virtual std::optional<NamedTensors> next_item() = 0;
};

// A stream produced by functions (C callbacks behind the ABI).
class CallbackIterableDataset final : public IterableDataset {
 public:
  using StartEpoch = std::function<void(int64_t epoch)>;
  using NextItem = std::function<std::optional<NamedTensors>()>;
  CallbackIterableDataset(StartEpoch start_epoch, NextItem next_item)
      : start_epoch_(std::move(start_epoch)), next_item_(std::move(next_item)) {}
  void start_epoch(int64_t epoch) override { start_epoch_(epoch); }
  std::optional<NamedTensors> next_item() override { return next_item_(); }

 private:
  StartEpoch start_epoch_;
  NextItem next_item_;
};

// Stacks items into a batch. Throws Error(ShapeMismatch) or Error(Dtype) naming the item and the field
// when items do not have the same fields, shapes and dtypes.
NamedTensors collate(const std::vector<NamedTensors>& items, const std::vector<int64_t>& indices);

// Throws Error(OutOfRange) naming the index when it is outside [0, size).
void check_index(int64_t index, int64_t size);

}  // namespace accel::data
