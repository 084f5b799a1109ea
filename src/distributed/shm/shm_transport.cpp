#include "distributed/shm/shm_transport.hpp"

#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "distributed/c10d/c10d_transport.hpp"
#include "distributed/topology/node_layout.hpp"
#include "distributed/health/group_health.hpp"
#include "distributed/shm/shm_thread.hpp"

namespace accel::distributed {

namespace {

// The kinds of the collective records (stall_report.hpp).
constexpr const char* kShmAllReduce = "shm-all-reduce";
constexpr const char* kShmReduceScatter = "shm-reduce-scatter";
constexpr const char* kShmAllGather = "shm-all-gather";

// The first segment's room per rank; a larger tensor makes a larger one (the reducer's buckets do at the
// first step).
constexpr size_t kInitialSlotBytes = 1 << 20;

}  // namespace

struct ShmTransport::Impl {
  GroupHealth& health;
  C10dTransport& backend;
  // Who shares a node with whom, and across nodes the leaders' Gloo group and their step (every segment's).
  NodeLayout layout;
  std::unique_ptr<LeadersGroup> leaders;
  LeaderStep leader_step;
  std::unique_ptr<SharedMemoryAllreduce> shm;
  // Segments holding tensors of the callers' (bucket_empty); a tensor keeps its segment mapped.
  // Weak: the tensors keep them, so that a model's buckets go away with the model.
  std::vector<std::weak_ptr<SharedMemoryAllreduce>> residents;
  int resident_segments_made = 0;  // numbers the next one's store keys
  bool resident_refusal_said = false;
  std::unique_ptr<ShmThread> thread;  // after shm and residents: stops before the segments go

  Impl(GroupHealth& group_health, C10dTransport& c10d) : health(group_health), backend(c10d) {}

  // Every rank comes here together: the segment's negotiation told them all the same.
  void give_up(const std::string& why) {
    thread.reset();
    shm.reset();
    if (health.config().shared_memory_required) {
      fail(Code::Io, "intra_node_transport 'shm': the shared-memory segment could not be set up: " + why);
    }
    if (health.config().rank == 0) {
      std::fprintf(stderr, "accel: all-reduces go through Gloo instead of shared memory: %s\n", why.c_str());
    }
  }

  // Frees the shared-memory thread from a wait in whichever segment it is.
  void cancel_waits() {
    if (shm) shm->cancel();
    for (const auto& weak : residents) {
      if (const auto resident = weak.lock()) resident->cancel();
    }
  }

  // The element type of a tensor that shared memory carries now.
  std::optional<ShmElement> carried(const at::Tensor& tensor) const {
    return shm ? shm_element(tensor) : std::nullopt;
  }

  // The resident segment that holds `tensor` and its offset there; nullptr when none does.
  std::pair<SharedMemoryAllreduce*, size_t> resident_of(const at::Tensor& tensor) const {
    const char* data = static_cast<const char*>(tensor.data_ptr());
    for (const auto& weak : residents) {
      const auto resident = weak.lock();
      if (!resident) continue;
      const char* slot = resident->resident_data();
      if (data >= slot && resident->fits(static_cast<size_t>(data - slot) + static_cast<size_t>(tensor.nbytes()))) {
        return {resident.get(), static_cast<size_t>(data - slot)};
      }
    }
    return {nullptr, 0};
  }

  struct Started {
    CollectiveRecord record;
    std::shared_future<void> done;
  };

  // Hands the job to the shared-memory thread, first making room in the segment for a job that is not in a
  // resident one; nullopt when the room could not be made and shared memory was given up: the caller then
  // goes to the backend, on_complete untouched.
  std::optional<Started> submit(std::unique_ptr<ShmThread::Job> job, const char* what, const char* kind,
                                std::function<void()>& on_complete) {
    health.check_usable(what);
    CollectiveRecord record = health.open_record(what, kind);
    const auto bytes = static_cast<size_t>(job->tensor.nbytes());
    if (job->resident == nullptr && !shm->fits(bytes)) {
      thread->drain();
      std::string why_not;
      bool reserved = false;
      health.conclude(
          record,
          [&]() -> std::optional<std::string> {
            reserved = shm->reserve(bytes, &why_not);
            return std::nullopt;
          },
          [] {});
      if (!reserved) {
        give_up(why_not);
        return std::nullopt;
      }
    }
    job->on_complete = std::move(on_complete);
    return Started{std::move(record), thread->submit(std::move(job))};
  }

