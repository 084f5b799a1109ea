#include "distributed/c10d/c10d_transport.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/version.h>

#ifdef ACCEL_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/ops/from_blob.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "distributed/health/group_health.hpp"
#include "distributed/health/stall_report.hpp"

#define ACCEL_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace accel::distributed {

namespace {

// The one place where 1.13 (Gloo and NCCL are ProcessGroups) and 2.x (they are Backends behind a
// dispatching ProcessGroup) differ.
template <class BackendT>
c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const GroupConfig& config,
                                                        c10::intrusive_ptr<BackendT> backend, bool cuda) {
#if ACCEL_TORCH_VERSION < 200
  (void)store;
  (void)config;
  (void)cuda;
  return backend;
#else
#if ACCEL_TORCH_VERSION < 206
  auto group = c10::make_intrusive<c10d::ProcessGroup>(
      store, config.rank, config.world_size,
      c10::make_intrusive<c10d::ProcessGroup::Options>(cuda ? "nccl" : "gloo", config.timeout));
#else
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, config.rank, config.world_size);
  group->setDefaultBackend(cuda ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO);
#endif
  if (cuda) {
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
  } else {
    // Gloo moves CUDA tensors too (through host memory): registering it for both device types is what lets
    // several ranks share one GPU, where NCCL refuses ("Duplicate GPU detected").
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
#ifdef ACCEL_WITH_CUDA
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, backend);
#endif
  }
  return group;
#endif
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const GroupConfig& config) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (is_loopback(config.master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const GroupConfig& config, int rank, int size) {
  auto options = c10d::ProcessGroupGloo::Options::create(config.timeout);
  options->devices.push_back(gloo_device(config));
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

c10d::ReduceOp reduce_op(ReduceKind kind) { return kind == ReduceKind::Max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM; }

// The kinds of the collective records (stall_report.hpp): what each collective can meet on the other ranks.
constexpr const char* kAllReduce = "all-reduce";
constexpr const char* kReduceScatter = "reduce-scatter";
constexpr const char* kAllGather = "all-gather";
constexpr const char* kBroadcast = "broadcast";

// Work::wait with a timeout throws when the time passes first, and the work goes on, to be waited on again.
bool work_done(c10d::Work& work, std::chrono::milliseconds slice) {
  try {
    work.wait(slice);
    return true;
  } catch (const std::exception&) {
    if (!work.isCompleted()) return false;
  }
  work.wait();  // done meanwhile: returns, or throws the work's own error
  return true;
}

// `n` views of `count` consecutive elements each, the r-th from element r * count of the 1-d `flat`.
std::vector<at::Tensor> pieces(const at::Tensor& flat, int64_t n, int64_t count) {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < n; ++r) parts.push_back(flat.narrow(0, r * count, count));
  return parts;
}

// What a collective that only moves bits (a broadcast, an all-gather) hands to the backend: a bfloat16 tensor
// as the float16 view of the same memory when the backend cannot carry bfloat16 (LibTorch 1.13's Gloo: "Invalid
// scalar type"; it has no int16 either), the tensor itself otherwise. Moved, not computed with, its bits arrive
// as they left.
at::Tensor as_carried(const at::Tensor& tensor, bool carries_bfloat16) {
  return tensor.scalar_type() == at::kBFloat16 && !carries_bfloat16 ? tensor.view(at::kHalf) : tensor;
}

}  // namespace

struct C10dTransport::Impl {
  GroupHealth& health;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // A backend operation given up for good (the ranks out of step): no rank will ever join it.
  bool abandoned = false;

  explicit Impl(GroupHealth& group_health) : health(group_health) {}
  // ProcessGroupGloo's destructor waits for its operations, and an abandoned one ends only at the timeout
  // (30 minutes by default), or when every other rank's process is gone, which may itself be waiting here:
  // the group is left to the end of the process instead.
  ~Impl() {
    if (abandoned) (void)group.release();
  }

  struct Started {
    CollectiveRecord record;
    c10::intrusive_ptr<c10d::Work> work;
  };

