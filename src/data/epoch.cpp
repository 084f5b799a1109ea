#include "data/epoch.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>

#include <c10/util/Exception.h>
#include <cxxabi.h>

#include <cstring>
#include <new>
#include <utility>

#include "core/error.hpp"
#include "distributed/collectives/collectives.hpp"

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
    } catch (const abi::__forced_unwind&) {
      // The thread is being ended (pthread_exit: Python ends threads this way when a callback runs into
      // its exit); the unwinding must go on, or the process aborts.
      throw;
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
  return look_ahead_.next(last, [&] { return produce(); });
}

std::optional<NamedTensors> StreamEpoch::next(bool& last) {
  return look_ahead_.next(last, [&] { return read_batch_(); });
}

DispatchEpoch::DispatchEpoch(std::shared_ptr<distributed::State> state, ReadStep read_step, bool drop_last)
    : state_(std::move(state)),
      read_step_(std::move(read_step)),
      dispatcher_(state_->launch().world_size, state_->launch().rank, drop_last) {}

namespace {

// The first byte of what rank 0 sends before each step. A failed read is sent too, so that every rank
// stops with rank 0's error at once instead of waiting for tensors that never come.
constexpr char kStep = 'S';     // the step's structure follows, then its tensors
constexpr char kEnd = 'E';      // the epoch is over
constexpr char kFailed = 'F';   // reading failed: the error's code and message follow

void put(std::string& out, int64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }

int64_t take(const std::string& in, size_t& offset) {
  int64_t value = 0;
  std::memcpy(&value, in.data() + offset, sizeof value);
  offset += sizeof value;
  return value;
}

// The error's code and message, as the C API's guard would report them.
std::pair<Code, std::string> code_and_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  } catch (const c10::Error& e) {
    return {Code::Torch, e.what_without_backtrace()};
  } catch (const std::bad_alloc&) {
    return {Code::OutOfMemory, "out of memory"};
  } catch (const std::exception& e) {
    return {Code::Internal, e.what()};
  } catch (...) {
    return {Code::Internal, "unknown exception"};
  }
}

std::string describe_failure(const std::exception_ptr& error) {
  const auto [code, message] = code_and_message(error);
  std::string out(1, kFailed);
  put(out, static_cast<int64_t>(code));
  return out + message;
}

[[noreturn]] void fail_like_rank_0(const std::string& header) {
  size_t offset = 1;
  const auto code = static_cast<Code>(take(header, offset));
  fail(code, "rank 0 could not read the batch it dispatches: " + header.substr(offset));
}

// Structure of a step: field count, then per field its name, dtype and shape.
std::string describe(const NamedTensors& step) {
  std::string out(1, kStep);
  auto put = [&](int64_t value) { accel::data::put(out, value); };
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
  size_t offset = 1;
  auto take = [&]() { return accel::data::take(description, offset); };
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
    std::exception_ptr read_error;
    try {
      step = read_step_();
      description = step ? describe(*step) : std::string(1, kEnd);
    } catch (...) {
      read_error = std::current_exception();
    }
    if (read_error) {
      // Rank 0's own error is the one to report; if telling the others fails too, the group says so later.
      try {
        std::string failure = describe_failure(read_error);
        distributed::broadcast_bytes(*state_, failure, 0);
      } catch (const std::exception&) {
      }
      std::rethrow_exception(read_error);
    }
  }
  distributed::broadcast_bytes(*state_, description, 0);
  if (description.at(0) == kFailed) fail_like_rank_0(description);
  if (description.at(0) == kEnd) return std::nullopt;
  const at::Device device(state_->backend() == "nccl" ? state_->device() : "cpu");
  if (!root) step = allocate(description, device);
  for (auto& field : *step) {
    field.second = field.second.to(device).contiguous();
    distributed::broadcast(*state_, field.second, 0);
  }
  return step;
}

std::optional<NamedTensors> DispatchEpoch::next(bool& last) {
  auto received = look_ahead_.next(last, [&] { return receive(); });
  if (!received) return std::nullopt;
  NamedTensors current = std::move(*received);
  const int64_t rows = current.front().second.size(0);
  if (first_step_.empty()) first_step_ = current;
  Batch positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) positions[static_cast<size_t>(i)] = step_start_ + i;
  auto mine = take_rows(current, step_start_, first_step_, dispatcher_.slice(positions, last));
  step_start_ += rows;
  return mine;
}

}  // namespace accel::data
