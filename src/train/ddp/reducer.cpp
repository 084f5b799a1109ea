#include "train/ddp/reducer.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <mutex>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "distributed/group/process_group.hpp"
#include "train/ddp/reducer_impl.hpp"

namespace accel::train {

namespace {

// Runs after AccumulateGrad has added this step's gradient into param.grad.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::weak_ptr<Reducer::Impl> reducer, size_t index) : reducer_(std::move(reducer)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (auto reducer = reducer_.lock()) reducer->mark_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<Reducer::Impl> reducer_;
  size_t index_;
};

// The type a bucket of `type` travels as; `type` itself when it is not compressed.
at::ScalarType wire_type(GradCompression compression, at::ScalarType type) {
  if (type != at::kFloat && type != at::kDouble) return type;
  switch (compression) {
    case GradCompression::Fp16: return at::kHalf;
    case GradCompression::Bf16: return at::kBFloat16;
    case GradCompression::None: break;
  }
  return type;
}

// Where the next member of a bucket starts, past `end` elements of `element_size` bytes: on a 16-byte
// boundary, as PyTorch's FSDP lays out its flat parameters. A gradient that is a bucket view (gradient_as_
// bucket_view; the Python binding's eager modules) then has the alignment of a tensor of its own: CUDA's
// vectorised reductions split the elements by their address's alignment, so the same values at another
// alignment can be summed in another order (a norm that clipping takes, of other bits than ZeRO's).
int64_t aligned_offset(int64_t end, int64_t element_size) {
  constexpr int64_t kBytes = 16;
  const int64_t step = std::max<int64_t>(1, kBytes / element_size);
  return (end + step - 1) / step * step;
}

}  // namespace

void Reducer::Impl::assign_buckets() {
  Bucket current;
  int64_t current_bytes = 0;
  auto close = [&] {
    if (current.members.empty()) return;
    buckets.push_back(std::move(current));
    current = Bucket();
    current_bytes = 0;
  };
  for (size_t i = parameters.size(); i-- > 0;) {
    const at::Tensor& parameter = parameters[i].second;
    // One dtype and device per bucket: the flat buffer is a single tensor.
    if (!current.members.empty()) {
      const at::Tensor& first = parameters[current.members.front()].second;
      if (first.scalar_type() != parameter.scalar_type() || first.device() != parameter.device()) close();
    }
    current.offsets.push_back(aligned_offset(current.numel, parameter.element_size()));
    current.members.push_back(i);
    current.numel = current.offsets.back() + parameter.numel();
    current_bytes += bytes_of(parameter);
    const int64_t cap = buckets.empty() ? config.first_bucket_bytes : config.bucket_bytes;
    if (current_bytes >= cap) close();
  }
  close();
  bucket_of.assign(parameters.size(), 0);
  if (config.zero_stage > 0) split_for_zero();
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (size_t member : buckets[b].members) bucket_of[member] = b;
    const at::Tensor& first = parameters[buckets[b].members.front()].second;
    const auto options = first.options().requires_grad(false);
    buckets[b].world_size = at::scalar_tensor(static_cast<double>(state->launch().world_size), options);
    if (scatter) {
      // The caller's gradients are views of the bucket, which stays; accel's own bucket lives only while it is
      // reduce-scattered (launch_scatter), the rank keeping a copy of its chunk.
      if (config.host_gradients) {
        buckets[b].flat = at::zeros({buckets[b].numel}, options);
        buckets[b].owned = buckets[b].flat.narrow(0, partition.rank * buckets[b].chunk, buckets[b].chunk);
      }
      continue;
    }
    // Made once: a compressed step allocates nothing more than an uncompressed one.
    const auto type = wire_type(config.compression, first.scalar_type());
    const bool compressed = type != first.scalar_type();
    // What goes to the other ranks lives in shared memory when the all-reduces go through it: the ranks
    // then reduce it where it is, with no copy into the transport's segment and back.
    at::Tensor shared = transport("DDP bucket allocation")
                            .bucket_empty(buckets[b].numel, compressed ? at::empty({0}, options.dtype(type)) : first);
    if (compressed) {
      buckets[b].flat = at::zeros({buckets[b].numel}, options);
      buckets[b].wire = shared.defined() ? shared : at::empty({buckets[b].numel}, options.dtype(type));
    } else {
      buckets[b].flat = shared.defined() ? shared.zero_() : at::zeros({buckets[b].numel}, options);
    }
  }
}