  Started begin(const char* what, const char* kind, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    health.check_usable(what);
    CollectiveRecord record = health.open_record(what, kind);
    try {
      return {std::move(record), start()};
    } catch (const std::exception& error) {
      health.could_not_start(what, message_of(error));
    }
  }

  // Waits for one collective; any failure breaks the group and becomes an accel::Error naming its `what`.
  void finish(const CollectiveRecord& record, const c10::intrusive_ptr<c10d::Work>& work) {
    health.conclude(
        record,
        [&]() -> std::optional<std::string> {
          // NCCL's wait only orders streams (or, under NCCL_BLOCKING_WAIT, treats a timeout as fatal): no slices.
          if (health.config().backend == "nccl") {
            work->wait();
            return std::nullopt;
          }
          return health.watch(record, [&](std::chrono::milliseconds slice) { return work_done(*work, slice); });
        },
        [this] { abandoned = true; });
  }

  void run(const char* what, const char* kind, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    const timeline::Span span(what);
    const Started started = begin(what, kind, start);
    finish(started.record, started.work);
  }
};

namespace {

// `then` (optional) runs once the work is done: what turns a backend's collective into the one asked for.
class PendingWork final : public PendingCollective {
 public:
  PendingWork(C10dTransport::Impl* transport, C10dTransport::Impl::Started started, std::function<void()> then = {})
      : transport_(transport), started_(std::move(started)), then_(std::move(then)) {}
  void wait() override {
    transport_->finish(started_.record, started_.work);
    if (then_) then_();
  }

 private:
  C10dTransport::Impl* transport_;
  C10dTransport::Impl::Started started_;
  std::function<void()> then_;
};

}  // namespace

C10dTransport::C10dTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
C10dTransport::~C10dTransport() = default;

std::unique_ptr<C10dTransport> C10dTransport::create(GroupHealth& health) {
  auto impl = std::make_unique<Impl>(health);
  const GroupConfig& config = health.config();
  if (config.backend == "nccl") {
#ifdef ACCEL_WITH_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = config.timeout;
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(health.store(), config.rank, config.world_size, options);
    impl->group = as_process_group(health.store(), config, nccl, /*cuda=*/true);
#else
    fail(Code::Unsupported, "backend 'nccl' is not built into this libaccel (LibTorch without CUDA)");
#endif
  } else {
    auto gloo = make_gloo(health.store(), config, config.rank, config.world_size);
    impl->group = as_process_group(health.store(), config, gloo, /*cuda=*/false);
  }
  return std::unique_ptr<C10dTransport>(new C10dTransport(std::move(impl)));
}

std::unique_ptr<PendingCollective> C10dTransport::allreduce_async(at::Tensor& tensor, ReduceKind kind,
                                                                  const char* what,
                                                                  std::function<void()> on_complete) {
  // No elements, no collective here or below: Gloo divides by the element count in some of its algorithms (a
  // zero-element all-gather raised SIGFPE on its thread) and would send nothing anyway.
  if (tensor.numel() == 0) {
    if (on_complete) on_complete();
    return std::make_unique<CompletedCollective>();
  }
  auto started = impl_->begin(what, kAllReduce, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = reduce_op(kind);
    return impl_->group->allreduce(tensors, options);
  });
  if (on_complete) {
    // Runs on the backend's thread when the data has arrived, which is what a timeline wants to show (the
    // caller's wait may come much later).
    started.work->getFuture()->addCallback([on_complete](c10::ivalue::Future&) { on_complete(); });
  }
  return std::make_unique<PendingWork>(impl_.get(), std::move(started));
}

