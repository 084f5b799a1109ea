#include "dist/process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#ifdef ACCEL_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <functional>

#include "core/error.hpp"

#define ACCEL_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace accel::dist {

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
  group->setBackend(cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU,
                    cuda ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO, backend);
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

bool mentions(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

Code classify(const std::string& message) {
  if (mentions(message, "imed out") || mentions(message, "imeout")) return Code::Timeout;
  // Rank 0's store could not listen on the master port: another program holds it (or may not use it).
  if (mentions(message, "failed to bind")) return Code::Io;
  return Code::PeerFailed;
}

std::string seconds(std::chrono::milliseconds timeout) {
  return std::to_string(static_cast<double>(timeout.count()) / 1000.0).substr(0, 6) + " s";
}

}  // namespace

struct ProcessGroup::Impl {
  GroupConfig config;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::string first_failure;
  int64_t started = 0;

  void check_usable(const char* what) const {
    if (!first_failure.empty()) {
      fail(Code::InvalidState, std::string(what) + ": the process group is unusable since an earlier failure: " +
                                   first_failure);
    }
  }

  // Waits for one collective; any failure breaks the group and becomes an accel::Error naming `what`.
  void finish(const char* what, const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      work->wait();
    } catch (const std::exception& error) {
      const std::string message = message_of(error);
      const Code code = classify(message);
      std::string text = std::string(what) + " on rank " + std::to_string(config.rank) + ": ";
      text += code == Code::Timeout
                  ? "timed out after " + seconds(config.timeout) + " waiting for the other ranks (" + message + ")"
                  : "another rank failed or exited (" + message + ")";
      if (first_failure.empty()) first_failure = text;
      fail(code, text);
    }
  }

  c10::intrusive_ptr<c10d::Work> begin(const char* what, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    check_usable(what);
    ++started;
    try {
      return start();
    } catch (const std::exception& error) {
      first_failure = std::string(what) + " on rank " + std::to_string(config.rank) + " could not start: " + message_of(error);
      fail(Code::PeerFailed, first_failure);
    }
  }

  void run(const char* what, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    finish(what, begin(what, start));
  }
};

namespace {

class PendingWork final : public PendingCollective {
 public:
  PendingWork(ProcessGroup::Impl* group, const char* what, c10::intrusive_ptr<c10d::Work> work)
      : group_(group), what_(what), work_(std::move(work)) {}
  void wait() override { group_->finish(what_, work_); }

 private:
  ProcessGroup::Impl* group_;
  const char* what_;
  c10::intrusive_ptr<c10d::Work> work_;
};

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup> ProcessGroup::create(const GroupConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  const std::string where = config.master_addr + ":" + std::to_string(config.master_port);
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = config.master_port;
    store_options.isServer = config.rank == 0;
    store_options.numWorkers = static_cast<size_t>(config.world_size);
    store_options.waitWorkers = false;
    store_options.timeout = config.timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(config.master_addr, store_options);
    impl->store = c10::make_intrusive<c10d::PrefixStore>("accel_default_pg", tcp);
    if (config.backend == "nccl") {
#ifdef ACCEL_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = config.timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, config.rank, config.world_size, options);
      impl->group = as_process_group(impl->store, config, nccl, /*cuda=*/true);
#else
      fail(Code::Unsupported, "backend 'nccl' is not built into this libaccel (LibTorch without CUDA)");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(config.timeout);
      options->devices.push_back(gloo_device(config));
      options->threads = 2;
      auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, config.rank, config.world_size, options);
      impl->group = as_process_group(impl->store, config, gloo, /*cuda=*/false);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    const std::string message = message_of(error);
    const Code code = classify(message);
    fail(code, "rendezvous of rank " + std::to_string(config.rank) + " of " + std::to_string(config.world_size) +
                   " at " + where +
                   (code == Code::Timeout ? " did not complete within " + seconds(config.timeout) : " failed") +
                   ": " + message);
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

int32_t ProcessGroup::rank() const { return impl_->config.rank; }
int32_t ProcessGroup::world_size() const { return impl_->config.world_size; }
bool ProcessGroup::broken() const { return !impl_->first_failure.empty(); }

void ProcessGroup::allreduce(at::Tensor& tensor, ReduceKind kind, const char* what) {
  impl_->run(what, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = kind == ReduceKind::Max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    return impl_->group->allreduce(tensors, options);
  });
}

std::unique_ptr<PendingCollective> ProcessGroup::allreduce_async(at::Tensor& tensor, const char* what) {
  auto work = impl_->begin(what, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return impl_->group->allreduce(tensors);
  });
  return std::make_unique<PendingWork>(impl_.get(), what, std::move(work));
}

int64_t ProcessGroup::collectives_started() const { return impl_->started; }

void ProcessGroup::allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what) {
  impl_->run(what, [&] {
    std::vector<std::vector<at::Tensor>> out{outputs};
    std::vector<at::Tensor> in{input};
    return impl_->group->allgather(out, in);
  });
}

void ProcessGroup::broadcast(at::Tensor& tensor, int32_t root, const char* what) {
  impl_->run(what, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return impl_->group->broadcast(tensors, options);
  });
}

void ProcessGroup::barrier(const char* what) {
  impl_->run(what, [&] { return impl_->group->barrier(); });
}

}  // namespace accel::dist
