#include "data/dealing.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include <unistd.h>

#include "core/error.hpp"

namespace accel::data {

namespace {

void check_batch_size(int64_t batch_size) {
  require_argument(batch_size >= 1, "batch_size must be at least 1, got " + std::to_string(batch_size));
}

void check_processes(int64_t num_processes, int64_t process_index) {
  require_argument(num_processes >= 1, "num_processes must be at least 1, got " + std::to_string(num_processes));
  require_argument(process_index >= 0 && process_index < num_processes,
          "process_index must be in [0, " + std::to_string(num_processes) + "), got " + std::to_string(process_index));
}

// Without split_batches a global batch holds batch_size * P samples, which must be representable.
void check_global_batch(int64_t batch_size, int64_t num_processes) {
  require_argument(batch_size <= std::numeric_limits<int64_t>::max() / num_processes,
          "batch_size * num_processes (" + std::to_string(batch_size) + " * " + std::to_string(num_processes) +
              ") is too large");
}

// Upstream lets batch_size 1 through its own check, but then every rank gets a batch size of 0 (torch's
// DataLoader rejects it, the dispatcher yields empty batches), so any batch size not divisible is refused.
void check_split(int64_t batch_size, int64_t num_processes) {
  require_argument(batch_size % num_processes == 0, "to use split_batches, the batch size (" + std::to_string(batch_size) +
                                               ") needs to be a round multiple of the number of processes (" +
                                               std::to_string(num_processes) + ")");
}

// Python's batch[begin:end] for 0 <= begin <= end.
Batch slice_rows(const Batch& batch, int64_t begin, int64_t end) {
  const auto size = static_cast<int64_t>(batch.size());
  begin = std::min(begin, size);
  end = std::min(end, size);
  return Batch(batch.begin() + begin, batch.begin() + end);
}

// Python grows its padding source by doubling it (`data += data`) until it is long enough; reading position
// i of that repetition is reading source[i % size], without building it.
int64_t cyclic(const Batch& source, int64_t position) {
  return source[static_cast<size_t>(position % static_cast<int64_t>(source.size()))];
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

int64_t global_batch_size(int64_t batch_size, int64_t num_processes, bool split_batches) {
  return split_batches ? batch_size : batch_size * num_processes;
}

void check_dataset_len(int64_t dataset_len) {
  require_argument(dataset_len >= 0, "dataset length must not be negative, got " + std::to_string(dataset_len));
}

void check_skip(int64_t num_batches) {
  require_argument(num_batches >= 0, "the number of batches to skip must not be negative, got " + std::to_string(num_batches));
}

// ---- torch.utils.data.BatchSampler ----

int64_t num_batches(int64_t dataset_len, int64_t batch_size, bool drop_last) {
  check_dataset_len(dataset_len);
  check_batch_size(batch_size);
  return drop_last ? dataset_len / batch_size : ceil_div(dataset_len, batch_size);
}

std::vector<Batch> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last) {
  const auto total = static_cast<int64_t>(indices.size());
  const int64_t count = num_batches(total, batch_size, drop_last);
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    const int64_t begin = b * batch_size;
    const int64_t end = begin + std::min(batch_size, total - begin);
    batches.emplace_back(indices.begin() + begin, indices.begin() + end);
  }
  return batches;
}

std::vector<Batch> batches_of_sizes(const int64_t* indices, const size_t* batch_sizes, size_t num_batches) {
  // The batches copy every index: more than the machine's memory holds is refused before allocating (a
  // sanitizer's allocator aborts on such a request where the plain one throws).
  const auto pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  const size_t memory = pages > 0 && page_size > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page_size)
                                                   : std::numeric_limits<size_t>::max();
  const size_t max_indices = std::min(std::vector<int64_t>().max_size(), memory / sizeof(int64_t));
  size_t total = 0;
  for (size_t b = 0; b < num_batches; ++b) {
    const std::string where = " (at batch " + std::to_string(b) + ", of size " + std::to_string(batch_sizes[b]) + ")";
    if (__builtin_add_overflow(total, batch_sizes[b], &total)) {
      fail(Code::InvalidArgument, "the batch sizes add up to more than a size_t holds" + where);
    }
    if (total > max_indices) {
      fail(Code::OutOfMemory, "the batch sizes add up to more than " + std::to_string(max_indices) +
                                  " indices, more than this machine's memory holds" + where);
    }
  }
  if (total > 0 && indices == nullptr) fail(Code::NullArgument, "indices is NULL but the batch sizes add up to " +
                                                                    std::to_string(total));
  std::vector<Batch> batches;
  batches.reserve(num_batches);
  size_t offset = 0;
  for (size_t b = 0; b < num_batches; ++b) {
    batches.emplace_back(indices + offset, indices + offset + batch_sizes[b]);
    offset += batch_sizes[b];
  }
  return batches;
}

