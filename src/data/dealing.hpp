// Which dataset indices each rank gets, batch by batch: exact ports of Accelerate's BatchSamplerShard,
// IterableDatasetShard, DataLoaderDispatcher slicing and skip_first_batches (accelerate-semantics.md 1.3-1.11),
// and the remainder gather_for_metrics trims to (2.5). Pure C++: a loader maps the indices to samples.
//
// Each sharder is a small state machine fed one base batch (or one item) at a time, as the Python generators
// are, so a loader can drive it lazily over a huge dataset; the eager functions run a whole epoch through it.
// Lengths are closed forms, so a loader can report them without iterating; unlike Python's __len__ they are
// always the number of batches this rank really yields (accel's documented fix).
// Settings that cannot work throw Error(Code::InvalidArgument).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace accel::data {

using Batch = std::vector<int64_t>;

// Samples a step takes over every process: batch_size with split_batches (it is the global batch), else
// batch_size on each of num_processes.
int64_t global_batch_size(int64_t batch_size, int64_t num_processes, bool split_batches);

// Error(InvalidArgument) for a negative dataset length, or a negative number of batches to skip.
void check_dataset_len(int64_t dataset_len);
void check_skip(int64_t num_batches);

// ---- torch.utils.data.BatchSampler ----

// Batches of `batch_size` consecutive indices; the last one is shorter, or dropped with drop_last.
std::vector<Batch> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);
// How many batches make_batches yields for `dataset_len` indices.
int64_t num_batches(int64_t dataset_len, int64_t batch_size, bool drop_last);

// A list of batches given as one array of indices and the size of each batch, in order (how the C API
// takes dynamic batch sizes). Refuses sizes that add up past what an index array can hold
// (Error(InvalidArgument)), before any pointer is formed from them, and NULL indices with a non-zero
// total (Error(NullArgument)).
std::vector<Batch> batches_of_sizes(const int64_t* indices, const size_t* batch_sizes, size_t num_batches);

// ---- BatchSamplerShard (map-style datasets, DataLoaderShard) ----

struct ShardSpec {
  int64_t num_processes = 1;
  int64_t process_index = 0;
  bool split_batches = false;
  bool even_batches = true;
};

// What BatchSamplerShard reads from the batch sampler it wraps.
struct BaseSampler {
  std::optional<int64_t> batch_size;  // none: dynamic batch sizes (a plain list of batches); not with split
  bool drop_last = false;
};

class BatchSamplerShard {
 public:
  BatchSamplerShard(BaseSampler base, ShardSpec spec);

  // Feeds the next base batch; returns the batch this rank yields at this point, if any.
  std::optional<Batch> push(const Batch& base_batch);
  // Called once after the last base batch: the batches this rank yields after the loop (leftovers, padding).
  std::vector<Batch> finish();

  // Batches this rank yields for a base sampler shaped like torch's BatchSampler (every batch full but
  // maybe the last, of `last_batch_size`; ignored with dynamic batch sizes). Python's __len__ says
  // `num_base_batches` in split mode even when even_batches is off and this rank yields one fewer.
  int64_t length(int64_t num_base_batches, int64_t last_batch_size) const;

 private:
  std::optional<Batch> push_split(const Batch& base_batch);
  std::optional<Batch> push_no_split(const Batch& base_batch);
  std::vector<Batch> finish_split();
  std::vector<Batch> finish_no_split();
  std::vector<Batch> pad_no_split();
  bool is_full(const Batch& batch) const;

  BaseSampler base_;
  ShardSpec spec_;
  int64_t seen_ = 0;                    // base batches pushed so far
  Batch last_;                          // the last base batch pushed (Python's `batch` after the loop)
  Batch initial_;                       // split: the first base batch; no split: the first P batches flattened
  std::vector<Batch> initial_batches_;  // no split with dynamic batch sizes: the first P batches
  std::optional<Batch> to_yield_;       // no split: this rank's batch of the round in progress
  bool finished_ = false;
};

// This rank's batches for a whole base epoch.
std::vector<Batch> shard_batches(const std::vector<Batch>& base_batches, BaseSampler base, ShardSpec spec);

// The common case, torch's BatchSampler over a map-style dataset: base batches from make_batches.
void validate_sharding(int64_t batch_size, int64_t num_processes, bool split_batches);
std::vector<Batch> shard_batches(const std::vector<Batch>& base_batches, int64_t batch_size, bool drop_last,
                                 int64_t num_processes, int64_t process_index, bool split_batches, bool even_batches);
// A rank's batches of a map-style epoch read by every rank (DataLoaderShard): BatchSamplerShard's, but one
// process shards nothing (Accelerate wraps no BatchSamplerShard then), so its last batch is not padded.
// The loader and plan_epoch both deal through this.
std::vector<Batch> map_shard_batches(std::vector<Batch> base_batches, int64_t batch_size, bool drop_last,
                                     int64_t num_processes, int64_t process_index, bool split_batches,
                                     bool even_batches);
int64_t sharded_length(int64_t dataset_len, int64_t batch_size, bool drop_last, int64_t num_processes,
                       int64_t process_index, bool split_batches, bool even_batches);
