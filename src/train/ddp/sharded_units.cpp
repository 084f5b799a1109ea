#include "train/ddp/sharded_units.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "distributed/transport/transport.hpp"

namespace accel::train {

ShardedUnits::ShardedUnits(std::shared_ptr<distributed::State> state, const NamedTensors& trainable,
                           const std::vector<int32_t>& unit_of, Options options, const std::function<void(size_t)>& taken)
    : state_(std::move(state)),
      alone_(state_->launch().world_size == 1),
      trainable_(trainable),
      places_(trainable.size()),
      options_(options) {
  for (const auto& dtype : {options_.compute, options_.reduce}) {
    require_argument(!dtype || at::isFloatingType(*dtype),
                     "zero_stage 3: units are computed and reduced in a floating dtype, not " + std::string(c10::toString(*dtype)));
  }
  require_argument(unit_of.size() == trainable_.size(),
                   "zero_stage 3: " + std::to_string(unit_of.size()) + " units given for " +
                       std::to_string(trainable_.size()) + " trainable parameters");
  int32_t units = 0;
  for (int32_t unit : unit_of) {
    require_argument(unit >= 0, "zero_stage 3: a unit number is negative (" + std::to_string(unit) + ")");
    units = std::max(units, unit + 1);
  }
  for (size_t i = 0; i < trainable_.size(); ++i) index_.emplace(trainable_[i].second.unsafeGetTensorImpl(), i);
  partition_.stage = 3;
  place_partition(partition_, *state_, options_.hybrid);
  partition_.members.assign(static_cast<size_t>(units), {});
  for (size_t i = 0; i < unit_of.size(); ++i) partition_.members[static_cast<size_t>(unit_of[i])].push_back(i);
  std::vector<std::vector<int64_t>> numels;
  for (size_t u = 0; u < partition_.members.size(); ++u) {
    const auto& members = partition_.members[u];
    require_argument(!members.empty(), "zero_stage 3: unit " + std::to_string(u) + " has no parameter (units are "
                                           "numbered from 0 without gaps)");
    numels.emplace_back();
    for (size_t member : members) {
      const at::Tensor& first = trainable_[members.front()].second;
      const at::Tensor& tensor = trainable_[member].second;
      if (tensor.scalar_type() != first.scalar_type()) {
        fail(Code::InvalidArgument,
             "zero_stage 3: unit " + std::to_string(u) + " holds '" + trainable_[members.front()].first + "' (" +
                 c10::toString(first.scalar_type()) + ") and '" + trainable_[member].first + "' (" +
                 c10::toString(tensor.scalar_type()) + "): a unit's parameters are gathered as one buffer, so they "
                 "need one dtype; put them in different units");
      }
      numels.back().push_back(tensor.numel());
    }
    gather_names_.push_back("ZeRO-3 parameter all-gather of unit " + std::to_string(u));
    reduce_names_.push_back("ZeRO-3 gradient reduction of unit " + std::to_string(u));
  }
  partition_.buckets = split_buckets(numels, partition_.world);
  for (size_t u = 0; u < partition_.members.size(); ++u) {
    for (size_t m = 0; m < partition_.members[u].size(); ++m) {
      places_[partition_.members[u][m]] = {u, partition_.buckets[u].offsets[m]};
    }
  }
  for (size_t u = 0; !alone_ && u < partition_.members.size(); ++u) {
    const char* what = reduce_names_[u].c_str();
    distributed::ProcessGroup* across = replica_group(*state_, partition_, what);
    if (reduce_dtype(u) == at::kBFloat16 &&
        !(shard_group(*state_, partition_, what).allreduces_bfloat16() && (!across || across->allreduces_bfloat16()))) {
      fail(Code::Unsupported, "zero_reduce_dtype 'bf16': this LibTorch's Gloo cannot sum bfloat16; reduce in 'fp32' or "
                              "'fp16', or keep every rank on one host with intra_node_transport 'auto' or 'shm' (the "
                              "shared-memory transport adds bfloat16)");
    }
  }
  pieces_ = partition_.pieces_of(partition_.rank);
  partition_.held_pieces->assign(pieces_.size(), at::Tensor());
  at::NoGradGuard no_grad;
  // One buffer of the largest layout for every unit in turn (made anew only for another dtype), so that the
  // chunks kept are not interleaved with layouts let go.
  int64_t largest = 0;
  for (const auto& bucket : partition_.buckets) largest = std::max(largest, bucket.chunk * partition_.world);
  at::Tensor layouts;
  for (size_t u = 0; u < partition_.members.size(); ++u) {
    partition_.parameter_chunks.push_back(at::empty({partition_.buckets[u].chunk}, chunk_options(u)));
    gradient_chunks_.emplace_back();  // made by the unit's first reduction
    if (!layouts.defined() || layouts.options().dtype() != unit_options(u).dtype()) {
      layouts = at::Tensor();  // the former buffer freed before the next is made
      layouts = at::empty({largest}, unit_options(u));
    }
    take_values_of_process_zero(u, layouts.narrow(0, 0, unit_numel(u)));
    if (taken) taken(u);
  }
}

void ShardedUnits::take_values_of_process_zero(size_t unit, at::Tensor full) {
  if (state_->launch().rank == 0) {
    full.zero_();
    const auto& members = partition_.members[unit];
    for (size_t m = 0; m < members.size(); ++m) {
      const at::Tensor& parameter = trainable_[members[m]].second;
      full.narrow(0, partition_.buckets[unit].offsets[m], parameter.numel()).view(parameter.sizes()).copy_(parameter.detach());
    }
  }
  distributed::broadcast(*state_, full, 0);
  const int64_t chunk = partition_.buckets[unit].chunk;
  partition_.parameter_chunks[unit].copy_(full.narrow(0, partition_.rank * chunk, chunk));
}

int64_t ShardedUnits::unit_numel(size_t unit) const {
  require_unit(unit, "unit_numel");
  return partition_.buckets[unit].chunk * partition_.world;
}

std::pair<size_t, int64_t> ShardedUnits::place(size_t trainable) const {
  if (trainable >= places_.size()) {
    fail(Code::OutOfRange, "zero_stage 3: trainable parameter " + std::to_string(trainable) + " out of range (" +
                               std::to_string(places_.size()) + ")");
  }
  return places_[trainable];
}

at::Device ShardedUnits::device(size_t unit) const {
  require_unit(unit, "device");
  return unit_options(unit).device();
}

at::TensorOptions ShardedUnits::chunk_options(size_t unit) const {
  // Pinned host memory: the copies to and from a CUDA device go by DMA, without a staging copy.
  if (options_.cpu_offload) return unit_options(unit).device(at::kCPU).pinned_memory(device(unit).is_cuda());
  return unit_options(unit);
}

at::TensorOptions ShardedUnits::unit_options(size_t unit) const {
  return trainable_[partition_.members[unit].front()].second.options().device(options_.device).requires_grad(false);
}

void ShardedUnits::require_unit(size_t unit, const char* what) const {
  if (unit >= partition_.buckets.size()) {
    fail(Code::OutOfRange, std::string(what) + ": unit " + std::to_string(unit) + " out of range (the model has " +
                               std::to_string(partition_.buckets.size()) + ")");
  }
}

void ShardedUnits::require_layout(size_t unit, const at::Tensor& full, const char* what) const {
  require_unit(unit, what);
  require_argument(full.defined(), std::string(what) + ": the unit's buffer is an undefined tensor");
  const int64_t numel = unit_numel(unit);
  if (full.dim() != 1 || full.numel() != numel || !full.is_contiguous()) {
    fail(Code::ShapeMismatch, std::string(what) + ": unit " + std::to_string(unit) + "'s buffer must be 1-d and "
                                  "contiguous with " + std::to_string(numel) + " elements, got " + c10::str(full.sizes()));
  }
  require_argument(full.device() == device(unit), std::string(what) + ": unit " + std::to_string(unit) +
                                                        "'s buffer is on " + full.device().str() + ", its parameters on " +
                                                        device(unit).str());
}

void ShardedUnits::require_dtype(size_t unit, const at::Tensor& full, at::ScalarType expected, const char* what) const {
  if (full.scalar_type() != expected) {
    fail(Code::Dtype, std::string(what) + ": unit " + std::to_string(unit) + "'s buffer is " +
                          c10::toString(full.scalar_type()) + ", its parameters are " +
                          c10::toString(partition_.parameter_chunks[unit].scalar_type()) + " computed in " +
                          c10::toString(compute_dtype(unit)));
  }
}

at::ScalarType ShardedUnits::compute_dtype(size_t unit) const {
  require_unit(unit, "compute_dtype");
  return options_.compute.value_or(c10::typeMetaToScalarType(unit_options(unit).dtype()));
}

at::ScalarType ShardedUnits::reduce_dtype(size_t unit) const { return options_.reduce.value_or(compute_dtype(unit)); }

void ShardedUnits::note_call(size_t unit, bool gather) {
  constexpr int64_t kModulus = int64_t{1} << 52;
  const int64_t call = static_cast<int64_t>(unit) * 2 + (gather ? 1 : 2);
  calls_signature_ = static_cast<int64_t>((static_cast<__int128>(calls_signature_) * 1000003 + call) % kModulus);
}

void ShardedUnits::require_ranks_in_step(const char* what) {
  const double mine = static_cast<double>(calls_signature_);
  calls_signature_ = 0;
  if (alone_) return;
  auto extremes = at::empty({2}, at::kDouble);
  double* values = extremes.data_ptr<double>();
  values[0] = mine;
  values[1] = -mine;
  const char* check = "ZeRO-3 units in step";
  state_->group(check)->transport().allreduce(extremes, distributed::ReduceKind::Max, check);
  if (values[0] != mine || -values[1] != mine) {
    fail(Code::InvalidState, std::string(what) + ": the processes gathered or reduced different units since the last "
                                                 "synchronising backward (their forwards took different paths: a "
                                                 "unit some of them skipped); under zero_stage 3 every process must "
                                                 "use the same units in the same order");
  }
}

namespace {

// LibTorch 1.13's Gloo has no bfloat16 all-gather: its bits travel as fp16's, which a gather copies and never
// adds.
at::Tensor carried(const at::Tensor& tensor) { return tensor.scalar_type() == at::kBFloat16 ? tensor.view(at::kHalf) : tensor; }

}  // namespace

ShardedUnits::~ShardedUnits() {
  try {
    discard_prefetches();
  } catch (...) {  // a failed prefetch: what mattered is that none still writes into its buffer
  }
}

ShardedUnits::Prefetch ShardedUnits::start_gather(size_t unit, const at::Tensor& full) {
  require_layout(unit, full, "gather");
  const at::Tensor& chunk = partition_.parameter_chunks[unit];
  const bool exact = full.scalar_type() == chunk.scalar_type();
  if (!exact) require_dtype(unit, full, compute_dtype(unit), "gather");
  note_call(unit, true);
  const char* what = gather_names_[unit].c_str();
  // Each rank casts its own chunk, so the traffic is in the compute dtype.
  Prefetch started;
  started.output = carried(full);
  if (alone_) {
    // The chunk is the unit: cast and copied straight into `full`, with no copy on the device in between (room
    // that a model larger than the device lacks).
    full.copy_(chunk);
    started.pending = std::make_unique<distributed::CompletedCollective>();
    return started;
  }
  // A copy even of an exact chunk: an optimizer step may change the chunk while the gather is in flight. An
  // offloaded chunk is copied to the unit's device by a blocking copy: a transport's wait need not wait for
  // the copy (NCCL's orders streams only), and the optimizer steps the chunk on the host.
  started.input = carried(chunk.to(full.device(), full.scalar_type(), /*non_blocking=*/false, /*copy=*/true));
  started.pending = shard_group(*state_, partition_, what).transport().all_gather_async(started.output, started.input, what);
  return started;
}

void ShardedUnits::wait_for(Prefetch& started, size_t unit) {
  const timeline::Span span(gather_names_[unit].c_str());
  const auto begun = std::chrono::steady_clock::now();
  gathers_ += 1;
  started.pending->wait();
  gather_wait_us_ += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - begun).count();
}

