// How an epoch's batches reach the ranks, decided in one place: the loader (data/loader.cpp), the planner of
// `accel shard-plan` (plan_epoch below) and, through them, every binding ask choose_epoch_kind, then deal
// with data/dealing.hpp's rules. Pure C++; settings that cannot work throw Error(Code::InvalidArgument).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/dealing.hpp"

namespace accel::data {

// Accelerate's choice between DataLoaderShard and DataLoaderDispatcher (accelerate-semantics.md 1.3, 1.9),
// with accel's already-sharded streams.
enum class EpochKind {
  MapShard,          // each rank deals itself its batches of the index list (BatchSamplerShard)
  MapDispatch,       // rank 0 reads the base batches, every rank receives its rows of each step
  IterableShard,     // every rank reads the whole stream and keeps its slice of each global batch
  IterableDispatch,  // rank 0 reads the stream, every rank receives its rows; one process: plain batches
  OwnStream,         // each rank batches the stream it is given (already_sharded), nothing exchanged
};

struct EpochSource {
  bool iterable = false;                 // an iterable dataset rather than a map-style one
  std::optional<bool> dispatch_batches;  // unset: Accelerate's default, dispatch exactly when iterable
  bool already_sharded = false;          // an iterable dataset that yields only this rank's share
  int64_t num_processes = 1;
};

// One process shards nothing (Accelerate wraps no IterableDatasetShard then): an iterable dataset is read
// as plain batches, which is what a one-process dispatcher gives. Throws Error(InvalidArgument) for
// already_sharded on a map-style dataset or with dispatch_batches true.
EpochKind choose_epoch_kind(const EpochSource& source);
bool is_dispatched(EpochKind kind);

// ---- A whole epoch over the sequential sampler 0..N-1, every rank (accel shard-plan) ----

struct PlanOptions {
  int64_t dataset_len = 0;  // with already_sharded: the length of each rank's own stream
  int64_t batch_size = 1;
  int64_t num_processes = 1;
  bool split_batches = false;
  bool even_batches = true;
  bool drop_last = false;
  bool iterable = false;
  std::optional<bool> dispatch_batches;
  bool already_sharded = false;
  int64_t skip_batches = 0;  // skip_first_batches(loader, skip_batches)
};

struct RankPlan {
  int64_t rank = 0;
  // The closed-form length: the loader's length() for a map-style dataset; for an iterable one, where the
  // loader cannot know the stream's length (it reports -1), the number of batches it yields.
  int64_t length = 0;
  std::vector<Batch> batches;
};

struct EpochPlan {
  std::vector<RankPlan> ranks;
  // gather_for_metrics' remainder on the last batch: the dispatcher's last step row count, else the
  // DataLoaderShard one (0 for an iterable shard, whose length is per rank; -1 with drop_last, and for a
  // stream nothing pads). Upstream loses it (-1) on a map-style loader rebuilt by skip_first_batches; here
  // skipping leaves it unchanged, since the last step is the same.
  int64_t remainder = -1;
};

// A plan holds every index it deals, and each rank walks the whole epoch: plan_epoch refuses with
// Error(InvalidArgument) settings where num_processes * (dataset_len + batch_size * num_processes), the
// indices walked with at most one global batch of padding, is more than this (a few seconds, about a GB).
constexpr int64_t kMaxPlanWork = 10'000'000;

EpochPlan plan_epoch(const PlanOptions& options);

}  // namespace accel::data