// ---- BatchSamplerShard ----

BatchSamplerShard::BatchSamplerShard(BaseSampler base, ShardSpec spec) : base_(base), spec_(spec) {
  check_processes(spec_.num_processes, spec_.process_index);
  if (base_.batch_size) {
    check_batch_size(*base_.batch_size);
    check_global_batch(*base_.batch_size, spec_.num_processes);
  }
  if (spec_.split_batches) {
    require_argument(base_.batch_size.has_value(),
            "BatchSamplerShard in split_batches mode needs the batch sampler's batch size, and this one has "
            "dynamic batch sizes");
    check_split(*base_.batch_size, spec_.num_processes);
  }
}

bool BatchSamplerShard::is_full(const Batch& batch) const {
  return !base_.batch_size || static_cast<int64_t>(batch.size()) == *base_.batch_size;
}

std::optional<Batch> BatchSamplerShard::push(const Batch& base_batch) {
  if (finished_) fail(Code::InvalidState, "BatchSamplerShard: push after finish");
  if (base_.batch_size) {
    require_argument(static_cast<int64_t>(base_batch.size()) <= *base_.batch_size,
            "a base batch of " + std::to_string(base_batch.size()) + " indices is longer than the batch size " +
                std::to_string(*base_.batch_size));
  }
  auto out = spec_.split_batches ? push_split(base_batch) : push_no_split(base_batch);
  last_ = base_batch;
  ++seen_;
  return out;
}

std::vector<Batch> BatchSamplerShard::finish() {
  if (finished_) fail(Code::InvalidState, "BatchSamplerShard: finish called twice");
  finished_ = true;
  return spec_.split_batches ? finish_split() : finish_no_split();
}

// Every full batch is cut into P contiguous slices; this rank takes slice `process_index`.
std::optional<Batch> BatchSamplerShard::push_split(const Batch& base_batch) {
  if (seen_ == 0) initial_ = base_batch;
  if (!is_full(base_batch)) return std::nullopt;
  const int64_t share = *base_.batch_size / spec_.num_processes;
  return slice_rows(base_batch, share * spec_.process_index, share * (spec_.process_index + 1));
}

// The short last batch: with even_batches it is padded from the first batch and cut like the others; without,
// this rank gets whatever part of it falls in its slice, if any.
std::vector<Batch> BatchSamplerShard::finish_split() {
  const int64_t batch_size = *base_.batch_size;
  const auto last_size = static_cast<int64_t>(last_.size());
  if (base_.drop_last || initial_.empty() || last_size >= batch_size) return {};
  const int64_t share = batch_size / spec_.num_processes;
  const int64_t begin = share * spec_.process_index;
  if (!spec_.even_batches) {
    if (last_size > begin) return {slice_rows(last_, begin, begin + share)};
    return {};
  }
  Batch padded;
  for (int64_t i = begin; i < begin + share; ++i) {
    padded.push_back(i < last_size ? last_[static_cast<size_t>(i)] : cyclic(initial_, i - last_size));
  }
  return {padded};
}

// Batches are dealt round-robin, but a rank yields its batch only once the round is complete with a full
// batch, so that no rank runs ahead of the others.
std::optional<Batch> BatchSamplerShard::push_no_split(const Batch& base_batch) {
  const int64_t processes = spec_.num_processes;
  if (!base_.drop_last && seen_ < processes) {
    if (base_.batch_size) {
      initial_.insert(initial_.end(), base_batch.begin(), base_batch.end());
    } else {
      initial_batches_.push_back(base_batch);
    }
  }
  if (seen_ % processes == spec_.process_index) to_yield_ = base_batch;
  if (seen_ % processes != processes - 1 || !is_full(base_batch)) return std::nullopt;
  std::optional<Batch> out = std::move(to_yield_);
  to_yield_.reset();
  return out;
}

