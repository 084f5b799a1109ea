// The prepared data loader (Accelerate's DataLoaderShard): each rank yields exactly the batches it would
// yield in Python, from a dataset, a sampler order that is the same on every rank, and batch sharding.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gradient_state.hpp"
#include "data/dataset.hpp"
#include "dist/state.hpp"

namespace accel::data {

struct LoaderConfig {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  bool split_batches = false;
  bool even_batches = true;
  bool use_seedable_sampler = false;
  std::optional<uint64_t> data_seed;
  bool non_blocking = false;
};

// Reads the data keys of resolved options (batch_size, shuffle, drop_last, split_batches, even_batches,
// use_seedable_sampler, data_seed (-1 = none), non_blocking).
LoaderConfig loader_config(const ResolvedOptions& options);

class Loader {
 public:
  // Throws Error(InvalidArgument) for impossible settings (split_batches with a batch size that is not a
  // multiple of the number of processes).
  Loader(std::shared_ptr<dist::State> state, std::shared_ptr<Dataset> dataset, LoaderConfig config);
  ~Loader();

  // The next batch of this epoch, on the state's device; nullopt once the epoch is over (the next call
  // starts the next epoch). Starting an epoch is collective when shuffling without a seedable sampler
  // (rank 0's generator state is broadcast), so every rank must call next in step.
  std::optional<NamedTensors> next();

  // Batches this rank yields in a full epoch (after skip_first_batches, in the epoch it applies to).
  int64_t length() const;
  bool end_of_dataloader() const { return progress_->end_of_dataloader; }
  int64_t remainder() const { return progress_->remainder; }
  int64_t epoch() const { return epoch_; }
  // Only between epochs: sets the epoch the next one starts as (seedable samplers derive their seed from it).
  void set_epoch(int64_t epoch);
  // The next epoch started skips its first n batches (Accelerate's skip_first_batches).
  void skip_first_batches(int64_t n);

  // Epoch, generator state at the start of the epoch and batches already yielded, as bytes; loading them
  // into a loader over the same data and settings makes it yield exactly the remaining batches.
  std::string save_state() const;
  // Throws Error(InvalidArgument) naming what is wrong with a corrupt or foreign state.
  void load_state(const std::string& bytes);

 private:
  void begin_epoch();
  void end_epoch();
  std::vector<int64_t> epoch_order();

  std::shared_ptr<dist::State> state_;
  std::shared_ptr<Dataset> dataset_;
  LoaderConfig config_;
  mutable at::Generator generator_;
  std::shared_ptr<LoaderProgress> progress_;
  int64_t epoch_ = 0;
  int64_t skip_ = 0;
  bool in_epoch_ = false;
  bool restored_generator_ = false;
  at::Tensor epoch_generator_state_;
  std::vector<std::vector<int64_t>> batches_;
  size_t position_ = 0;
};

}  // namespace accel::data
