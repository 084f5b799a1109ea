#include "data/epoch.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>

#include <cstring>

#include "core/error.hpp"
#include "distributed/collectives.hpp"

namespace accel::data {

void EpochBatches::skip(int64_t n) {
  bool last = false;
  for (int64_t i = 0; i < n && next(last); ++i) {
  }
}

MapShardEpoch::MapShardEpoch(std::shared_ptr<Dataset> dataset, std::vector<Batch> batches, int64_t remainder)
    : dataset_(std::move(dataset)), batches_(std::move(batches)), remainder_(remainder) {}

std::optional<NamedTensors> MapShardEpoch::next(bool& last) {
  if (position_ >= batches_.size()) return std::nullopt;
  auto batch = dataset_->fetch(batches_[position_++]);
  last = position_ == batches_.size();
  if (!last) dataset_->will_fetch(batches_[position_]);
  return batch;
}

void MapShardEpoch::skip(int64_t n) {
  position_ = std::min(batches_.size(), position_ + static_cast<size_t>(std::max<int64_t>(0, n)));
}

PrefetchingShardEpoch::PrefetchingShardEpoch(std::shared_ptr<Dataset> dataset, std::vector<Batch> batches,
                                             int64_t remainder, int64_t threads, int64_t depth)
    : dataset_(std::move(dataset)),
      batches_(std::move(batches)),
      remainder_(remainder),
      threads_(threads),
      depth_(static_cast<size_t>(std::max<int64_t>(1, depth))) {}

PrefetchingShardEpoch::~PrefetchingShardEpoch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& worker : workers_) worker.join();
}

// Workers start at the first batch asked for, so that skip can move the start without wasted reads.
void PrefetchingShardEpoch::start() {
  for (int64_t t = 0; t < threads_; ++t) workers_.emplace_back([this] { work(); });
}

void PrefetchingShardEpoch::work() {
  for (;;) {
    size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || next_to_fetch_ >= batches_.size() || next_to_fetch_ < position_ + depth_; });
      if (stopping_ || next_to_fetch_ >= batches_.size()) return;
      index = next_to_fetch_++;
    }
    std::optional<NamedTensors> batch;
    std::exception_ptr error;
    try {
      batch = dataset_->fetch(batches_[index]);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) {
        failed_[index] = error;
      } else {
        ready_[index] = std::move(*batch);
      }
    }
    changed_.notify_all();
  }
}

std::optional<NamedTensors> PrefetchingShardEpoch::next(bool& last) {
  if (workers_.empty()) start();
  std::unique_lock<std::mutex> lock(mutex_);
  if (position_ >= batches_.size()) return std::nullopt;
  const size_t index = position_;
  changed_.wait(lock, [&] { return ready_.count(index) != 0 || failed_.count(index) != 0; });
  if (auto failure = failed_.find(index); failure != failed_.end()) std::rethrow_exception(failure->second);
  NamedTensors batch = std::move(ready_.at(index));
  ready_.erase(index);
  ++position_;
  last = position_ == batches_.size();
  lock.unlock();
  changed_.notify_all();
  return batch;
}

void PrefetchingShardEpoch::skip(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  position_ = std::min(batches_.size(), position_ + static_cast<size_t>(std::max<int64_t>(0, n)));
  next_to_fetch_ = std::max(next_to_fetch_, position_);
}

NamedTensors take_rows(const NamedTensors& step, int64_t start, const NamedTensors& first_step,
                       const std::vector<int64_t>& positions) {
  const int64_t rows = step.front().second.size(0);
  std::vector<int64_t> own, padding;
  for (int64_t position : positions) {
    if (position >= start && position < start + rows) {
      own.push_back(position - start);
    } else {
      padding.push_back(position);
    }
  }
  NamedTensors out;
  for (size_t field = 0; field < step.size(); ++field) {
    const at::Tensor& tensor = step[field].second;
    auto part = at::index_select(tensor, 0, at::tensor(own, at::kLong).to(tensor.device()));
    if (!padding.empty()) {
      const at::Tensor& source = first_step[field].second;
      part = at::cat({part, at::index_select(source, 0, at::tensor(padding, at::kLong).to(source.device()))}, 0);
    }
    out.emplace_back(step[field].first, part);
  }
  return out;
}

IterableShardEpoch::IterableShardEpoch(std::shared_ptr<IterableDataset> dataset, IterableShardSpec spec)
    : dataset_(std::move(dataset)), shard_(spec), global_batch_size_(shard_.global_batch_size()) {}

