// A rank's batches dealt as they come, behind one interface: what a loader the library does not drive (the
// Python package's samplers over a user's own batch sampler or stream) deals through, so that Accelerate's
// rules have one owner (dealing.hpp) for the library's loader, `accel shard-plan` and the bindings alike.
// Fed base batches (or stream positions) one push at a time, it queues the batches this rank yields; next()
// hands them out in order. Not thread-safe: one dealer per iteration.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "data/dealing.hpp"

namespace accel::data {

class Dealer {
 public:
  virtual ~Dealer() = default;

  // The next base batch: a batch sampler's batch (shard, dispatch), or the positions of the next items of
  // a stream (iterable shard; any number of them). Error(InvalidState) after finish().
  virtual void push(const Batch& batch) = 0;
  // After the last push: queues what this rank yields at the end (leftovers, padding, the last step).
  // Error(InvalidState) when called twice.
  virtual void finish() = 0;
  // The next batch this rank yields, in order; none until a push or finish() has queued one.
  std::optional<Batch> next();
  // How many batches this rank yields for `base_len` base batches (stream items, for an iterable shard), the
  // last of `last_batch_size` indices (read only by a shard of a fixed batch size).
  virtual int64_t length(int64_t base_len, int64_t last_batch_size) const = 0;
  // gather_for_metrics' remainder once finish() has run: the real rows of the last dispatched step; -1 for
  // the other kinds, and for a dispatch that yielded nothing.
  virtual int64_t remainder() const { return -1; }

 protected:
  void queue(Batch batch) { ready_.push_back(std::move(batch)); }
  void queue(std::optional<Batch> batch) {
    if (batch) queue(std::move(*batch));
  }

 private:
  std::deque<Batch> ready_;
};

// BatchSamplerShard's batches (DataLoaderShard over a map-style dataset).
std::unique_ptr<Dealer> make_shard_dealer(BaseSampler base, ShardSpec spec);
// IterableDatasetShard's: each yielded batch is this rank's slice of a global batch, as stream positions.
std::unique_ptr<Dealer> make_iterable_dealer(IterableShardSpec spec);
// DataLoaderDispatcher's: this rank's rows of each step rank 0 reads.
std::unique_ptr<Dealer> make_dispatch_dealer(DispatchSpec spec);

}  // namespace accel::data