// Every rank has the same buckets and transport, so every rank refuses alike, at prepare rather than at the
// first backward.
void Reducer::Impl::refuse_what_the_transport_cannot_carry() {
  const bool bfloat16 = std::any_of(buckets.begin(), buckets.end(), [](const Bucket& bucket) {
    return bucket.wire.defined() && bucket.wire.scalar_type() == at::kBFloat16;
  });
  if (bfloat16 && !state->group("DDP gradient all-reduce")->allreduces_bfloat16()) {
    fail(Code::Unsupported,
         "grad_compression 'bf16': this LibTorch's Gloo cannot all-reduce bfloat16; use 'fp16', or keep every rank "
         "on one host with intra_node_transport 'auto' or 'shm' (the shared-memory transport adds bfloat16)");
  }
}

void Reducer::Impl::reset_for_backward() {
  ready.assign(parameters.size(), false);
  locally_unused.assign(parameters.size(), false);
  for (auto& bucket : buckets) {
    bucket.pending = bucket.members.size();
    bucket.work.reset();
    bucket.scatter.reset();
    bucket.landed = false;
  }
  next_bucket = 0;
  finalize_queued = false;
  copied_bytes = 0;
}

void Reducer::Impl::mark_ready(size_t index) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!expect_hooks || ready[index]) return;
  if (!finalize_queued) {
    finalize_queued = true;
    helper_cpu_at_first_gradient = helper_cpu_seconds();
    // The caller's backward ends with finish_backward; accel's own, with autograd's final callback.
    if (!config.host_gradients) torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
  }
  ready[index] = true;
  --buckets[bucket_of[index]].pending;
  launch_ready_buckets();
}

// Buckets start strictly in order, so that every rank issues the same sequence of all-reduces.
void Reducer::Impl::launch_ready_buckets() {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) launch(buckets[next_bucket++]);
}

distributed::Transport& Reducer::Impl::transport(const char* what) { return state->group(what)->transport(); }

// The bucket's average over the ranks, started now; the transport fills the bucket from the gradients.
void Reducer::Impl::launch(Bucket& bucket) {
  distributed::BucketAverage average;
  average.bucket = bucket.flat;
  average.wire = bucket.wire;
  average.divisor = bucket.world_size;
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    const size_t index = bucket.members[m];
    const at::Tensor& parameter = parameters[index].second;
    // A gradient that is its bucket view gets the view back in finalize; the gradient of a parameter this
    // rank did not use must come out of the all-reduce untouched (when no rank used it).
    const bool receives = !config.gradient_as_bucket_view && !locally_unused[index];
    average.members.push_back({bucket.offsets[m], parameter.numel(), parameter.grad(), receives});
  }
  // From the moment the bucket is filled to the all-reduce's end: what the overlap figures are made of, and
  // with the timeline on an event with the bucket's size.
  average.on_filled = [&bucket] {
    bucket.launched_us = timeline::now_us();
    bucket.done_us->store(bucket.launched_us);
  };
  if (scatter) {
    launch_scatter(bucket, std::move(average));
    return;
  }
  std::function<void()> on_complete;
  if (timeline::enabled()) {
    const double bytes = static_cast<double>(bytes_of(bucket.wire.defined() ? bucket.wire : bucket.flat));
    const std::string name = "all-reduce bucket " + std::to_string(&bucket - buckets.data());
    on_complete = [done = bucket.done_us, bytes, name] {
      const double ready_us = done->load();
      const double end_us = timeline::now_us();
      done->store(end_us);
      timeline::record(name, timeline::Track::Communication, ready_us, end_us, {{"bytes", bytes}});
    };
  } else {
    on_complete = [done = bucket.done_us] { done->store(timeline::now_us()); };
  }
  bucket.work = transport("DDP gradient all-reduce").average_async(std::move(average), "DDP gradient all-reduce",
                                                                     std::move(on_complete));
  copied_bytes += bucket.work->copied_in();
}

double Reducer::Impl::helper_cpu_seconds() { return transport("DDP gradient all-reduce").helper_cpu_seconds(); }

// One synchronising backward's figures: backward computed its last gradient at backward_end_us, and its
// wait for the all-reduces ended at wait_end_us.
void Reducer::Impl::account(double backward_end_us, double wait_end_us) {
  GradSyncStats step;
  std::vector<TimeInterval> reductions;
  for (size_t b = 0; b < next_bucket; ++b) {
    reductions.push_back({buckets[b].launched_us, buckets[b].done_us->load()});
    const at::Tensor& sent = buckets[b].wire.defined() ? buckets[b].wire : parameters[buckets[b].members.front()].second;
    step.bytes += buckets[b].numel * static_cast<int64_t>(sent.element_size());
  }
  const UnionLength in_flight = union_length(std::move(reductions), backward_end_us);
  step.syncs = 1;
  step.copied_bytes = copied_bytes;
  step.reduce_ms = in_flight.total_us / 1000;
  step.overlapped_ms = in_flight.before_us / 1000;
  step.exposed_ms = (in_flight.total_us - in_flight.before_us) / 1000;
  step.wait_ms = std::max(0.0, wait_end_us - backward_end_us) / 1000;
  step.helper_cpu_ms = std::max(0.0, helper_cpu_seconds() - helper_cpu_at_first_gradient) * 1000;
  if (timeline::enabled()) {
    timeline::record("all-reduce wait", timeline::Track::Main, backward_end_us, wait_end_us,
                     {{"reduce_us", step.reduce_ms * 1000},
                      {"overlapped_us", step.overlapped_ms * 1000},
                      {"exposed_us", step.exposed_ms * 1000},
                      {"wait_us", step.wait_ms * 1000},
                      {"helper_cpu_us", step.helper_cpu_ms * 1000},
                      {"bytes", static_cast<double>(step.bytes)}});
  }
  const int64_t held = gradient_bytes_held();
  std::lock_guard<std::mutex> lock(report_mutex);
  report.last = step;
  report.total += step;
  report.gradient_bytes = held;
}

