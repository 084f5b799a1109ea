#include "data/loader.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randperm.h>

#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "core/value_ranges.hpp"
#include "data/loader_state.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/collectives/seed.hpp"

namespace accel::data {

Loader::Loader(std::shared_ptr<distributed::State> state, LoaderConfig config, bool iterable)
    : state_(std::move(state)),
      config_(config),
      kind_(choose_epoch_kind(
          EpochSource{iterable, config.dispatch_batches, config.already_sharded, state_->launch().world_size})),
      // Accelerate hands the sampler a fresh torch.Generator(), whose seed is torch's default: the order is the
      // same from run to run unless data_seed picks another.
      generator_(at::make_generator<at::CPUGeneratorImpl>(config.data_seed.value_or(c10::default_rng_seed_val))),
      // Accelerate's SeedableRandomSampler falls back on torch.initial_seed(): set_seed's seed, if any.
      seedable_seed_(config.data_seed.value_or(at::detail::getDefaultCPUGenerator().current_seed())),
      progress_(std::make_shared<LoaderProgress>()) {
  validate_sharding(config_.batch_size, state_->launch().world_size, config_.split_batches);
  for (const auto& type : option_list(state_->options().get_string("rng_types"))) {
    rng_.generator |= type == "generator";
    rng_.torch |= type == "torch";
    rng_.cuda |= type == "cuda";
  }
}

Loader::Loader(std::shared_ptr<distributed::State> state, std::shared_ptr<Dataset> dataset, LoaderConfig config)
    : Loader(std::move(state), config, /*iterable=*/false) {
  map_dataset_ = std::move(dataset);
  if (config_.batches) {
    if (config_.shuffle) fail(Code::InvalidArgument, "shuffle cannot reorder a given list of batches");
    if (config_.split_batches) fail(Code::InvalidArgument, "split_batches needs a batch size; a given list of batches has none");
    for (const auto& batch : *config_.batches) {
      if (batch.empty()) fail(Code::InvalidArgument, "a given batch is empty");
      for (int64_t index : batch) check_index(index, map_dataset_->size());
    }
  } else {
    // Each epoch's order is a vector of every index: a length it cannot even count is refused here, not
    // left to std::length_error in the first next().
    const auto max_order = static_cast<int64_t>(std::vector<int64_t>().max_size());
    if (map_dataset_->size() > max_order) {
      fail(Code::InvalidArgument, "a dataset of " + std::to_string(map_dataset_->size()) +
                                      " samples is too large for a loader, which holds an epoch's order of indices "
                                      "in memory (at most " + std::to_string(max_order) + ")");
    }
  }
}

Loader::Loader(std::shared_ptr<distributed::State> state, std::shared_ptr<IterableDataset> dataset, LoaderConfig config)
    : Loader(std::move(state), config, /*iterable=*/true) {
  if (config_.shuffle) fail(Code::InvalidArgument, "shuffle needs a map-style dataset; an iterable one sets its own order");
  iterable_dataset_ = std::move(dataset);
}

Loader::~Loader() { state_->gradient_state().remove_loader(progress_.get()); }

std::vector<int64_t> Loader::epoch_order() {
  const int64_t n = map_dataset_->size();
  if (!config_.shuffle) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    return order;
  }
  {
    // randperm takes the generator's lock itself, so it is held only around the state changes.
    std::lock_guard<std::mutex> lock(generator_.mutex());
    if (restored_generator_) {
      generator_.set_state(epoch_generator_state_);
    } else if (config_.use_seedable_sampler) {
      generator_.set_current_seed(seedable_seed_ + static_cast<uint64_t>(epoch_));
    } else if (state_->launch().world_size > 1 && !is_dispatched(kind_) && rng_.generator) {
      // Accelerate's synchronized generator: every rank draws rank 0's permutation.
      distributed::synchronize_generator(*state_, generator_);
    }
    restored_generator_ = false;
    epoch_generator_state_ = generator_.get_state();
  }
  auto permutation = at::randperm(n, generator_, at::kLong);
  // torch 1.13's RandomSampler ends each pass with a second permutation, sliced to nothing
  // (num_samples % n == 0), which still advances the generator the next epoch starts from.
  at::randperm(n, generator_, at::kLong);
  const auto* data = permutation.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

std::vector<Batch> Loader::base_batches() {
  if (config_.batches) return *config_.batches;
  return make_batches(epoch_order(), config_.batch_size, config_.drop_last);
}

std::vector<Batch> Loader::my_batches() {
  const int64_t world = state_->launch().world_size;
  if (config_.batches) return world == 1 ? base_batches() : shard_given_batches();
  return map_shard_batches(base_batches(), config_.batch_size, config_.drop_last, world, state_->launch().rank,
                           config_.split_batches, config_.even_batches);
}

int64_t Loader::global_batch_size() const {
  if (config_.batches || config_.already_sharded) return -1;
  return data::global_batch_size(config_.batch_size, state_->launch().world_size, config_.split_batches);
}

std::vector<Batch> Loader::shard_given_batches() const {
  const ShardSpec spec{state_->launch().world_size, state_->launch().rank, false, config_.even_batches};
  return shard_batches(*config_.batches, BaseSampler{std::nullopt, false}, spec);
}

namespace {

// Rank 0's side of an iterable dispatcher: P base batches a step (one with split_batches), as 1.9 reads them;
// with world 1, plain batches of one rank's own stream.
DispatchEpoch::ReadStep iterable_steps(std::shared_ptr<IterableDataset> dataset, const LoaderConfig& config,
                                       int64_t world) {
  auto position = std::make_shared<int64_t>(0);
  auto done = std::make_shared<bool>(false);
  return [dataset, config, world, position, done]() -> std::optional<NamedTensors> {
    const int64_t base_per_step = config.split_batches ? 1 : world;
    std::vector<NamedTensors> items;
    int64_t full_base_batches = 0;
    for (int64_t b = 0; b < base_per_step && !*done; ++b) {
      std::vector<NamedTensors> base;
      while (static_cast<int64_t>(base.size()) < config.batch_size) {
        auto item = dataset->next_item();
        if (!item) {
          *done = true;
          break;
        }
        base.push_back(std::move(*item));
      }
      const bool full = static_cast<int64_t>(base.size()) == config.batch_size;
      if (!full && config.drop_last) break;
      full_base_batches += full ? 1 : 0;
      for (auto& item : base) items.push_back(std::move(item));
    }
    const bool partial_round = full_base_batches < base_per_step;
    if (items.empty() || (partial_round && config.drop_last)) return std::nullopt;
    std::vector<int64_t> positions;
    for (size_t i = 0; i < items.size(); ++i) positions.push_back((*position)++);
    return collate(items, positions);
  };
}

}  // namespace

std::unique_ptr<EpochBatches> Loader::start_epoch() {
  const int64_t world = state_->launch().world_size;
  const int64_t rank = state_->launch().rank;
  const bool root = rank == 0;
  // As DataLoaderShard.__iter__ does (a dispatcher synchronises nothing): before any of the epoch is drawn.
  if (world > 1 && !is_dispatched(kind_)) distributed::synchronize_rng_states(*state_, rng_.torch, rng_.cuda);
  switch (kind_) {
    case EpochKind::OwnStream: {
      iterable_dataset_->start_epoch(epoch_);
      LoaderConfig per_rank = config_;
      if (config_.split_batches) per_rank.batch_size /= world;
      return std::make_unique<StreamEpoch>(iterable_steps(iterable_dataset_, per_rank, 1));
    }
    case EpochKind::IterableDispatch:
      if (root) iterable_dataset_->start_epoch(epoch_);
      return std::make_unique<DispatchEpoch>(state_, iterable_steps(iterable_dataset_, config_, world), config_.drop_last);
    case EpochKind::IterableShard: {
      iterable_dataset_->start_epoch(epoch_);
      IterableShardSpec spec{config_.batch_size, config_.drop_last, world, rank, config_.split_batches};
      return std::make_unique<IterableShardEpoch>(iterable_dataset_, spec);
    }
    case EpochKind::MapDispatch: {
      auto steps = std::make_shared<std::vector<Batch>>();
      if (root) *steps = dispatch_steps(base_batches(), world, config_.split_batches, config_.drop_last);
      auto next_step = std::make_shared<size_t>(0);
      auto read_step = [dataset = map_dataset_, steps, next_step]() -> std::optional<NamedTensors> {
        if (*next_step >= steps->size()) return std::nullopt;
        return dataset->fetch((*steps)[(*next_step)++]);
      };
      return std::make_unique<DispatchEpoch>(state_, read_step, config_.drop_last);
    }
    case EpochKind::MapShard:
      break;
  }
  auto batches = my_batches();
  // Accelerate cannot size the last global batch of a given batch list, so it keeps every row (-1).
  const int64_t remainder =
      config_.batches ? -1
                      : shard_remainder(map_dataset_->size(), config_.batch_size, world, config_.split_batches,
                                        config_.drop_last);
  if (config_.prefetch_threads > 0) {
    return std::make_unique<PrefetchingShardEpoch>(map_dataset_, std::move(batches), remainder,
                                                   config_.prefetch_threads, config_.prefetch_depth);
  }
  return std::make_unique<MapShardEpoch>(map_dataset_, std::move(batches), remainder);
}

void Loader::end_epoch() {
  state_->gradient_state().remove_loader(progress_.get());
  epoch_batches_.reset();
  skip_ = 0;
  yielded_ = 0;
  ++epoch_;
}

void Loader::place_on_device(NamedTensors& batch) const {
  if (!config_.device_placement || state_->device() == "cpu") return;
  const at::Device device(state_->device());
  for (auto& field : batch) {
    // Page-locked host memory lets a non-blocking copy overlap the GPU's work.
    if (config_.pin_memory && device.is_cuda() && field.second.is_cpu()) field.second = field.second.pin_memory();
    field.second = copy_to_device(field.second, device, config_.non_blocking);
  }
}

std::optional<NamedTensors> Loader::next() {
  const timeline::Span span("loader wait");
  if (!epoch_batches_) {
    // The epoch after it could not be counted (end_epoch): refused before any of it is drawn.
    if (epoch_ == std::numeric_limits<int64_t>::max()) {
      fail(Code::InvalidState, "epoch " + std::to_string(epoch_) +
                                   " is INT64_MAX, after which no epoch can be numbered: set_epoch to a smaller one");
    }
    epoch_batches_ = start_epoch();
    epoch_batches_->skip(skip_);
    yielded_ = skip_;
    progress_->end_of_dataloader = false;
    progress_->remainder = epoch_batches_->remainder();
    state_->gradient_state().add_loader(progress_);
  }
  bool last = false;
  auto batch = epoch_batches_->next(last);
  if (!batch) {
    end_epoch();
    return std::nullopt;
  }
  ++yielded_;
  // The look-ahead of Accelerate: end_of_dataloader is already true while the last batch is in use.
  progress_->end_of_dataloader = last;
  progress_->remainder = epoch_batches_->remainder();
  place_on_device(*batch);
  return batch;
}

int64_t Loader::length() const {
  if (iterable_dataset_) return -1;
  const int64_t n = map_dataset_->size();
  const int64_t world = state_->launch().world_size;
  const int64_t base = config_.batches ? static_cast<int64_t>(config_.batches->size())
                                       : num_batches(n, config_.batch_size, config_.drop_last);
  int64_t full = 0;
  if (is_dispatched(kind_)) {
    full = dispatch_len(base, world, config_.split_batches, config_.drop_last);
  } else if (config_.batches) {
    full = world == 1 ? base : static_cast<int64_t>(shard_given_batches().size());
  } else {
    full = sharded_length(n, config_.batch_size, config_.drop_last, world, state_->launch().rank,
                          config_.split_batches, config_.even_batches);
  }
  return std::max<int64_t>(0, full - skip_);
}

void Loader::set_epoch(int64_t epoch) {
  if (epoch_batches_) fail(Code::InvalidState, "set_epoch: an epoch is in progress; finish it first");
  if (epoch < 0) fail(Code::InvalidArgument, "set_epoch: epoch " + std::to_string(epoch) + " is negative");
  epoch_ = epoch;
}

void Loader::skip_first_batches(int64_t n) {
  if (epoch_batches_) fail(Code::InvalidState, "skip_first_batches: an epoch is in progress; finish it first");
  if (n < 0) fail(Code::InvalidArgument, "skip_first_batches: " + std::to_string(n) + " is negative");
  skip_ = n;
}

std::string Loader::save_state() const {
  const bool in_epoch = epoch_batches_ != nullptr;
  LoaderState saved;
  saved.epoch = epoch_;
  saved.yielded = in_epoch ? yielded_ : 0;
  saved.dataset_size = map_dataset_ ? map_dataset_->size() : -1;
  saved.world_size = state_->launch().world_size;
  saved.global_batch_size = global_batch_size();
  at::Tensor generator_state;
  if (in_epoch && epoch_generator_state_.defined()) {
    generator_state = epoch_generator_state_;
  } else {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_state = generator_.get_state();
  }
  saved.generator_state.assign(reinterpret_cast<const char*>(generator_state.data_ptr<uint8_t>()),
                               static_cast<size_t>(generator_state.numel()));
  saved.mid_epoch = in_epoch;
  return encode_loader_state(saved);
}

LoaderState Loader::checked_state(const std::string& bytes) const {
  LoaderState saved = decode_loader_state(bytes);
  const int64_t expected_size = map_dataset_ ? map_dataset_->size() : -1;
  if (saved.dataset_size != expected_size) {
    fail(Code::InvalidArgument, "loader state was saved for a dataset of " + std::to_string(saved.dataset_size) +
                                    " samples, this one has " + std::to_string(expected_size) + " (-1: iterable)");
  }
  const int64_t world = state_->launch().world_size;
  if (saved.mid_epoch && saved.world_size != -1 && saved.world_size != world &&
      (saved.global_batch_size == -1 || saved.global_batch_size != global_batch_size())) {
    const auto step = [](int64_t global) {
      return global == -1 ? std::string("steps that are not samples alike on any number of processes (explicit "
                                        "batches, or a stream already sharded)")
                          : std::to_string(global) + " samples a step";
    };
    fail(Code::InvalidArgument, "loader state was saved mid-epoch by " + std::to_string(saved.world_size) +
                                    " processes taking " + step(saved.global_batch_size) + "; this run has " +
                                    std::to_string(world) + " taking " + step(global_batch_size()) +
                                    ": resuming on another number of processes needs the same global batch "
                                    "(batch_size x processes, or batch_size with split_batches)");
  }
  return saved;
}

void Loader::load_state(const std::string& bytes) {
  if (epoch_batches_) fail(Code::InvalidState, "load_state: an epoch is in progress");
  const LoaderState saved = checked_state(bytes);
  auto generator_state = at::empty({static_cast<int64_t>(saved.generator_state.size())}, at::kByte);
  std::memcpy(generator_state.data_ptr<uint8_t>(), saved.generator_state.data(), saved.generator_state.size());
  {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    try {
      generator_.set_state(generator_state);
    } catch (const std::exception&) {
      fail(Code::InvalidArgument, "loader state is corrupt (generator state rejected)");
    }
  }
  epoch_ = saved.epoch;
  skip_ = saved.mid_epoch ? saved.yielded : 0;
  epoch_generator_state_ = generator_state;
  restored_generator_ = saved.mid_epoch;
}

}  // namespace accel::data