  void finish(const Started& work) {
    health.conclude(
        work.record,
        [&] {
          return health.watch(work.record, [&](std::chrono::milliseconds slice) {
            if (work.done.wait_for(slice) != std::future_status::ready) return false;
            work.done.get();
            return true;
          });
        },
        [this] { cancel_waits(); });  // a barrier that no rank will ever reach
  }

  // Starts `job`: a PendingCollective of `Pending`'s, a FailedCollective when it could not start, or nullptr
  // when shared memory was just given up.
  template <class Pending, class... Extra>
  std::unique_ptr<Pending> start(std::unique_ptr<ShmThread::Job> job, const char* what, const char* kind,
                                 std::function<void()>& on_complete, std::unique_ptr<Pending>& failed, Extra&&... extra) {
    try {
      if (auto started = submit(std::move(job), what, kind, on_complete)) {
        return std::make_unique<Pending>(this, std::move(*started), std::forward<Extra>(extra)...);
      }
    } catch (const std::exception&) {
      failed = std::make_unique<Pending>(std::current_exception());
    }
    return nullptr;
  }

  std::unique_ptr<ShmThread::Job> job_for(ShmThread::Operation operation, const at::Tensor& input, ShmElement element,
                                          ReduceKind kind) {
    auto job = std::make_unique<ShmThread::Job>();
    job->operation = operation;
    job->tensor = input.contiguous();
    job->element = element;
    job->kind = kind;
    return job;
  }

  // Where an average can take this rank's share of the bucket from the gradients (ShmTransport's comment):
  // a resident bucket on one node of float32 or float64, sent uncompressed, each member receiving, with a
  // dense gradient of the bucket's type.
  std::optional<std::pair<int64_t, int64_t>> private_share(const BucketAverage& average) const {
    const auto element = carried(average.bucket);
    if (!element || average.wire.defined() || !average.bucket.is_contiguous()) return std::nullopt;
    for (const BucketMember& member : average.members) {
      const at::Tensor& gradient = member.gradient;
      if (!member.receives || !gradient.defined() || !gradient.is_contiguous() ||
          gradient.scalar_type() != average.bucket.scalar_type() || gradient.device() != average.bucket.device()) {
        return std::nullopt;
      }
    }
    const auto resident = resident_of(average.bucket).first;
    if (resident == nullptr || !resident->averages_privately(*element)) return std::nullopt;
    return resident->share_of(average.bucket.numel(), *element);
  }
};

namespace {

class PendingShared final : public PendingCollective {
 public:
  PendingShared(ShmTransport::Impl* transport, ShmTransport::Impl::Started started)
      : transport_(transport), started_(std::move(started)) {}
  explicit PendingShared(std::exception_ptr error) : error_(std::move(error)) {}
  void wait() override {
    if (error_) std::rethrow_exception(error_);
    transport_->finish(started_);
  }

 private:
  ShmTransport::Impl* transport_ = nullptr;
  ShmTransport::Impl::Started started_;
  std::exception_ptr error_;
};

// The average of a bucket whose share [share.first, share.second) the gradients hold.
class PendingPrivateAverage final : public PendingAverage {
 public:
  PendingPrivateAverage(ShmTransport::Impl* transport, ShmTransport::Impl::Started started, BucketAverage average,
                        std::pair<int64_t, int64_t> share, int64_t copied)
      : transport_(transport),
        started_(std::move(started)),
        average_(std::move(average)),
        share_(share),
        copied_(copied) {}
  explicit PendingPrivateAverage(std::exception_ptr error) : error_(std::move(error)) {}

