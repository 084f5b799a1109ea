// ZeRO in the reducer (train/reducer.hpp: ReducerConfig::zero_stage): the split of the parameters, stage
// 2's reduce-scatters into each rank's chunk, and the gradient memory a rank holds.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <set>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "train/reducer_impl.hpp"

namespace accel::train {

bool Reducer::Impl::scatters_bit_identically() {
  distributed::ProcessGroup* group = state->group("ZeRO gradient reduce-scatter");
  return group->uses_shared_memory() && !group->shared_memory_spans_nodes() &&
         !parameters.empty() && parameters.front().second.device().is_cpu();
}

// Stage 2 without the reduce-scatter: every gradient was averaged; the rank keeps its own (accel's
// gradients: the caller's stay its storage).
void Reducer::Impl::drop_gradients_of_others() {
  if (config.host_gradients) return;
  const auto owners = partition.owner_of(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (owners[i] != partition.rank) parameters[i].second.mutable_grad() = at::Tensor();
  }
}

void Reducer::Impl::split_for_zero() {
  partition.stage = config.zero_stage;
  partition.world = static_cast<int32_t>(state->launch().world_size);
  partition.rank = static_cast<int32_t>(state->launch().rank);
  std::vector<std::vector<int64_t>> numels;
  for (auto& bucket : buckets) {
    numels.emplace_back();
    for (size_t member : bucket.members) numels.back().push_back(parameters[member].second.numel());
    partition.members.push_back(bucket.members);
  }
  partition.buckets = split_buckets(numels, partition.world);
  if (!scatter) return;
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets[b].offsets = partition.buckets[b].offsets;
    buckets[b].chunk = partition.buckets[b].chunk;
    buckets[b].numel = buckets[b].chunk * partition.world;
  }
}

// What stage 2's reduce-scatter has no answer for, refused at prepare on every rank alike.
void Reducer::Impl::refuse_what_zero_cannot_do() const {
  if (config.zero_stage != 2) return;
  const char* refused = config.compression != GradCompression::None ? "grad_compression"
                        : config.find_unused_parameters             ? "find_unused_parameters"
                        : config.static_graph                       ? "static_graph"
                        : (config.gradient_as_bucket_view && !config.host_gradients) ? "gradient_as_bucket_view"
                                                                                     : nullptr;
  if (refused != nullptr) {
    fail(Code::Unsupported, std::string("zero_stage 2 with ") + refused +
                                " is not supported (zero_stage 1 keeps every gradient and supports it)");
  }
}

// Stage 2: the bucket (made for this backward, unless it holds the caller's gradients) filled as for an
// average, then reduce-scattered: each element summed in rank order as the all-reduce sums it, so that a
// rank's chunk holds exactly what stage 0's average would.
void Reducer::Impl::launch_scatter(Bucket& bucket, distributed::BucketAverage average) {
  const ZeroBucketSplit& split = partition.buckets[static_cast<size_t>(&bucket - buckets.data())];
  if (!bucket.flat.defined()) {
    bucket.flat = at::empty({bucket.numel}, bucket.owned.options());
    average.bucket = bucket.flat;
    // The chunks' padding travels too: zeros rather than whatever the memory held.
    for (int64_t r = 0; r < partition.world; ++r) {
      const int64_t begin = r * bucket.chunk + split.filled[static_cast<size_t>(r)];
      if (begin < (r + 1) * bucket.chunk) bucket.flat.narrow(0, begin, (r + 1) * bucket.chunk - begin).zero_();
    }
  }
  copied_bytes += distributed::fill_bucket(average);
  if (average.on_filled) average.on_filled();
  at::Tensor& output = config.host_gradients ? bucket.owned : bucket.received;
  if (!config.host_gradients) bucket.received = at::empty({bucket.chunk}, bucket.owned.options());
  bucket.scatter = transport("ZeRO gradient reduce-scatter")
                       .reduce_scatter_async(output, bucket.flat, distributed::ReduceKind::Sum,
                                             "ZeRO gradient reduce-scatter");
}

void Reducer::Impl::wait(Bucket& bucket) {
  if (bucket.scatter) {
    bucket.scatter->wait();
    bucket.done_us->store(timeline::now_us());
  } else {
    bucket.work->wait();
  }
}

// Stage 2 after the reduce-scatter: an owned parameter's gradient is its place in the chunk; the others'
// are dropped, with the bucket (the caller's gradients stay the bucket's views, unaveraged where not owned).
void Reducer::Impl::place_zero_gradients(Bucket& bucket) {
  if (config.host_gradients) return;
  const ZeroBucketSplit& split = partition.buckets[static_cast<size_t>(&bucket - buckets.data())];
  bucket.owned.copy_(bucket.received.narrow(0, 0, bucket.owned.numel()));
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    at::Tensor& parameter = parameters[bucket.members[m]].second;
    if (split.owners[m] != partition.rank) {
      parameter.mutable_grad() = at::Tensor();
      continue;
    }
    parameter.mutable_grad() = bucket.owned.narrow(0, split.offset_in_chunk(m), parameter.numel()).view(parameter.sizes());
  }
  copied_bytes += bytes_of(bucket.owned);
  bucket.flat = at::Tensor();
  bucket.received = at::Tensor();
}

// The storages of the gradients and of the buckets, each once (a gradient that is its bucket's view is
// the bucket's memory).
int64_t Reducer::Impl::gradient_bytes_held() const {
  std::set<const c10::StorageImpl*> seen;
  int64_t bytes = 0;
  const auto count = [&](const at::Tensor& tensor) {
    if (tensor.defined() && seen.insert(tensor.storage().unsafeGetStorageImpl()).second) {
      bytes += static_cast<int64_t>(tensor.storage().nbytes());
    }
  };
  for (const auto& parameter : parameters) count(parameter.second.grad());
  for (const auto& bucket : buckets) {
    count(bucket.flat);
    count(bucket.wire);
    count(bucket.owned);
  }
  return bytes;
}

}  // namespace accel::train