NamedTensors IterableShardEpoch::materialize(const Batch& positions) const {
  std::vector<NamedTensors> items;
  for (int64_t position : positions) {
    const bool current = position >= global_start_ && position - global_start_ < static_cast<int64_t>(global_items_.size());
    items.push_back(current ? global_items_[static_cast<size_t>(position - global_start_)]
                            : first_items_.at(static_cast<size_t>(position)));
  }
  return collate(items, positions);
}

std::optional<NamedTensors> IterableShardEpoch::produce() {
  while (!stream_done_) {
    auto item = dataset_->next_item();
    if (!item) {
      stream_done_ = true;
      if (auto rest = shard_.finish(); rest && !rest->empty()) return materialize(*rest);
      return std::nullopt;
    }
    if (consumed_ < global_batch_size_) first_items_.push_back(*item);
    global_items_.push_back(std::move(*item));
    if (auto mine = shard_.push(consumed_++)) {
      auto batch = materialize(*mine);
      global_items_.clear();
      global_start_ = consumed_;
      return batch;
    }
  }
  return std::nullopt;
}

std::optional<NamedTensors> IterableShardEpoch::next(bool& last) {
  if (!started_) {
    pending_ = produce();
    started_ = true;
  }
  if (!pending_) return std::nullopt;
  auto current = std::move(pending_);
  pending_ = produce();
  last = !pending_;
  return current;
}

DispatchEpoch::DispatchEpoch(std::shared_ptr<distributed::State> state, ReadStep read_step, bool drop_last)
    : state_(std::move(state)),
      read_step_(std::move(read_step)),
      dispatcher_(state_->launch().world_size, state_->launch().rank, drop_last) {}

namespace {

// Structure of a step: field count, then per field its name, dtype and shape; empty means "no step".
std::string describe(const NamedTensors& step) {
  std::string out;
  auto put = [&](int64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(static_cast<int64_t>(step.size()));
  for (const auto& [name, tensor] : step) {
    put(static_cast<int64_t>(name.size()));
    out += name;
    put(static_cast<int64_t>(tensor.scalar_type()));
    put(tensor.dim());
    for (int64_t size : tensor.sizes()) put(size);
  }
  return out;
}

NamedTensors allocate(const std::string& description, const at::Device& device) {
  size_t offset = 0;
  auto take = [&]() {
    int64_t value = 0;
    std::memcpy(&value, description.data() + offset, sizeof value);
    offset += sizeof value;
    return value;
  };
  NamedTensors step;
  const int64_t fields = take();
  for (int64_t f = 0; f < fields; ++f) {
    const auto length = static_cast<size_t>(take());
    std::string name = description.substr(offset, length);
    offset += length;
    const auto type = static_cast<at::ScalarType>(take());
    std::vector<int64_t> shape(static_cast<size_t>(take()));
    for (auto& size : shape) size = take();
    step.emplace_back(std::move(name), at::empty(shape, at::TensorOptions(type).device(device)));
  }
  return step;
}

}  // namespace

std::optional<NamedTensors> DispatchEpoch::receive() {
  const bool root = state_->launch().rank == 0;
  std::optional<NamedTensors> step;
  std::string description;
  if (root) {
    step = read_step_();
    if (step) description = describe(*step);
  }
  distributed::broadcast_bytes(*state_, description, 0);
  if (description.empty()) return std::nullopt;
  const at::Device device(state_->backend() == "nccl" ? state_->device() : "cpu");
  if (!root) step = allocate(description, device);
  for (auto& field : *step) {
    field.second = field.second.to(device).contiguous();
    distributed::broadcast(*state_, field.second, 0);
  }
  return step;
}

std::optional<NamedTensors> DispatchEpoch::next(bool& last) {
  if (!started_) {
    pending_ = receive();
    started_ = true;
  }
  if (!pending_) return std::nullopt;
  NamedTensors current = std::move(*pending_);
  pending_ = receive();
  last = !pending_;
  const int64_t rows = current.front().second.size(0);
  if (first_step_.empty()) first_step_ = current;
  Batch positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) positions[static_cast<size_t>(i)] = step_start_ + i;
  auto mine = take_rows(current, step_start_, first_step_, dispatcher_.slice(positions, last));
  step_start_ += rows;
  return mine;
}

}  // namespace accel::data