ShardedUnits::GatherFigures ShardedUnits::gather_figures() const {
  return {gathers_.load(), prefetches_started_.load(), static_cast<double>(gather_wait_us_.load()) / 1000.0};
}

void ShardedUnits::gather(size_t unit, const at::Tensor& full) {
  const auto found = prefetches_.find(unit);
  if (found == prefetches_.end()) {
    Prefetch started = start_gather(unit, full);
    wait_for(started, unit);
    return;
  }
  Prefetch prefetch = std::move(found->second);
  prefetches_.erase(found);
  wait_for(prefetch, unit);
  if (prefetch.output.data_ptr() == full.data_ptr()) return;
  require_layout(unit, full, "gather");
  const at::Tensor target = carried(full);
  if (target.scalar_type() != prefetch.output.scalar_type()) {
    fail(Code::InvalidArgument, "gather: unit " + std::to_string(unit) + " was prefetched in another dtype than " +
                                    c10::toString(full.scalar_type()) + "; gather it into a buffer of the prefetch's");
  }
  target.copy_(prefetch.output);
}

void ShardedUnits::prefetch(size_t unit, const at::Tensor& full) {
  if (prefetched(unit)) {
    fail(Code::InvalidState, "prefetch: unit " + std::to_string(unit) + " is prefetched already (gather it first)");
  }
  prefetches_.emplace(unit, start_gather(unit, full));
  prefetches_started_ += 1;
}

