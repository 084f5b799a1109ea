#include "data/epoch_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace accel::data {

EpochKind choose_epoch_kind(const EpochSource& source) {
  if (source.already_sharded) {
    require_argument(source.iterable, "already_sharded declares an iterable dataset split per process; a map-style "
                                      "dataset is dealt by index (shard its indices instead)");
    require_argument(!source.dispatch_batches.value_or(false),
                     "dispatch_batches sends rank 0's batches to every rank; an already_sharded dataset is read "
                     "by each rank itself");
    return EpochKind::OwnStream;
  }
  if (!source.iterable) return source.dispatch_batches.value_or(false) ? EpochKind::MapDispatch : EpochKind::MapShard;
  if (source.num_processes == 1 || source.dispatch_batches.value_or(true)) return EpochKind::IterableDispatch;
  return EpochKind::IterableShard;
}

bool is_dispatched(EpochKind kind) { return kind == EpochKind::MapDispatch || kind == EpochKind::IterableDispatch; }

namespace {

int64_t skipped_length(int64_t length, int64_t skip) { return std::max<int64_t>(0, length - skip); }

void validate_plan(const PlanOptions& o) {
  check_dataset_len(o.dataset_len);
  validate_sharding(o.batch_size, o.num_processes, o.split_batches);
  check_skip(o.skip_batches);
  int64_t work = 0;
  const bool overflows = __builtin_add_overflow(o.dataset_len, o.batch_size * o.num_processes, &work) ||
                         __builtin_mul_overflow(work, o.num_processes, &work);
  require_argument(!overflows && work <= kMaxPlanWork,
          "the plan is too large to compute: num_processes * (dataset_len + batch_size * num_processes) is " +
              (overflows ? "more than " + std::to_string(std::numeric_limits<int64_t>::max()) : std::to_string(work)) +
              ", the limit is " + std::to_string(kMaxPlanWork));
}

// Rank 0 reads the base loader. Skipping drops this rank's first batches, which are steps here (Accelerate's
// map-style dispatcher skipped base batches instead: the loader counts a rank's batches in every mode).
EpochPlan plan_dispatch(const PlanOptions& o, const std::vector<int64_t>& indices) {
  const auto base = make_batches(indices, o.batch_size, o.drop_last);
  const int64_t step_skip = o.skip_batches;
  const int64_t steps = dispatch_len(static_cast<int64_t>(base.size()), o.num_processes, o.split_batches, o.drop_last);
  EpochPlan plan;
  for (int64_t rank = 0; rank < o.num_processes; ++rank) {
    auto batches = dispatch_batches(base, DispatchSpec{o.num_processes, rank, o.split_batches, o.drop_last});
    plan.ranks.push_back(
        RankPlan{rank, skipped_length(steps, step_skip), skip_first_batches(std::move(batches), step_skip)});
  }
  plan.remainder = dispatch_remainder(base, o.num_processes, o.split_batches, o.drop_last);
  return plan;
}

// DataLoaderShard's remainder comes from len(dataset), which for an IterableDatasetShard is the per-rank
// padded length: a multiple of the rank's batch size, so the remainder is 0 and duplicates stay.
EpochPlan plan_iterable_shard(const PlanOptions& o, const std::vector<int64_t>& indices) {
  EpochPlan plan;
  for (int64_t rank = 0; rank < o.num_processes; ++rank) {
    const IterableShardSpec spec{o.batch_size, o.drop_last, o.num_processes, rank, o.split_batches};
    const int64_t length = IterableDatasetShard(spec).length(o.dataset_len);
    plan.ranks.push_back(RankPlan{rank, skipped_length(length, o.skip_batches),
                                  skip_first_batches(iterable_shard_batches(indices, spec), o.skip_batches)});
  }
  plan.remainder = o.drop_last ? -1 : 0;
  return plan;
}

// Each rank batches its own stream (here every rank's is 0..N-1) by its share of the batch size.
EpochPlan plan_own_streams(const PlanOptions& o, const std::vector<int64_t>& indices) {
  const int64_t batch_size = o.split_batches ? o.batch_size / o.num_processes : o.batch_size;
  EpochPlan plan;
  for (int64_t rank = 0; rank < o.num_processes; ++rank) {
    auto batches = skip_first_batches(make_batches(indices, batch_size, o.drop_last), o.skip_batches);
    const auto length = static_cast<int64_t>(batches.size());
    plan.ranks.push_back(RankPlan{rank, length, std::move(batches)});
  }
  return plan;
}

EpochPlan plan_map_shard(const PlanOptions& o, const std::vector<int64_t>& indices) {
  const auto base = make_batches(indices, o.batch_size, o.drop_last);
  EpochPlan plan;
  plan.remainder = shard_remainder(o.dataset_len, o.batch_size, o.num_processes, o.split_batches, o.drop_last);
  for (int64_t rank = 0; rank < o.num_processes; ++rank) {
    const int64_t length = sharded_length(o.dataset_len, o.batch_size, o.drop_last, o.num_processes, rank,
                                          o.split_batches, o.even_batches);
    auto batches =
        map_shard_batches(base, o.batch_size, o.drop_last, o.num_processes, rank, o.split_batches, o.even_batches);
    plan.ranks.push_back(
        RankPlan{rank, skipped_length(length, o.skip_batches), skip_first_batches(std::move(batches), o.skip_batches)});
  }
  return plan;
}

}  // namespace

EpochPlan plan_epoch(const PlanOptions& options) {
  validate_plan(options);
  const EpochKind kind = choose_epoch_kind(
      EpochSource{options.iterable, options.dispatch_batches, options.already_sharded, options.num_processes});
  std::vector<int64_t> indices(static_cast<size_t>(options.dataset_len));
  for (int64_t i = 0; i < options.dataset_len; ++i) indices[static_cast<size_t>(i)] = i;
  switch (kind) {
    case EpochKind::MapDispatch:
    case EpochKind::IterableDispatch:
      return plan_dispatch(options, indices);
    case EpochKind::IterableShard:
      return plan_iterable_shard(options, indices);
    case EpochKind::OwnStream:
      return plan_own_streams(options, indices);
    case EpochKind::MapShard:
      break;
  }
  return plan_map_shard(options, indices);
}

}  // namespace accel::data