std::unique_ptr<PendingCollective> C10dTransport::reduce_scatter_async(at::Tensor& output, const at::Tensor& input,
                                                                       ReduceKind kind, const char* what) {
  const int64_t world = impl_->health.config().world_size;
  const int64_t count = output.numel();
  if (count == 0) return std::make_unique<CompletedCollective>();
  if (impl_->health.config().backend == "nccl") {
    auto started = impl_->begin(what, kReduceScatter, [&] {
      std::vector<at::Tensor> outputs{output};
      std::vector<std::vector<at::Tensor>> inputs{pieces(input, world, count)};
      c10d::ReduceScatterOptions options;
      options.reduceOp = reduce_op(kind);
      return impl_->group->reduce_scatter(outputs, inputs, options);
    });
    return std::make_unique<PendingWork>(impl_.get(), std::move(started));
  }
  at::Tensor whole = input.clone();
  auto started = impl_->begin(what, kReduceScatter, [&] {
    std::vector<at::Tensor> tensors{whole};
    c10d::AllreduceOptions options;
    options.reduceOp = reduce_op(kind);
    return impl_->group->allreduce(tensors, options);
  });
  const int64_t first = impl_->health.config().rank * count;
  return std::make_unique<PendingWork>(impl_.get(), std::move(started), [whole, output, first, count]() mutable {
    output.copy_(whole.narrow(0, first, count));
  });
}

std::unique_ptr<PendingCollective> C10dTransport::all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                                   const char* what) {
  const int64_t world = impl_->health.config().world_size;
  if (input.numel() == 0) return std::make_unique<CompletedCollective>();
  auto started = impl_->begin(what, kAllGather, [&] {
    std::vector<std::vector<at::Tensor>> outputs{pieces(as_carried(output, carries_bfloat16()), world, input.numel())};
    std::vector<at::Tensor> inputs{as_carried(input, carries_bfloat16())};
    return impl_->group->allgather(outputs, inputs);
  });
  return std::make_unique<PendingWork>(impl_.get(), std::move(started));
}

bool C10dTransport::carries_bfloat16() const {
  return impl_->health.config().backend == "nccl" || ACCEL_TORCH_VERSION >= 200;
}

void C10dTransport::allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what) {
  if (input.numel() == 0) return;
  impl_->run(what, kAllGather, [&] {
    std::vector<std::vector<at::Tensor>> out(1);
    for (const at::Tensor& output : outputs) out[0].push_back(as_carried(output, carries_bfloat16()));
    std::vector<at::Tensor> in{as_carried(input, carries_bfloat16())};
    return impl_->group->allgather(out, in);
  });
}

void C10dTransport::broadcast(at::Tensor& tensor, int32_t root, const char* what) {
  if (tensor.numel() == 0) return;
  impl_->run(what, kBroadcast, [&] {
    std::vector<at::Tensor> tensors{as_carried(tensor, carries_bfloat16())};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return impl_->group->broadcast(tensors, options);
  });
}


struct LeadersGroup::Impl {
  // Gloo itself: its Backend in 2.x has the same allreduce.
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::string failed;  // "the all-reduce between the nodes' leaders (ranks 0, 2) failed"
};

LeadersGroup::LeadersGroup(const NodeLayout& layout) : impl_(std::make_unique<Impl>()) {
  // A failure names the leaders: with two nodes, the one that went away.
  impl_->failed = "the all-reduce between the nodes' leaders (" + rank_list(layout.leaders) + ") failed";
}

LeadersGroup::~LeadersGroup() = default;

void LeadersGroup::connect(GroupHealth& health, const NodeLayout& layout) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("accel_leaders", health.store());
  impl_->gloo = make_gloo(store, health.config(), layout.node, layout.nodes());
}

void LeadersGroup::allreduce(void* data, int64_t numel, ShmElement type, ReduceKind kind) {
  if (numel == 0) return;
  std::vector<at::Tensor> tensors{at::from_blob(data, {numel}, at::TensorOptions().dtype(scalar_type(type)))};
  c10d::AllreduceOptions options;
  options.reduceOp = reduce_op(kind);
  try {
    impl_->gloo->allreduce(tensors, options)->wait();
  } catch (const std::exception& error) {
    const std::string message = message_of(error);
    fail(classify(message), impl_->failed + " (" + message + ")");
  }
}

}  // namespace accel::distributed