std::vector<Batch> BatchSamplerShard::finish_no_split() {
  const bool has_initial = base_.batch_size ? !initial_.empty() : !initial_batches_.empty();
  if (base_.drop_last || !has_initial) return {};
  const bool pending = to_yield_ && !to_yield_->empty();
  if (!spec_.even_batches) {
    if (pending) return {*to_yield_};
    return {};
  }
  std::vector<Batch> out;
  if (pending && is_full(*to_yield_)) out.push_back(*to_yield_);
  for (auto& batch : pad_no_split()) out.push_back(std::move(batch));
  return out;
}

// Completes the short last batch, then adds full batches until the round is complete, taking indices from
// the first P batches in order (whole batches with dynamic batch sizes); returns this rank's ones.
std::vector<Batch> BatchSamplerShard::pad_no_split() {
  const int64_t processes = spec_.num_processes;
  std::vector<Batch> out;
  int64_t index = seen_ - 1;
  Batch batch = last_;
  if (is_full(batch)) {  // already dealt: padding starts with the next batch
    batch.clear();
    ++index;
  }
  int64_t cycle = 0;
  while (index % processes != 0 || !batch.empty()) {
    if (base_.batch_size) {
      const int64_t missing = *base_.batch_size - static_cast<int64_t>(batch.size());
      for (int64_t k = 0; k < missing; ++k) batch.push_back(cyclic(initial_, cycle + k));
      cycle += missing;
    } else {
      batch = initial_batches_[static_cast<size_t>(cycle % static_cast<int64_t>(initial_batches_.size()))];
      ++cycle;
    }
    if (index % processes == spec_.process_index) out.push_back(batch);
    batch.clear();
    ++index;
  }
  return out;
}

int64_t BatchSamplerShard::length(int64_t num_base_batches, int64_t last_batch_size) const {
  require_argument(num_base_batches >= 0, "the number of base batches must not be negative");
  if (num_base_batches == 0) return 0;
  if (base_.batch_size) {
    require_argument(last_batch_size >= 1 && last_batch_size <= *base_.batch_size,
            "the last base batch size must be in [1, " + std::to_string(*base_.batch_size) + "], got " +
                std::to_string(last_batch_size));
  }
  const bool last_full = !base_.batch_size || last_batch_size == *base_.batch_size;
  require_argument(last_full || !base_.drop_last, "a batch sampler with drop_last yields no short batch, got a last batch of " +
                                             std::to_string(last_batch_size));
  const int64_t rank = spec_.process_index;
  if (spec_.split_batches) {
    if (last_full || spec_.even_batches) return num_base_batches;
    const int64_t share = *base_.batch_size / spec_.num_processes;
    return num_base_batches - 1 + (last_batch_size > share * rank ? 1 : 0);
  }
  const int64_t rounds = num_base_batches / spec_.num_processes;
  const int64_t leftover = num_base_batches % spec_.num_processes;
  if (base_.drop_last) return rounds;  // only complete rounds are yielded
  if (spec_.even_batches || leftover == 0) return rounds + (leftover != 0 ? 1 : 0);
  return rounds + (rank < leftover ? 1 : 0);
}

std::vector<Batch> shard_batches(const std::vector<Batch>& base_batches, BaseSampler base, ShardSpec spec) {
  BatchSamplerShard shard(base, spec);
  std::vector<Batch> out;
  for (const auto& batch : base_batches) {
    if (auto yielded = shard.push(batch)) out.push_back(std::move(*yielded));
  }
  for (auto& batch : shard.finish()) out.push_back(std::move(batch));
  return out;
}

void validate_sharding(int64_t batch_size, int64_t num_processes, bool split_batches) {
  check_batch_size(batch_size);
  check_processes(num_processes, 0);
  check_global_batch(batch_size, num_processes);
  if (split_batches) check_split(batch_size, num_processes);
}

std::vector<Batch> shard_batches(const std::vector<Batch>& base_batches, int64_t batch_size, bool drop_last,
                                 int64_t num_processes, int64_t process_index, bool split_batches, bool even_batches) {
  return shard_batches(base_batches, BaseSampler{batch_size, drop_last},
                       ShardSpec{num_processes, process_index, split_batches, even_batches});
}