  void wait() override {
    if (error_) std::rethrow_exception(error_);
    transport_->finish(started_);
  }
  int64_t copied_in() const override { return copied_; }
  // The member's elements outside the share, from its slot.
  int64_t deliver(size_t member, at::Tensor& gradient) override {
    const BucketMember& slot_of = average_.members[member];
    const int64_t begin = slot_of.offset, end = begin + slot_of.numel;
    const auto flat_gradient = gradient.view({-1});
    int64_t copied = 0;
    const std::pair<int64_t, int64_t> runs[] = {{begin, std::clamp(share_.first, begin, end)},
                                                {std::clamp(share_.second, begin, end), end}};
    for (const auto& [from, to] : runs) {
      if (from >= to) continue;
      flat_gradient.narrow(0, from - begin, to - from).copy_(average_.bucket.narrow(0, from, to - from));
      copied += to - from;
    }
    return copied * static_cast<int64_t>(flat_gradient.element_size());
  }

 private:
  ShmTransport::Impl* transport_ = nullptr;
  ShmTransport::Impl::Started started_;
  BucketAverage average_;
  std::pair<int64_t, int64_t> share_{0, 0};
  int64_t copied_ = 0;
  std::exception_ptr error_;
};

}  // namespace

ShmTransport::ShmTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShmTransport::~ShmTransport() = default;

std::unique_ptr<ShmTransport> ShmTransport::create(GroupHealth& health, C10dTransport& backend) {
  auto impl = std::make_unique<Impl>(health, backend);
  const GroupConfig& config = health.config();
  impl->layout = discover_nodes(config.rank, config.world_size, config.group_rank, health.exchange());
  // The launcher of that node removes what a crashed job left of its segments (shm_names.hpp).
  if (config.within_node >= 0) impl->layout.node = config.within_node;
  if (impl->layout.largest_node == 1) {
    impl->give_up("every node has a single rank");
    return nullptr;
  }
  if (impl->layout.nodes() > 1) {
    impl->leaders = std::make_unique<LeadersGroup>(impl->layout);
    impl->leader_step = [leaders = impl->leaders.get()](void* data, int64_t numel, ShmElement type, ReduceKind kind) {
      leaders->allreduce(data, numel, type, kind);
    };
  }
  std::string why_not;
  impl->shm = SharedMemoryAllreduce::create(impl->layout, config.master_port, config.timeout, health.exchange(),
                                            kInitialSlotBytes, impl->leader_step, &why_not);
  if (!impl->shm) {
    impl->give_up(why_not);
    return nullptr;
  }
  if (impl->layout.nodes() > 1 && impl->layout.leader()) impl->leaders->connect(health, impl->layout);
  Impl* raw = impl.get();
  impl->thread = std::make_unique<ShmThread>(*impl->shm, [raw] { raw->cancel_waits(); });
  return std::unique_ptr<ShmTransport>(new ShmTransport(std::move(impl)));
}

bool ShmTransport::active() const { return impl_->shm != nullptr; }
bool ShmTransport::spans_nodes() const { return impl_->shm && impl_->shm->nodes() > 1; }

std::unique_ptr<PendingCollective> ShmTransport::allreduce_async(at::Tensor& tensor, ReduceKind kind, const char* what,
                                                                 std::function<void()> on_complete) {
  if (const auto element = impl_->carried(tensor)) {
    auto job = impl_->job_for(ShmThread::Operation::AllReduce, tensor, *element, kind);
    if (!job->tensor.is_same(tensor)) job->target = tensor;
    std::tie(job->resident, job->offset) = impl_->resident_of(job->tensor);
    std::unique_ptr<PendingShared> failed;
    if (auto pending = impl_->start(std::move(job), what, kShmAllReduce, on_complete, failed)) return pending;
    if (failed) return failed;
  }
  return impl_->backend.allreduce_async(tensor, kind, what, std::move(on_complete));
}

std::unique_ptr<PendingAverage> ShmTransport::average_async(BucketAverage average, const char* what,
                                                            std::function<void()> on_complete) {
  const auto share = impl_->private_share(average);
  if (!share) return average_in_bucket(*this, std::move(average), what, std::move(on_complete));
  const int64_t copied = fill_bucket(average, share->first, share->second);
  PrivateAverage own;
  own.divisor = average.divisor.item<double>();
  for (const BucketMember& member : average.members) {
    const int64_t begin = std::max(member.offset, share->first);
    const int64_t end = std::min(member.offset + member.numel, share->second);
    if (begin >= end) continue;
    own.own.push_back({begin, end,
                       static_cast<char*>(member.gradient.data_ptr()) +
                           (begin - member.offset) * static_cast<int64_t>(member.gradient.element_size())});
    own.holders.push_back(member.gradient);
  }
  if (average.on_filled) average.on_filled();
  auto job = impl_->job_for(ShmThread::Operation::AllReduce, average.bucket, *shm_element(average.bucket),
                            ReduceKind::Sum);
  std::tie(job->resident, job->offset) = impl_->resident_of(job->tensor);
  job->average = std::move(own);
  std::unique_ptr<PendingPrivateAverage> failed;
  auto pending =
      impl_->start(std::move(job), what, kShmAllReduce, on_complete, failed, std::move(average), *share, copied);
  // A resident job needs no room in the segment, so shared memory is never given up here: it started or failed.
  if (pending) return pending;
  return failed;
}

std::unique_ptr<PendingCollective> ShmTransport::reduce_scatter_async(at::Tensor& output, const at::Tensor& input,
                                                                      ReduceKind kind, const char* what) {
  if (const auto element = impl_->carried(input)) {
    auto job = impl_->job_for(ShmThread::Operation::ReduceScatter, input, *element, kind);
    job->output = output;
    job->output_begin = impl_->health.config().rank * output.numel();
    std::function<void()> no_callback;
    std::unique_ptr<PendingShared> failed;
    if (auto pending = impl_->start(std::move(job), what, kShmReduceScatter, no_callback, failed)) return pending;
    if (failed) return failed;
  }
  return impl_->backend.reduce_scatter_async(output, input, kind, what);
}

std::unique_ptr<PendingCollective> ShmTransport::all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                                  const char* what) {
  if (const auto element = spans_nodes() ? std::nullopt : impl_->carried(input)) {
    auto job = impl_->job_for(ShmThread::Operation::AllGather, input, *element, ReduceKind::Sum);
    job->output = output;
    std::function<void()> no_callback;
    std::unique_ptr<PendingShared> failed;
    if (auto pending = impl_->start(std::move(job), what, kShmAllGather, no_callback, failed)) return pending;
    if (failed) return failed;
  }
  return impl_->backend.all_gather_async(output, input, what);
}

