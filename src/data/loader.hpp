// The prepared data loader (Accelerate's DataLoaderShard and DataLoaderDispatcher): each rank yields
// exactly the batches it would yield in Python.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gradient_state.hpp"
#include "data/dataset.hpp"
#include "data/epoch.hpp"
#include "data/epoch_plan.hpp"
#include "data/loader_state.hpp"
#include "distributed/state.hpp"

namespace accel::data {

struct LoaderConfig {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  bool split_batches = false;
  bool even_batches = true;
  std::optional<bool> dispatch_batches;  // unset: Accelerate's default, dispatch exactly for iterable datasets
  // An iterable dataset that yields only this rank's share already (a stream reading its own shard): each
  // rank batches its own items, never sharded again nor dispatched (unset dispatch_batches means false).
  bool already_sharded = false;
  bool use_seedable_sampler = false;
  std::optional<uint64_t> data_seed;
  // Accelerate's device_placement: false leaves batches where the dataset made them (dispatched batches
  // under NCCL travel through the device and arrive there).
  bool device_placement = true;
  bool non_blocking = false;
  bool pin_memory = false;
  int64_t prefetch_threads = 0;  // 0: batches are read in next() itself
  int64_t prefetch_depth = 2;
  // A given list of batches of dataset indices (dynamic batch sizes), used instead of the sampler; then
  // shuffle and split_batches are refused and, as in Accelerate, gather_for_metrics keeps every row.
  std::optional<std::vector<Batch>> batches;
};

class Loader {
 public:
  // Throws Error(InvalidArgument) for impossible settings (split_batches with a batch size that is not a
  // multiple of the number of processes, shuffle on an iterable dataset, already_sharded on a map-style
  // dataset or with dispatch_batches).
  Loader(std::shared_ptr<distributed::State> state, std::shared_ptr<Dataset> dataset, LoaderConfig config);
  Loader(std::shared_ptr<distributed::State> state, std::shared_ptr<IterableDataset> dataset, LoaderConfig config);
  ~Loader();

  // The next batch of this epoch, on the state's device; nullopt once the epoch is over (the next call
  // starts the next epoch). Collective when dispatching, and at the start of an epoch when shuffling
  // without a seedable sampler: every rank must call it in step.
  std::optional<NamedTensors> next();

  // Batches this rank yields in a full epoch, less those to skip; -1 for an iterable dataset.
  int64_t length() const;
  bool end_of_dataloader() const { return progress_->end_of_dataloader; }
  int64_t remainder() const { return progress_->remainder; }
  int64_t epoch() const { return epoch_; }
  // Between epochs only: the number of the next epoch (seedable samplers and iterable datasets use it).
  void set_epoch(int64_t epoch);
  // Between epochs only: the next epoch skips its first n batches of this rank.
  void skip_first_batches(int64_t n);

  // Epoch, generator state at the start of the epoch and batches already yielded, as bytes; loading them
  // into a loader over the same data and settings makes it yield exactly the remaining batches. On another
  // number of processes too, when the global batch is the same (per-process batch_size x processes, or
  // batch_size with split_batches): a step is then the same samples whatever the processes, so the loader
  // resumes at the same step and every remaining sample comes once, in the uninterrupted run's order.
  std::string save_state() const;
  // Between epochs only. Throws Error(InvalidArgument) naming what is wrong with a corrupt or foreign state,
  // and for a state saved mid-epoch on another number of processes with another global batch (or by a
  // loader whose steps are not samples alike on any number of processes: explicit batches, a stream
  // already sharded).
  void load_state(const std::string& bytes);
  // The decoded state, or the errors load_state would throw for these bytes; changes nothing (a
  // checkpoint checks every loader's state before it restores any object).
  LoaderState checked_state(const std::string& bytes) const;

 private:
  Loader(std::shared_ptr<distributed::State> state, LoaderConfig config, bool iterable);
  std::unique_ptr<EpochBatches> start_epoch();
  std::vector<Batch> base_batches();
  // This rank's batches of a map-style epoch (nothing is sharded with one process).
  std::vector<Batch> my_batches();
  std::vector<Batch> shard_given_batches() const;
  // Samples a step takes over every process; -1 for explicit batches and streams already sharded, whose
  // steps change with the number of processes.
  int64_t global_batch_size() const;
  std::vector<int64_t> epoch_order();
  void place_on_device(NamedTensors& batch) const;
  void end_epoch();

  std::shared_ptr<distributed::State> state_;
  std::shared_ptr<Dataset> map_dataset_;
  std::shared_ptr<IterableDataset> iterable_dataset_;
  LoaderConfig config_;
  EpochKind kind_;
  // The state's rng_types: which generators every rank takes from rank 0 when an epoch starts.
  struct {
    bool generator = false;
    bool torch = false;
    bool cuda = false;
  } rng_;
  mutable at::Generator generator_;
  uint64_t seedable_seed_;  // with use_seedable_sampler, epoch e's order is seeded with this + e
  std::shared_ptr<LoaderProgress> progress_;
  std::unique_ptr<EpochBatches> epoch_batches_;
  int64_t epoch_ = 0;
  int64_t skip_ = 0;
  int64_t yielded_ = 0;  // batches of this epoch already passed, skipped ones included
  bool restored_generator_ = false;
  at::Tensor epoch_generator_state_;
};

}  // namespace accel::data
