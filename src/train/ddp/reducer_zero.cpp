// ZeRO in the reducer (train/ddp/reducer.hpp: ReducerConfig::zero_stage): the split of the parameters, stage
// 2's reduce-scatters into each rank's chunk, and the gradient memory a rank holds.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <set>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "train/ddp/reducer_impl.hpp"

namespace accel::train {

bool Reducer::Impl::scatters_bit_identically() {
  return !parameters.empty() && scatters_like_allreduce(shard_group(*state, partition, "ZeRO gradient reduce-scatter"),
                                                        parameters.front().second);
}

// Stage 2 without the reduce-scatter: every gradient was averaged; the rank keeps those of the parameters it
// owns a piece of (accel's gradients: the caller's stay its storage).
void Reducer::Impl::drop_gradients_of_others() {
  if (config.host_gradients) return;
  std::vector<bool> keep(parameters.size(), false);
  for (const ZeroPiece& piece : own_pieces) keep[piece.parameter] = true;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!keep[i]) parameters[i].second.mutable_grad() = at::Tensor();
  }
}

void Reducer::Impl::split_for_zero() {
  partition.stage = config.zero_stage;
  partition.host_pieces = config.cpu_offload;
  std::vector<std::vector<int64_t>> numels;
  for (auto& bucket : buckets) {
    numels.emplace_back();
    for (size_t member : bucket.members) numels.back().push_back(parameters[member].second.numel());
    partition.members.push_back(bucket.members);
  }
  partition.buckets = split_buckets(numels, partition.world);
  own_pieces = partition.pieces_of(partition.rank);
  partition.held_pieces->assign(own_pieces.size(), at::Tensor());
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
  const size_t index = static_cast<size_t>(&bucket - buckets.data());
  const ZeroBucketSplit& split = partition.buckets[index];
  if (!bucket.flat.defined()) {
    land_scatters_before(index);
    bucket.flat = at::empty({bucket.numel}, parameters[bucket.members.front()].second.options().requires_grad(false));
    average.bucket = bucket.flat;
    // The gaps between members travel too: zeros rather than whatever the memory held.
    for (size_t m = 0; m <= split.offsets.size(); ++m) {
      const int64_t begin = m == 0 ? 0 : split.offsets[m - 1] + split.numels[m - 1];
      const int64_t end = m == split.offsets.size() ? bucket.numel : split.offsets[m];
      if (begin < end) bucket.flat.narrow(0, begin, end - begin).zero_();
    }
  }
  copied_bytes += distributed::fill_bucket(average);
  // The bucket holds them now: accel's own gradients go at once, so that backward never holds every
  // gradient twice.
  if (!config.host_gradients) {
    for (size_t member : bucket.members) parameters[member].second.mutable_grad() = at::Tensor();
  }
  if (average.on_filled) average.on_filled();
  at::Tensor& output = config.host_gradients ? bucket.owned : bucket.received;
  if (!config.host_gradients) bucket.received = bucket.flat.narrow(0, partition.rank * bucket.chunk, bucket.chunk);
  const char* what = "ZeRO gradient reduce-scatter";
  bucket.scatter = shard_group(*state, partition, what)
                       .transport()
                       .reduce_scatter_async(output, bucket.flat, distributed::ReduceKind::Sum, what);
  // Hybrid sharding: the node's sums, added up over the nodes as the nodes' leaders add data parallelism's.
  if (distributed::ProcessGroup* across = replica_group(*state, partition, what)) {
    bucket.scatter = distributed::then_allreduce(std::move(bucket.scatter), across->transport(), output, what);
  }
}

// accel's own buckets of one backward would otherwise all live until its end, a second copy of the
// gradients: before making another, backward waits for the oldest in flight to land (its chunk copied
// out, the bucket freed) while kScattersInFlight are. With the reduce-scatter far quicker than the
// backward of a bucket's layers, the wait is mostly over already.
void Reducer::Impl::land_scatters_before(size_t bucket) {
  if (config.host_gradients) return;  // the caller's bucket stays: its gradients are views of it
  constexpr size_t kScattersInFlight = 2;
  size_t in_flight = 0;
  for (size_t b = 0; b < bucket; ++b) in_flight += buckets[b].scatter && !buckets[b].landed ? 1 : 0;
  for (size_t b = 0; b < bucket && in_flight >= kScattersInFlight; ++b) {
    if (!buckets[b].scatter || buckets[b].landed) continue;
    wait(buckets[b]);
    place_zero_gradients(buckets[b]);
    buckets[b].landed = true;
    --in_flight;
  }
}

void Reducer::Impl::wait(Bucket& bucket) {
  if (bucket.scatter) {
    bucket.scatter->wait();
    bucket.done_us->store(timeline::now_us());
  } else {
    bucket.work->wait();
  }
}

// Stage 2 after the reduce-scatter: a copy of the chunk the reduce-scatter wrote becomes the rank's, and
// the bucket goes; a parameter it owns whole gets its place in the chunk as its gradient, one it owns a
// piece of keeps no gradient (its piece is held for the optimizer), the others' are dropped (the caller's
// gradients stay the bucket's views, unaveraged outside the rank's chunk).
void Reducer::Impl::place_zero_gradients(Bucket& bucket) {
  if (config.host_gradients) return;
  const size_t index = static_cast<size_t>(&bucket - buckets.data());
  // The last step's chunk is reused when nothing else holds it (its gradients were dropped when the bucket
  // was filled, zero_grad dropped its held pieces): a fresh one each step fragments the allocator's heap,
  // which costs more resident memory than the chunk itself.
  if (bucket.owned.defined() && bucket.owned.storage().use_count() == 1) {
    bucket.owned.copy_(bucket.received);
  } else {
    bucket.owned = bucket.received.clone();
  }
  copied_bytes += bytes_of(bucket.owned);
  bucket.received = at::Tensor();
  bucket.flat = at::Tensor();
  for (size_t m = 0; m < bucket.members.size(); ++m) parameters[bucket.members[m]].second.mutable_grad() = at::Tensor();
  auto& held = *partition.held_pieces;
  for (size_t k = 0; k < own_pieces.size(); ++k) {
    const ZeroPiece& piece = own_pieces[k];
    if (piece.bucket != index) continue;
    const at::Tensor elements = bucket.owned.narrow(0, piece.in_chunk, piece.numel);
    at::Tensor& parameter = parameters[piece.parameter].second;
    if (piece.whole) {
      parameter.mutable_grad() = elements.view(parameter.sizes());
      held[k] = at::Tensor();
    } else {
      held[k] = elements;
    }
  }
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