at::Tensor ShmTransport::bucket_empty(int64_t numel, const at::Tensor& like) {
  const auto element = impl_->carried(like);
  if (!element) return {};
  const GroupConfig& config = impl_->health.config();
  const size_t bytes = static_cast<size_t>(numel) * shm_element_size(*element);
  std::string why_not;
  const SharedMemoryAllreduce::Resident resident{impl_->resident_segments_made++};
  std::shared_ptr<SharedMemoryAllreduce> segment;
  try {
    segment = SharedMemoryAllreduce::create(impl_->layout, config.master_port, config.timeout, impl_->health.exchange(),
                                            bytes, impl_->leader_step, &why_not, &resident);
  } catch (const std::exception& error) {
    fail(classify(message_of(error)), "setting up shared memory for gradient buckets: " + message_of(error));
  }
  if (!segment) {
    // Every rank learnt the same; the tensors then go through the shared segment with copies, as others do.
    if (config.rank == 0 && !impl_->resident_refusal_said) {
      impl_->resident_refusal_said = true;
      std::fprintf(stderr, "accel: gradient buckets are copied through shared memory: %s\n", why_not.c_str());
    }
    return {};
  }
  auto& residents = impl_->residents;
  residents.erase(std::remove_if(residents.begin(), residents.end(),
                                 [](const std::weak_ptr<SharedMemoryAllreduce>& weak) { return weak.expired(); }),
                  residents.end());
  residents.push_back(segment);
  return at::from_blob(
      segment->resident_data(), {numel}, [segment](void*) {}, like.options().requires_grad(false));
}

bool ShmTransport::carries_bfloat16() const {
  return (impl_->shm && impl_->shm->nodes() == 1) || impl_->backend.carries_bfloat16();
}

double ShmTransport::helper_cpu_seconds() const { return impl_->thread ? impl_->thread->cpu_seconds() : 0.0; }

}  // namespace accel::distributed
