#include "distributed/group/process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <netdb.h>

#include "core/error.hpp"
#include "distributed/c10d/c10d_transport.hpp"
#include "distributed/health/group_health.hpp"
#include "distributed/shm/shm_transport.hpp"
#include "distributed/store/job_store.hpp"
#include "distributed/store/rendezvous_generation.hpp"
#include "distributed/store/store_server.hpp"

namespace accel::distributed {

namespace {

// c10d retries an address it cannot resolve until the timeout; a name that does not resolve now is a
// configuration error, so it fails at once.
void require_resolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (status != 0) {
    fail(Code::Environment, "the master address '" + host + "' (MASTER_ADDR) cannot be resolved: " + gai_strerror(status));
  }
  freeaddrinfo(found);
}

}  // namespace

// Declared in the order of their making, so that they go in the reverse: the shared-memory thread first,
// the store's server (rank 0's) last.
struct ProcessGroup::Impl {
  GroupConfig config;
  // Rank 0's: the job's store, listening only on MASTER_ADDR's address.
  std::unique_ptr<StoreServer> server;
  std::unique_ptr<GroupHealth> health;
  std::unique_ptr<C10dTransport> backend;
  std::unique_ptr<ShmTransport> shm;

  Transport& transport() const {
    if (shm && shm->active()) return *shm;
    return *backend;
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup> ProcessGroup::create(const GroupConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  require_resolvable(config.master_addr);
  try {
    const int64_t generation = begin_rendezvous_generation();
    if (config.rank == 0) {
      impl->server = std::make_unique<StoreServer>(config.master_addr, config.master_port, config.job_key, generation);
    }
    auto tcp = c10::make_intrusive<JobStore>(config.master_addr, config.master_port, config.job_key, generation,
                                             config.timeout);
    impl->health = std::make_unique<GroupHealth>(config, c10::make_intrusive<c10d::PrefixStore>("accel_default_pg", tcp));
    impl->health->rendezvous();
    impl->backend = C10dTransport::create(*impl->health);
    if (config.backend != "nccl" && config.shared_memory) impl->shm = ShmTransport::create(*impl->health, *impl->backend);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    GroupHealth::rendezvous_failed(config, impl->health.get(), message_of(error));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

int32_t ProcessGroup::rank() const { return impl_->config.rank; }
int32_t ProcessGroup::world_size() const { return impl_->config.world_size; }
bool ProcessGroup::broken() const { return impl_->health->broken(); }
bool ProcessGroup::uses_shared_memory() const { return impl_->shm && impl_->shm->active(); }
bool ProcessGroup::shared_memory_spans_nodes() const { return impl_->shm && impl_->shm->spans_nodes(); }
bool ProcessGroup::allreduces_bfloat16() const { return impl_->transport().carries_bfloat16(); }
const std::string& ProcessGroup::first_failure() const { return impl_->health->first_failure(); }

Transport& ProcessGroup::transport() { return impl_->transport(); }

int64_t ProcessGroup::collectives_started() const { return impl_->health->started(); }
void ProcessGroup::announce(const char* operation) { impl_->health->announce(operation); }
const std::string& ProcessGroup::announced_operation() const { return impl_->health->announced(); }

void ProcessGroup::allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what) {
  impl_->backend->allgather(outputs, input, what);
}

void ProcessGroup::broadcast(at::Tensor& tensor, int32_t root, const char* what) {
  impl_->backend->broadcast(tensor, root, what);
}


}  // namespace accel::distributed
