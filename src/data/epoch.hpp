// One epoch of one rank's batches, in the three ways Accelerate makes them: a map-style dataset sharded
// by batch sampler (DataLoaderShard), an iterable dataset sharded by IterableDatasetShard, and batches
// read on rank 0 and dispatched (DataLoaderDispatcher).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataset.hpp"
#include "data/dealing.hpp"
#include "distributed/state.hpp"

namespace accel::data {

// Accelerate's one-batch look-ahead: the next batch is read before the current one is handed out, so
// whether it is the last is known while it is in use.
class LookAhead {
 public:
  template <class Read>
  std::optional<NamedTensors> next(bool& last, Read&& read) {
    if (!started_) {
      pending_ = read();
      started_ = true;
    }
    if (!pending_) return std::nullopt;
    auto current = std::move(pending_);
    pending_ = read();
    last = !pending_;
    return current;
  }

 private:
  std::optional<NamedTensors> pending_;
  bool started_ = false;
};

class EpochBatches {
 public:
  virtual ~EpochBatches() = default;
  // This rank's next batch, with `last` telling whether another follows (a one-batch look-ahead where
  // needed); nullopt once the epoch is over.
  virtual std::optional<NamedTensors> next(bool& last) = 0;
  // Passes over the next n batches; sources that can seek do so without reading them.
  virtual void skip(int64_t n);
  // gather_for_metrics' remainder; for dispatched batches known once the last batch is out.
  virtual int64_t remainder() const = 0;
};

// This rank's share of a map-style dataset, batch lists computed up front.
class MapShardEpoch final : public EpochBatches {
 public:
  MapShardEpoch(std::shared_ptr<Dataset> dataset, std::vector<Batch> batches, int64_t remainder);
  std::optional<NamedTensors> next(bool& last) override;
  void skip(int64_t n) override;
  int64_t remainder() const override { return remainder_; }

 private:
  std::shared_ptr<Dataset> dataset_;
  std::vector<Batch> batches_;
  size_t position_ = 0;
  int64_t remainder_;
};

// MapShardEpoch's batches fetched ahead by worker threads, at most `depth` batches beyond the one in use,
// and handed out in order. The dataset's fetch (a C callback included) then runs on those threads.
class PrefetchingShardEpoch final : public EpochBatches {
 public:
  PrefetchingShardEpoch(std::shared_ptr<Dataset> dataset, std::vector<Batch> batches, int64_t remainder,
                        int64_t threads, int64_t depth);
  ~PrefetchingShardEpoch() override;
  std::optional<NamedTensors> next(bool& last) override;
  void skip(int64_t n) override;
  int64_t remainder() const override { return remainder_; }

 private:
  void work();
  void start();

  std::shared_ptr<Dataset> dataset_;
  std::vector<Batch> batches_;
  int64_t remainder_;
  int64_t threads_;
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_to_fetch_ = 0;  // under mutex_, like everything below
  size_t position_ = 0;
  std::map<size_t, NamedTensors> ready_;
  std::map<size_t, std::exception_ptr> failed_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Every rank reads the whole stream and keeps its slice of each global batch.
class IterableShardEpoch final : public EpochBatches {
 public:
  IterableShardEpoch(std::shared_ptr<IterableDataset> dataset, IterableShardSpec spec);
  std::optional<NamedTensors> next(bool& last) override;
  // Accelerate keeps the duplicates of an iterable shard (its length is per rank, a multiple of the rank's
  // batch size); with drop_last it sets no remainder (-1).
  int64_t remainder() const override { return shard_.drop_last() ? -1 : 0; }

 private:
  std::optional<NamedTensors> produce();
  NamedTensors materialize(const Batch& positions) const;

  std::shared_ptr<IterableDataset> dataset_;
  IterableDatasetShard shard_;
  int64_t global_batch_size_;
  int64_t consumed_ = 0;                    // items read from the stream
  int64_t global_start_ = 0;                // stream position of the global batch in progress
  std::vector<NamedTensors> global_items_;  // its items so far
  std::vector<NamedTensors> first_items_;   // the first global batch: the padding source
  bool stream_done_ = false;
  LookAhead look_ahead_;
};

// Rank 0 produces each global step; structure, stop flag and tensors are broadcast; every rank keeps
// its rows. `read_step` is called on rank 0 only.
class DispatchEpoch final : public EpochBatches {
 public:
  using ReadStep = std::function<std::optional<NamedTensors>()>;
  DispatchEpoch(std::shared_ptr<distributed::State> state, ReadStep read_step, bool drop_last);
  std::optional<NamedTensors> next(bool& last) override;
  int64_t remainder() const override { return dispatcher_.remainder(); }

 private:
  std::optional<NamedTensors> receive();

  std::shared_ptr<distributed::State> state_;
  ReadStep read_step_;
  BatchDispatcher dispatcher_;
  int64_t step_start_ = 0;  // stream position of the step's first row
  NamedTensors first_step_;
  LookAhead look_ahead_;
};

// Batches one rank reads alone, in the order they come: an iterable dataset already split per process.
// Nothing is exchanged or padded, so gather_for_metrics keeps every row (remainder -1).
class StreamEpoch final : public EpochBatches {
 public:
  using ReadBatch = std::function<std::optional<NamedTensors>()>;
  explicit StreamEpoch(ReadBatch read_batch) : read_batch_(std::move(read_batch)) {}
  std::optional<NamedTensors> next(bool& last) override;
  int64_t remainder() const override { return -1; }

 private:
  ReadBatch read_batch_;
  LookAhead look_ahead_;
};

// Rows `positions` of a step that starts at stream position `start`; positions before it are rows of the
// first step (Accelerate pads the last global batch with the first rows of the epoch).
NamedTensors take_rows(const NamedTensors& step, int64_t start, const NamedTensors& first_step,
                       const std::vector<int64_t>& positions);

}  // namespace accel::data
