#include "data/loader.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randperm.h>

#include <cstring>
#include <random>

#include "core/error.hpp"
#include "data/sharding.hpp"
#include "dist/collectives.hpp"

namespace accel::data {

LoaderConfig loader_config(const ResolvedOptions& options) {
  LoaderConfig config;
  config.batch_size = options.get_int("batch_size");
  config.shuffle = options.get_bool("shuffle");
  config.drop_last = options.get_bool("drop_last");
  config.split_batches = options.get_bool("split_batches");
  config.even_batches = options.get_bool("even_batches");
  config.use_seedable_sampler = options.get_bool("use_seedable_sampler");
  if (const int64_t seed = options.get_int("data_seed"); seed >= 0) config.data_seed = static_cast<uint64_t>(seed);
  config.non_blocking = options.get_bool("non_blocking");
  return config;
}

namespace {

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

Loader::Loader(std::shared_ptr<dist::State> state, std::shared_ptr<Dataset> dataset, LoaderConfig config)
    : state_(std::move(state)),
      dataset_(std::move(dataset)),
      config_(config),
      generator_(at::make_generator<at::CPUGeneratorImpl>(config.data_seed.value_or(fresh_seed()))),
      progress_(std::make_shared<LoaderProgress>()) {
  validate_sharding(config_.batch_size, state_->launch().world_size, config_.split_batches);
}

Loader::~Loader() { state_->gradient_state().remove_loader(progress_.get()); }

std::vector<int64_t> Loader::epoch_order() {
  const int64_t n = dataset_->size();
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
      generator_.set_current_seed(config_.data_seed.value_or(0) + static_cast<uint64_t>(epoch_));
    } else if (state_->launch().world_size > 1) {
      // Accelerate's synchronized generator: every rank draws rank 0's permutation.
      auto generator_state = generator_.get_state();
      dist::broadcast(*state_, generator_state, 0);
      generator_.set_state(generator_state);
    }
    restored_generator_ = false;
    epoch_generator_state_ = generator_.get_state();
  }
  auto permutation = at::randperm(n, generator_, at::kLong);
  const auto* data = permutation.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

void Loader::begin_epoch() {
  const int32_t world = state_->launch().world_size;
  const auto base = make_batches(epoch_order(), config_.batch_size, config_.drop_last);
  batches_ = shard_batches(base, config_.batch_size, config_.drop_last, world, state_->launch().rank,
                           config_.split_batches, config_.even_batches);
  position_ = static_cast<size_t>(std::min<int64_t>(skip_, static_cast<int64_t>(batches_.size())));
  skip_ = 0;
  progress_->end_of_dataloader = false;
  progress_->remainder =
      shard_remainder(dataset_->size(), config_.batch_size, world, config_.split_batches, config_.drop_last);
  state_->gradient_state().add_loader(progress_);
  in_epoch_ = true;
}

void Loader::end_epoch() {
  state_->gradient_state().remove_loader(progress_.get());
  in_epoch_ = false;
  ++epoch_;
}

std::optional<NamedTensors> Loader::next() {
  if (!in_epoch_) begin_epoch();
  if (position_ >= batches_.size()) {
    end_epoch();
    return std::nullopt;
  }
  auto batch = dataset_->fetch(batches_[position_]);
  ++position_;
  // The look-ahead of Accelerate: end_of_dataloader is already true while the last batch is in use.
  progress_->end_of_dataloader = position_ == batches_.size();
  if (state_->device() != "cpu") {
    const at::Device device(state_->device());
    for (auto& field : batch) field.second = field.second.to(device, config_.non_blocking);
  }
  return batch;
}

int64_t Loader::length() const {
  const int64_t full = sharded_length(dataset_->size(), config_.batch_size, config_.drop_last,
                                      state_->launch().world_size, state_->launch().rank, config_.split_batches,
                                      config_.even_batches);
  return std::max<int64_t>(0, full - skip_);
}

void Loader::set_epoch(int64_t epoch) {
  if (in_epoch_) fail(Code::InvalidState, "set_epoch: an epoch is in progress; finish it first");
  if (epoch < 0) fail(Code::InvalidArgument, "set_epoch: epoch " + std::to_string(epoch) + " is negative");
  epoch_ = epoch;
}

void Loader::skip_first_batches(int64_t n) {
  if (in_epoch_) fail(Code::InvalidState, "skip_first_batches: an epoch is in progress; finish it first");
  if (n < 0) fail(Code::InvalidArgument, "skip_first_batches: " + std::to_string(n) + " is negative");
  skip_ = n;
}

namespace {

constexpr char kStateMagic[8] = {'A', 'C', 'C', 'L', 'D', 'R', '0', '1'};

void put_int(std::string& out, int64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }

int64_t take_int(const std::string& in, size_t& offset, const char* field) {
  if (in.size() < offset + sizeof(int64_t)) {
    fail(Code::InvalidArgument, std::string("loader state is truncated (no ") + field + ")");
  }
  int64_t value = 0;
  std::memcpy(&value, in.data() + offset, sizeof value);
  offset += sizeof value;
  return value;
}

}  // namespace

std::string Loader::save_state() const {
  std::string out(kStateMagic, sizeof kStateMagic);
  put_int(out, epoch_);
  put_int(out, in_epoch_ ? static_cast<int64_t>(position_) : 0);
  put_int(out, dataset_->size());
  at::Tensor generator_state = in_epoch_ && epoch_generator_state_.defined()
                                   ? epoch_generator_state_
                                   : [&] {
                                       std::lock_guard<std::mutex> lock(generator_.mutex());
                                       return generator_.get_state();
                                     }();
  put_int(out, generator_state.numel());
  out.append(reinterpret_cast<const char*>(generator_state.data_ptr<uint8_t>()), static_cast<size_t>(generator_state.numel()));
  put_int(out, in_epoch_ ? 1 : 0);
  return out;
}

void Loader::load_state(const std::string& bytes) {
  if (in_epoch_) fail(Code::InvalidState, "load_state: an epoch is in progress");
  if (bytes.size() < sizeof kStateMagic || std::memcmp(bytes.data(), kStateMagic, sizeof kStateMagic) != 0) {
    fail(Code::InvalidArgument, "loader state is corrupt or not an accel loader state (bad magic)");
  }
  size_t offset = sizeof kStateMagic;
  const int64_t epoch = take_int(bytes, offset, "epoch");
  const int64_t yielded = take_int(bytes, offset, "position");
  const int64_t size = take_int(bytes, offset, "dataset size");
  const int64_t generator_bytes = take_int(bytes, offset, "generator state size");
  if (epoch < 0 || yielded < 0) fail(Code::InvalidArgument, "loader state is corrupt (negative epoch or position)");
  if (size != dataset_->size()) {
    fail(Code::InvalidArgument, "loader state was saved for a dataset of " + std::to_string(size) +
                                    " samples, this one has " + std::to_string(dataset_->size()));
  }
  if (generator_bytes <= 0 || bytes.size() < offset + static_cast<size_t>(generator_bytes)) {
    fail(Code::InvalidArgument, "loader state is truncated (generator state)");
  }
  auto generator_state = at::empty({generator_bytes}, at::kByte);
  std::memcpy(generator_state.data_ptr<uint8_t>(), bytes.data() + offset, static_cast<size_t>(generator_bytes));
  offset += static_cast<size_t>(generator_bytes);
  const bool mid_epoch = take_int(bytes, offset, "epoch flag") != 0;
  if (offset != bytes.size()) fail(Code::InvalidArgument, "loader state is corrupt (trailing bytes)");
  {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    try {
      generator_.set_state(generator_state);
    } catch (const std::exception&) {
      fail(Code::InvalidArgument, "loader state is corrupt (generator state rejected)");
    }
  }
  epoch_ = epoch;
  skip_ = mid_epoch ? yielded : 0;
  epoch_generator_state_ = generator_state;
  restored_generator_ = mid_epoch;
}

}  // namespace accel::data
