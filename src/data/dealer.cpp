#include "data/dealer.hpp"

#include "core/error.hpp"

namespace accel::data {

std::optional<Batch> Dealer::next() {
  if (ready_.empty()) return std::nullopt;
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  return batch;
}

namespace {

class ShardDealer final : public Dealer {
 public:
  ShardDealer(BaseSampler base, ShardSpec spec) : shard_(base, spec) {}
  void push(const Batch& batch) override { queue(shard_.push(batch)); }
  void finish() override {
    for (auto& batch : shard_.finish()) queue(std::move(batch));
  }
  int64_t length(int64_t base_len, int64_t last_batch_size) const override {
    return shard_.length(base_len, last_batch_size);
  }

 private:
  BatchSamplerShard shard_;
};

class IterableDealer final : public Dealer {
 public:
  explicit IterableDealer(IterableShardSpec spec) : shard_(spec) {}
  void push(const Batch& positions) override {
    for (const int64_t position : positions) queue(shard_.push(position));
  }
  void finish() override { queue(shard_.finish()); }
  int64_t length(int64_t base_len, int64_t) const override { return shard_.length(base_len); }

 private:
  IterableDatasetShard shard_;
};

// Whether a step is the last (and so padded) is known only once the next one starts or the epoch ends: the
// dealer keeps the latest whole step back until then.
class DispatchDealer final : public Dealer {
 public:
  explicit DispatchDealer(DispatchSpec spec)
      : spec_(spec), grouper_(spec.num_processes, spec.split_batches, spec.drop_last),
        dispatcher_(spec.num_processes, spec.process_index, spec.drop_last) {}

  void push(const Batch& batch) override {
    if (finished_) fail(Code::InvalidState, "dispatch dealer: push after finish");
    hold(grouper_.push(batch));
  }

  void finish() override {
    if (finished_) fail(Code::InvalidState, "dispatch dealer: finish called twice");
    finished_ = true;
    hold(grouper_.finish());
    if (held_) queue(dispatcher_.slice(*held_, /*last=*/true));
    held_.reset();
  }

  int64_t length(int64_t base_len, int64_t) const override {
    return dispatch_len(base_len, spec_.num_processes, spec_.split_batches, spec_.drop_last);
  }
  int64_t remainder() const override { return dispatcher_.remainder(); }

 private:
  // A new step: the one held before it is not the last, and is sliced.
  void hold(std::optional<Batch> step) {
    if (!step) return;
    if (held_) queue(dispatcher_.slice(*held_, /*last=*/false));
    held_ = std::move(step);
  }

  DispatchSpec spec_;
  StepGrouper grouper_;
  BatchDispatcher dispatcher_;
  std::optional<Batch> held_;    // the latest whole step, not yet known not to be the last
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<Dealer> make_shard_dealer(BaseSampler base, ShardSpec spec) {
  return std::make_unique<ShardDealer>(base, spec);
}

std::unique_ptr<Dealer> make_iterable_dealer(IterableShardSpec spec) { return std::make_unique<IterableDealer>(spec); }

std::unique_ptr<Dealer> make_dispatch_dealer(DispatchSpec spec) { return std::make_unique<DispatchDealer>(spec); }

}  // namespace accel::data