// The names of the parameters flagged in `which`, separated by commas.
std::string Reducer::Impl::names_of(const std::vector<bool>& which) const {
  std::string names;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (which[i]) names += (names.empty() ? "" : ", ") + parameters[i].first;
  }
  return names.empty() ? "none" : names;
}

at::Tensor Reducer::Impl::slot(const Bucket& bucket, size_t m) const {
  const at::Tensor& parameter = parameters[bucket.members[m]].second;
  return bucket.flat.narrow(0, bucket.offsets[m], parameter.numel()).view(parameter.sizes());
}

at::Tensor Reducer::Impl::slot(size_t index) const {
  const Bucket& bucket = buckets[bucket_of[index]];
  return slot(bucket, std::find(bucket.members.begin(), bucket.members.end(), index) - bucket.members.begin());
}

// Which of this backward's unused parameters (`unused`, this rank's) no rank used. Collective: a float
// all-reduce of each parameter's count of ranks that used it.
// Starts the all-reduce of how many ranks used each parameter (`unused`: this rank's), queued behind the
// buckets' so that backward's wait covers both, when this backward must tell the parameters that no rank
// used: find_unused_parameters asks every backward, static_graph the first. Every rank asks at the same point.
void Reducer::Impl::start_use_count(const std::vector<bool>& unused) {
  use_count.reset();
  const bool needed = config.static_graph ? !static_unused_everywhere : config.find_unused_parameters;
  if (!needed) return;
  use_count = UseCount{at::empty({static_cast<int64_t>(parameters.size())}, at::kFloat), nullptr};
  auto* ranks = use_count->ranks.data_ptr<float>();
  for (size_t i = 0; i < parameters.size(); ++i) ranks[i] = unused[i] ? 0.0f : 1.0f;
  use_count->work = transport("DDP unused parameter count")
                        .allreduce_async(use_count->ranks, distributed::ReduceKind::Sum, "DDP unused parameter count");
}

// The parameters whose gradient the all-reduce must leave as it is: those no rank used, as DDP's
// finalize_bucket_dense leaves a globally unused parameter's grad (static_graph: the first backward's).
std::vector<bool> Reducer::Impl::gradients_to_keep() {
  if (config.static_graph && static_unused_everywhere) return *static_unused_everywhere;
  std::vector<bool> keep(parameters.size(), false);
  if (!use_count) return keep;
  use_count->work->wait();
  const auto* ranks = use_count->ranks.data_ptr<float>();
  for (size_t i = 0; i < parameters.size(); ++i) keep[i] = ranks[i] == 0.0f;
  if (config.static_graph) static_unused_everywhere = keep;
  return keep;
}