bool ShardedUnits::prefetched(size_t unit) const { return prefetches_.count(unit) != 0; }

void ShardedUnits::discard_prefetches() {
  std::exception_ptr failed;
  for (auto& [unit, prefetch] : prefetches_) {
    try {
      prefetch.pending->wait();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  prefetches_.clear();
  if (failed) std::rethrow_exception(failed);
}

void ShardedUnits::reduce(size_t unit, const at::Tensor& full_gradients) {
  require_layout(unit, full_gradients, "reduce");
  require_dtype(unit, full_gradients, compute_dtype(unit), "reduce");
  note_call(unit, false);
  at::NoGradGuard no_grad;
  const char* what = reduce_names_[unit].c_str();
  const at::ScalarType reduce = reduce_dtype(unit);
  at::Tensor full = full_gradients.scalar_type() == reduce ? full_gradients : full_gradients.to(reduce);
  // As data parallelism's buckets are filled: each gradient divided by the number of ranks (a tensor
  // divisor, the kernel the transports' fill uses), then summed.
  const auto divisor = at::scalar_tensor(static_cast<double>(partition_.world * partition_.replicas), full.options());
  at::div_out(full, full, divisor);
  const int64_t chunk = partition_.buckets[unit].chunk;
  at::Tensor received;
  if (alone_) {
    received = full;  // its own average
  } else if (distributed::ProcessGroup& group = shard_group(*state_, partition_, what); scatters_like_allreduce(group, full)) {
    received = at::empty({chunk}, full.options());
    group.transport().reduce_scatter(received, full, distributed::ReduceKind::Sum, what);
  } else {
    group.transport().allreduce(full, distributed::ReduceKind::Sum, what);
    received = full.narrow(0, partition_.rank * chunk, chunk);
  }
  // Hybrid sharding: the node's sums, added up over the nodes as the nodes' leaders add data parallelism's.
  if (distributed::ProcessGroup* across = replica_group(*state_, partition_, what)) {
    across->transport().allreduce(received, distributed::ReduceKind::Sum, what);
  }
  auto& held = *partition_.held_pieces;
  bool holds_gradients = false;
  for (size_t k = 0; k < pieces_.size(); ++k) holds_gradients |= pieces_[k].bucket == unit && held[k].defined();
  at::Tensor& gradients = gradient_chunks_[unit];
  if (!gradients.defined()) gradients = at::empty({chunk}, chunk_options(unit));
  if (received.device() != gradients.device()) received = received.to(gradients.device());
  if (holds_gradients) {
    gradients.add_(received);
  } else {
    gradients.copy_(received);
  }
  for (size_t k = 0; k < pieces_.size(); ++k) {
    if (pieces_[k].bucket == unit) held[k] = gradients.narrow(0, pieces_[k].in_chunk, pieces_[k].numel);
  }
}

bool ShardedUnits::gather_gradients(size_t unit, const at::Tensor& full) {
  require_layout(unit, full, "gather_gradients");
  const at::Tensor& gradients = gradient_chunks_[unit];
  if (full.scalar_type() != partition_.parameter_chunks[unit].scalar_type()) {
    fail(Code::Dtype, "gather_gradients: unit " + std::to_string(unit) + "'s buffer is " +
                          c10::toString(full.scalar_type()) + ", its gradients are averaged into its parameters' " +
                          c10::toString(partition_.parameter_chunks[unit].scalar_type()));
  }
  at::NoGradGuard no_grad;
  const auto& held = *partition_.held_pieces;
  bool holds = false;
  for (size_t k = 0; k < pieces_.size(); ++k) holds |= pieces_[k].bucket == unit && held[k].defined();
  const int64_t chunk = partition_.buckets[unit].chunk;
  const at::Tensor mine = holds ? gradients.to(full.device(), full.scalar_type(), /*non_blocking=*/false, /*copy=*/true)
                                : at::zeros({chunk}, full.options());
  if (alone_) {
    full.copy_(mine);
    return holds;
  }
  // A rank whose chunk of the unit is only alignment holds no gradient of it while the others do.
  const std::string what = "ZeRO-3 gradient all-gather of unit " + std::to_string(unit);
  auto anyone = at::empty({1}, at::kDouble);
  anyone.data_ptr<double>()[0] = holds ? 1.0 : 0.0;
  state_->group(what.c_str())->transport().allreduce(anyone, distributed::ReduceKind::Max, what.c_str());
  at::Tensor output = carried(full);
  shard_group(*state_, partition_, what.c_str()).transport().all_gather_async(output, carried(mine), what.c_str())->wait();
  return anyone.data_ptr<double>()[0] != 0.0;
}

bool ShardedUnits::holds(const at::Tensor& parameter) const { return index_.count(parameter.unsafeGetTensorImpl()) != 0; }

std::vector<at::Tensor> ShardedUnits::parameters_in_unit_order() const {
  std::vector<at::Tensor> ordered;
  for (const auto& members : partition_.members) {
    for (size_t member : members) ordered.push_back(trainable_[member].second);
  }
  return ordered;
}

void ShardedUnits::assign(const at::Tensor& given, const std::function<void(int64_t, const at::Tensor&)>& fill) {
  const auto [begin, share] = share_of(given);
  discard_prefetches();
  at::NoGradGuard no_grad;
  if (share.numel() > 0) fill(begin, share);
}

std::pair<int64_t, at::Tensor> ShardedUnits::share_of(const at::Tensor& given) const {
  const auto found = index_.find(given.unsafeGetTensorImpl());
  require_argument(found != index_.end(), "zero_stage 3: the tensor is not a parameter this model shards");
  for (const ZeroPiece& piece : pieces_) {
    if (piece.parameter != found->second) continue;
    return {piece.begin, partition_.parameter_chunks[piece.bucket].narrow(0, piece.in_chunk, piece.numel)};
  }
  return {0, at::empty({0}, partition_.parameter_chunks[places_[found->second].first].options())};
}

void ShardedUnits::for_each_whole(bool keep, const std::function<void(const at::Tensor&, const at::Tensor&)>& each) {
  discard_prefetches();
  std::exception_ptr failed;
  const auto exact_buffer = [&](size_t u) { return at::empty({unit_numel(u)}, unit_options(u)); };
  at::Tensor next = unit_count() > 0 ? exact_buffer(0) : at::Tensor();
  for (size_t u = 0; u < unit_count(); ++u) {
    const at::Tensor full = next;
    gather(u, full);
    // The next unit's gather travels while this one's parameters go to `each` (process 0 writing them).
    if (u + 1 < unit_count()) {
      next = exact_buffer(u + 1);
      prefetch(u + 1, next);
    }
    const auto& members = partition_.members[u];
    for (size_t m = 0; keep && !failed && m < members.size(); ++m) {
      const at::Tensor& parameter = trainable_[members[m]].second;
      try {
        each(parameter, full.narrow(0, partition_.buckets[u].offsets[m], parameter.numel()).view(parameter.sizes()));
      } catch (...) {
        failed = std::current_exception();
      }
    }
  }
  if (failed) std::rethrow_exception(failed);
}

int64_t ShardedUnits::gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& chunk : gradient_chunks_) bytes += chunk.defined() ? static_cast<int64_t>(chunk.nbytes()) : 0;
  return bytes;
}

}  // namespace accel::train