std::vector<Batch> map_shard_batches(std::vector<Batch> base_batches, int64_t batch_size, bool drop_last,
                                     int64_t num_processes, int64_t process_index, bool split_batches,
                                     bool even_batches) {
  if (num_processes == 1) return base_batches;
  return shard_batches(base_batches, batch_size, drop_last, num_processes, process_index, split_batches, even_batches);
}

int64_t sharded_length(int64_t dataset_len, int64_t batch_size, bool drop_last, int64_t num_processes,
                       int64_t process_index, bool split_batches, bool even_batches) {
  const BatchSamplerShard shard(BaseSampler{batch_size, drop_last},
                                ShardSpec{num_processes, process_index, split_batches, even_batches});
  const int64_t count = num_batches(dataset_len, batch_size, drop_last);
  const int64_t last_size = count == 0 ? 0 : std::min(batch_size, dataset_len - (count - 1) * batch_size);
  return shard.length(count, last_size);
}

int64_t shard_remainder(int64_t dataset_len, int64_t batch_size, int64_t num_processes, bool split_batches,
                        bool drop_last) {
  check_dataset_len(dataset_len);
  validate_sharding(batch_size, num_processes, split_batches);
  if (drop_last) return -1;  // upstream computes it only without drop_last; nothing is padded then anyway
  return dataset_len % global_batch_size(batch_size, num_processes, split_batches);
}

// ---- IterableDatasetShard ----

IterableDatasetShard::IterableDatasetShard(IterableShardSpec spec) : spec_(spec) {
  check_batch_size(spec_.batch_size);
  check_processes(spec_.num_processes, spec_.process_index);
  check_global_batch(spec_.batch_size, spec_.num_processes);
  if (spec_.split_batches) check_split(spec_.batch_size, spec_.num_processes);
}

int64_t IterableDatasetShard::global_batch_size() const {
  return data::global_batch_size(spec_.batch_size, spec_.num_processes, spec_.split_batches);
}

int64_t IterableDatasetShard::process_batch_size() const {
  return spec_.split_batches ? spec_.batch_size / spec_.num_processes : spec_.batch_size;
}

Batch IterableDatasetShard::slice_of(const Batch& global) const {
  const int64_t share = process_batch_size();
  const auto size = static_cast<int64_t>(global.size());
  Batch out;
  for (int64_t i = share * spec_.process_index; i < share * (spec_.process_index + 1); ++i) {
    out.push_back(i < size ? global[static_cast<size_t>(i)] : cyclic(*first_, i - size));
  }
  return out;
}

std::optional<Batch> IterableDatasetShard::push(int64_t item) {
  if (finished_) fail(Code::InvalidState, "IterableDatasetShard: push after finish");
  current_.push_back(item);
  if (static_cast<int64_t>(current_.size()) < global_batch_size()) return std::nullopt;
  if (!first_) first_ = current_;
  Batch out = slice_of(current_);
  current_.clear();
  return out;
}

// The short last global batch is padded by repeating the first global batch (itself, when it is the first).
std::optional<Batch> IterableDatasetShard::finish() {
  if (finished_) fail(Code::InvalidState, "IterableDatasetShard: finish called twice");
  finished_ = true;
  if (spec_.drop_last || current_.empty()) return std::nullopt;
  if (!first_) first_ = current_;
  return slice_of(current_);
}

int64_t IterableDatasetShard::length(int64_t dataset_len) const {
  check_dataset_len(dataset_len);
  return spec_.drop_last ? dataset_len / global_batch_size() : ceil_div(dataset_len, global_batch_size());
}

std::vector<Batch> iterable_shard_batches(const std::vector<int64_t>& items, IterableShardSpec spec) {
  IterableDatasetShard shard(spec);
  std::vector<Batch> out;
  for (const int64_t item : items) {
    if (auto yielded = shard.push(item)) out.push_back(std::move(*yielded));
  }
  if (auto yielded = shard.finish()) out.push_back(std::move(*yielded));
  return out;
}

// ---- DataLoaderDispatcher ----

StepGrouper::StepGrouper(int64_t num_processes, bool split_batches, bool drop_last)
    : per_step_(split_batches ? 1 : num_processes), drop_last_(drop_last) {
  check_processes(num_processes, 0);
}

