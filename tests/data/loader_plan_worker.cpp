// The loader and the planner of `accel shard-plan` agree: for random settings (dataset length, batch size,
// split, even, drop_last, map-style or iterable, dispatch unset/on/off, already sharded, skipped batches), the
// batches a real Loader yields on this rank are the plan's for this rank, in order, with the plan's length
// (map-style) and gather_for_metrics remainder; settings the planner refuses, the loader refuses too. Every
// rank draws the same settings, so dispatched epochs meet in step.
#include <ATen/ops/arange.h>
#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core_worker.hpp"
#include "data/dataset.hpp"
#include "data/epoch_plan.hpp"
#include "data/loader.hpp"

namespace {

using accel::NamedTensors;
using accel::data::Batch;
using core_worker::rank;
using core_worker::world;

// The stream 0, 1, ..., n-1 of 0-d int64 items named "index", restarted each epoch.
class CountingStream final : public accel::data::IterableDataset {
 public:
  explicit CountingStream(int64_t n) : n_(n) {}
  void start_epoch(int64_t) override { next_ = 0; }
  std::optional<NamedTensors> next_item() override {
    if (next_ >= n_) return std::nullopt;
    return NamedTensors{{"index", at::scalar_tensor(next_++, at::kLong)}};
  }

 private:
  int64_t n_;
  int64_t next_ = 0;
};

std::string describe(const accel::data::PlanOptions& o) {
  std::ostringstream text;
  text << "dataset_len=" << o.dataset_len << " batch_size=" << o.batch_size << " processes=" << o.num_processes
       << " split=" << o.split_batches << " even=" << o.even_batches << " drop_last=" << o.drop_last
       << " iterable=" << o.iterable << " dispatch="
       << (o.dispatch_batches ? (*o.dispatch_batches ? "true" : "false") : "unset")
       << " already_sharded=" << o.already_sharded << " skip=" << o.skip_batches;
  return text.str();
}

accel::data::PlanOptions random_settings(std::mt19937_64& random) {
  auto pick = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  accel::data::PlanOptions o;
  o.num_processes = world();
  o.dataset_len = pick(1, 40);
  o.split_batches = pick(0, 3) == 0;
  o.batch_size = o.split_batches ? world() * pick(1, 3) : pick(1, 6);
  o.even_batches = pick(0, 2) != 0;
  o.drop_last = pick(0, 2) == 0;
  o.iterable = pick(0, 1) == 1;
  const int64_t dispatch = pick(0, 2);
  if (dispatch > 0) o.dispatch_batches = dispatch == 1;
  o.already_sharded = o.iterable && dispatch != 1 && pick(0, 3) == 0;
  o.skip_batches = pick(0, 3) == 0 ? pick(1, 4) : 0;
  return o;
}

std::unique_ptr<accel::data::Loader> loader_for(const accel::data::PlanOptions& o) {
  accel::data::LoaderConfig config;
  config.batch_size = o.batch_size;
  config.drop_last = o.drop_last;
  config.split_batches = o.split_batches;
  config.even_batches = o.even_batches;
  config.dispatch_batches = o.dispatch_batches;
  config.already_sharded = o.already_sharded;
  if (o.iterable) {
    return std::make_unique<accel::data::Loader>(core_worker::state, std::make_shared<CountingStream>(o.dataset_len),
                                                 config);
  }
  NamedTensors rows{{"index", at::arange(o.dataset_len, at::kLong)}};
  return std::make_unique<accel::data::Loader>(
      core_worker::state, std::make_shared<accel::data::TensorDataset>(std::move(rows)), config);
}

Batch indices_of(const NamedTensors& batch) {
  const at::Tensor index = batch.at(0).second.contiguous().reshape({-1});
  const auto* data = index.data_ptr<int64_t>();
  return Batch(data, data + index.numel());
}

TEST(LoaderPlan, TheLoaderYieldsWhatThePlannerPlans) {
  std::mt19937_64 random(20261127);
  int planned = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto settings = random_settings(random);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + describe(settings));
    std::optional<accel::data::EpochPlan> plan;
    try {
      plan = accel::data::plan_epoch(settings);
    } catch (const accel::Error& refused) {
      EXPECT_THROW(loader_for(settings), accel::Error) << "the planner refused: " << refused.what();
      continue;
    }
    ++planned;
    auto loader = loader_for(settings);
    loader->skip_first_batches(settings.skip_batches);
    const auto& mine = plan->ranks.at(static_cast<size_t>(rank()));
    if (!settings.iterable) EXPECT_EQ(loader->length(), mine.length);
    std::vector<Batch> yielded;
    int64_t remainder_at_end = -2;
    while (auto batch = loader->next()) {
      yielded.push_back(indices_of(*batch));
      if (loader->end_of_dataloader()) remainder_at_end = loader->remainder();
    }
    EXPECT_EQ(yielded, mine.batches);
    if (!yielded.empty()) EXPECT_EQ(remainder_at_end, plan->remainder);
  }
  EXPECT_GT(planned, 200);
}

}  // namespace