// gather_for_metrics' remainder for a DataLoaderShard: dataset_len % total batch size, -1 with drop_last.
int64_t shard_remainder(int64_t dataset_len, int64_t batch_size, int64_t num_processes, bool split_batches,
                        bool drop_last);

// ---- IterableDatasetShard (iterable datasets, not dispatched) ----
// Items are identified by their position in the stream. Every rank reads the whole stream, cuts it into
// global batches and keeps its contiguous slice of each; the last global batch is padded from the first.
// even_batches plays no part. The rank's loader then batches its items by process_batch_size(), so each
// of its batches is exactly one slice.

struct IterableShardSpec {
  int64_t batch_size = 1;  // the original loader's batch size
  bool drop_last = false;
  int64_t num_processes = 1;
  int64_t process_index = 0;
  bool split_batches = false;
};

class IterableDatasetShard {
 public:
  explicit IterableDatasetShard(IterableShardSpec spec);

  int64_t global_batch_size() const;   // batch_size with split, batch_size * P without
  int64_t process_batch_size() const;  // batch_size / P with split, batch_size without
  bool drop_last() const { return spec_.drop_last; }

  // Feeds the next item; returns this rank's batch when the item completes a global batch.
  std::optional<Batch> push(int64_t item);
  // Called once after the last item: this rank's slice of the padded last global batch, if any.
  std::optional<Batch> finish();

  // Batches this rank yields for a stream of `dataset_len` items.
  int64_t length(int64_t dataset_len) const;

 private:
  Batch slice_of(const Batch& global) const;

  IterableShardSpec spec_;
  Batch current_;
  std::optional<Batch> first_;  // the first global batch, the padding source
  bool finished_ = false;
};

// This rank's batches for the stream `items`.
std::vector<Batch> iterable_shard_batches(const std::vector<int64_t>& items, IterableShardSpec spec);

// ---- DataLoaderDispatcher ----
// Rank 0 reads the base loader (batch size B): one base batch a step with split_batches, P of them
// concatenated without (a trailing partial group is a step unless drop_last). Every rank receives the step
// and keeps rows [r*per, (r+1)*per), per = rows / P; the last step, when its row count is not a multiple of
// P and not drop_last, is padded with the first P rows of the first step and per grows by one. even_batches
// plays no part (Accelerate ignores it here too). An empty base loader gives no step (upstream raises
// "Batch does not contain any data"), as an empty DataLoaderShard does.

struct DispatchSpec {
  int64_t num_processes = 1;
  int64_t process_index = 0;
  bool split_batches = false;
  bool drop_last = false;  // the base loader's drop_last
};

// Joins base batches into the global batches rank 0 broadcasts, one a step, as they come: num_processes
// base batches a step (one with split_batches).
class StepGrouper {
 public:
  StepGrouper(int64_t num_processes, bool split_batches, bool drop_last);

  // The step this base batch completes, if it completes one.
  std::optional<Batch> push(const Batch& base_batch);
  // After the last base batch: the partial group a base loader that ran out mid-step leaves, kept without
  // drop_last as upstream keeps it; nothing otherwise.
  std::optional<Batch> finish();

 private:
  int64_t per_step_;
  bool drop_last_;
  Batch joined_;        // the base batches of the step in the making, joined
  int64_t grouped_ = 0;  // how many
};

// The global batches rank 0 broadcasts, one a step (StepGrouper over them all).
std::vector<Batch> dispatch_steps(const std::vector<Batch>& base_batches, int64_t num_processes, bool split_batches,
                                  bool drop_last);
// How many steps that is for `num_base_batches` base batches.
int64_t dispatch_len(int64_t num_base_batches, int64_t num_processes, bool split_batches, bool drop_last);

// One rank's side: slices each step it receives.
class BatchDispatcher {
 public:
  BatchDispatcher(int64_t num_processes, int64_t process_index, bool drop_last);

  // `step` is the whole global batch; `last` says that no step follows it.
  Batch slice(const Batch& step, bool last);
  // gather_for_metrics' remainder: the real row count of the last step; -1 until it has been sliced.
  int64_t remainder() const { return remainder_; }

 private:
  int64_t num_processes_;
  int64_t process_index_;
  bool drop_last_;
  std::optional<Batch> first_rows_;  // the first P rows of the first step, the padding source
  int64_t remainder_ = -1;
};

// This rank's batches for a whole base epoch.
std::vector<Batch> dispatch_batches(const std::vector<Batch>& base_batches, DispatchSpec spec);
// The real row count of the last step (-1 when there is no step).
int64_t dispatch_remainder(const std::vector<Batch>& base_batches, int64_t num_processes, bool split_batches,
                           bool drop_last);

// ---- skip_first_batches ----
// Drops the first `num_batches` batches of a list (all of them when it has fewer): a rank's batches, in every
// mode (Accelerate dropped base batches, before grouping into steps, for a map-style dispatcher).
std::vector<Batch> skip_first_batches(std::vector<Batch> batches, int64_t num_batches);

}  // namespace accel::data