void Reducer::Impl::finalize() {
  // The engine runs this once every gradient of the backward is computed.
  const double backward_end_us = timeline::now_us();
  std::lock_guard<std::mutex> lock(mutex);
  expect_hooks = false;
  std::vector<bool> unused(parameters.size(), false);
  for (size_t i = 0; i < parameters.size(); ++i) unused[i] = !ready[i];
  std::string error;
  if (config.static_graph) {
    if (!static_unused) static_unused = unused;
    if (unused != *static_unused) {
      error = "static_graph: the parameters that receive no gradient changed from the first backward's (" +
              names_of(*static_unused) + ") to " + names_of(unused) + " (prepare the model with find_unused_parameters)";
    }
  } else if (!config.find_unused_parameters && std::find(unused.begin(), unused.end(), true) != unused.end()) {
    error = "parameters received no gradient in this backward: " + names_of(unused) +
            " (if the model does not use them every step, prepare it with find_unused_parameters)";
  }
  // Allowed unused parameters count as ready: launch() puts what they hold in their slots (zeros for no
  // gradient), for the ranks that used them.
  // With gradient_as_bucket_view a gradient is its bucket slot, which the all-reduce averages in place: the
  // slots of this rank's unused parameters are kept aside, to be put back for those that no rank used.
  std::vector<std::pair<size_t, at::Tensor>> unused_slots;
  if (error.empty() && config.gradient_as_bucket_view) {
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (unused[i]) unused_slots.emplace_back(i, slot(i).clone());
    }
  }
  if (error.empty()) {
    locally_unused = unused;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!unused[i]) continue;
      ready[i] = true;
      --buckets[bucket_of[i]].pending;
    }
  }
  launch_ready_buckets();
  if (error.empty()) start_use_count(unused);
  for (size_t b = 0; b < next_bucket; ++b) {
    if (!buckets[b].landed) wait(buckets[b]);
  }
  if (!error.empty()) fail(Code::InvalidArgument, error);
  const std::vector<bool> keep = gradients_to_keep();
  reached_by_no_rank = keep;
  for (const auto& [index, kept] : unused_slots) {
    if (keep[index]) slot(index).copy_(kept);
  }
  const double wait_end_us = timeline::now_us();
  for (auto& bucket : buckets) {
    if (scatter) {
      if (!bucket.landed) place_zero_gradients(bucket);
      continue;
    }
    for (size_t m = 0; m < bucket.members.size(); ++m) {
      if (keep[bucket.members[m]]) continue;
      at::Tensor& parameter = parameters[bucket.members[m]].second;
      auto averaged = slot(bucket, m);
      if (config.gradient_as_bucket_view) {
        // Later backwards accumulate into the bucket itself; launch's copy then finds the same memory.
        parameter.mutable_grad() = averaged;
      } else if (parameter.grad().defined()) {
        copied_bytes += bucket.work->deliver(m, parameter.mutable_grad());
      } else {
        parameter.mutable_grad() = averaged.clone();
        copied_bytes += bytes_of(averaged);
      }
    }
  }
  if (config.zero_stage == 2 && !scatter) drop_gradients_of_others();
  account(backward_end_us, wait_end_us);
}

Reducer::Reducer(std::shared_ptr<distributed::State> state, std::vector<std::pair<std::string, at::Tensor>> parameters,
                 ReducerConfig config)
    : impl_(std::make_shared<Impl>()) {
  impl_->state = std::move(state);
  impl_->parameters = std::move(parameters);
  impl_->config = config;
  impl_->refuse_what_zero_cannot_do();
  if (impl_->config.zero_stage > 0) place_partition(impl_->partition, *impl_->state, impl_->config.zero_hybrid);
  impl_->scatter = impl_->config.zero_stage == 2 && impl_->scatters_bit_identically();
  impl_->assign_buckets();
  impl_->refuse_what_the_transport_cannot_carry();
  impl_->reset_for_backward();
  if (impl_->config.host_gradients) {
    for (auto& bucket : impl_->buckets) {
      for (size_t m = 0; m < bucket.members.size(); ++m) {
        impl_->parameters[bucket.members[m]].second.mutable_grad() = impl_->slot(bucket, m);
      }
    }
    return;
  }
  for (size_t i = 0; i < impl_->parameters.size(); ++i) {
    // Holding the accumulator keeps it (and the hook) alive between iterations.
    auto accumulator = torch::autograd::impl::grad_accumulator(impl_->parameters[i].second);
    impl_->hook_keys.push_back(accumulator->add_post_hook(std::make_unique<GradReadyHook>(impl_, i)));
    impl_->accumulators.push_back(std::move(accumulator));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < impl_->accumulators.size(); ++i) impl_->accumulators[i]->del_post_hook(impl_->hook_keys[i]);
}

void Reducer::prepare_for_backward(bool sync) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->reset_for_backward();
  impl_->expect_hooks = sync;
}

void Reducer::mark_ready(size_t index) { impl_->mark_ready(index); }

bool Reducer::reached_by_no_rank(size_t index) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return index < impl_->reached_by_no_rank.size() && impl_->reached_by_no_rank[index];
}

void Reducer::finish_backward() {
  bool in_backward = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    in_backward = impl_->expect_hooks;
    // A backward in which no gradient was marked still ends here: every parameter then went unused.
    if (in_backward && !impl_->finalize_queued) impl_->helper_cpu_at_first_gradient = impl_->helper_cpu_seconds();
  }
  if (in_backward) impl_->finalize();
}

const ZeroPartition& Reducer::zero_partition() const { return impl_->partition; }

GradSyncReport Reducer::sync_report() const {
  std::lock_guard<std::mutex> lock(impl_->report_mutex);
  return impl_->report;
}

std::vector<std::vector<std::string>> Reducer::bucket_names() const {
  std::vector<std::vector<std::string>> names;
  for (const auto& bucket : impl_->buckets) {
    names.emplace_back();
    for (size_t member : bucket.members) names.back().push_back(impl_->parameters[member].first);
  }
  return names;
}

}  // namespace accel::train