std::optional<Batch> StepGrouper::push(const Batch& base_batch) {
  joined_.insert(joined_.end(), base_batch.begin(), base_batch.end());
  if (++grouped_ < per_step_) return std::nullopt;
  grouped_ = 0;
  return std::exchange(joined_, Batch{});
}

std::optional<Batch> StepGrouper::finish() {
  if (grouped_ == 0 || drop_last_) return std::nullopt;
  grouped_ = 0;
  return std::exchange(joined_, Batch{});
}

std::vector<Batch> dispatch_steps(const std::vector<Batch>& base_batches, int64_t num_processes, bool split_batches,
                                  bool drop_last) {
  StepGrouper grouper(num_processes, split_batches, drop_last);
  std::vector<Batch> steps;
  for (const Batch& base_batch : base_batches) {
    if (auto step = grouper.push(base_batch)) steps.push_back(std::move(*step));
  }
  if (auto step = grouper.finish()) steps.push_back(std::move(*step));
  return steps;
}

int64_t dispatch_len(int64_t num_base_batches, int64_t num_processes, bool split_batches, bool drop_last) {
  require_argument(num_base_batches >= 0, "the number of base batches must not be negative");
  check_processes(num_processes, 0);
  if (split_batches) return num_base_batches;
  return drop_last ? num_base_batches / num_processes : ceil_div(num_base_batches, num_processes);
}

BatchDispatcher::BatchDispatcher(int64_t num_processes, int64_t process_index, bool drop_last)
    : num_processes_(num_processes), process_index_(process_index), drop_last_(drop_last) {
  check_processes(num_processes_, process_index_);
}

Batch BatchDispatcher::slice(const Batch& step, bool last) {
  if (!drop_last_ && !first_rows_) first_rows_ = slice_rows(step, 0, num_processes_);
  const auto observed = static_cast<int64_t>(step.size());
  int64_t per_rank = observed / num_processes_;
  const bool pad = !drop_last_ && last && observed % num_processes_ != 0;
  if (pad) ++per_rank;  // the step is extended by the first P rows of the first step
  const int64_t available = observed + (pad ? static_cast<int64_t>(first_rows_->size()) : 0);
  Batch out;
  for (int64_t i = per_rank * process_index_; i < std::min(available, per_rank * (process_index_ + 1)); ++i) {
    out.push_back(i < observed ? step[static_cast<size_t>(i)] : (*first_rows_)[static_cast<size_t>(i - observed)]);
  }
  if (last) remainder_ = observed;
  return out;
}

std::vector<Batch> dispatch_batches(const std::vector<Batch>& base_batches, DispatchSpec spec) {
  BatchDispatcher dispatcher(spec.num_processes, spec.process_index, spec.drop_last);
  const auto steps = dispatch_steps(base_batches, spec.num_processes, spec.split_batches, spec.drop_last);
  std::vector<Batch> out;
  for (size_t s = 0; s < steps.size(); ++s) out.push_back(dispatcher.slice(steps[s], s + 1 == steps.size()));
  return out;
}

int64_t dispatch_remainder(const std::vector<Batch>& base_batches, int64_t num_processes, bool split_batches,
                           bool drop_last) {
  const int64_t steps =
      dispatch_len(static_cast<int64_t>(base_batches.size()), num_processes, split_batches, drop_last);
  if (steps == 0) return -1;
  const int64_t per_step = split_batches ? 1 : num_processes;
  const int64_t begin = (steps - 1) * per_step;
  const int64_t end = std::min(static_cast<int64_t>(base_batches.size()), begin + per_step);
  int64_t rows = 0;
  for (int64_t b = begin; b < end; ++b) rows += static_cast<int64_t>(base_batches[static_cast<size_t>(b)].size());
  return rows;
}

// ---- skip_first_batches ----

std::vector<Batch> skip_first_batches(std::vector<Batch> batches, int64_t num_batches) {
  check_skip(num_batches);
  const auto skipped =
      static_cast<std::ptrdiff_t>(std::min<int64_t>(num_batches, static_cast<int64_t>(batches.size())));
  batches.erase(batches.begin(), batches.begin() + skipped);
  return batches;
}

}  // namespace accel::data
