#include "distributed/group/process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <netdb.h>

#include <mutex>
#include <optional>

#include "core/error.hpp"
#include "distributed/c10d/c10d_transport.hpp"
#include "distributed/health/group_health.hpp"
#include "distributed/health/stall_report.hpp"
#include "distributed/shm/shm_transport.hpp"
#include "distributed/store/job_store.hpp"
#include "distributed/store/rendezvous_generation.hpp"
#include "distributed/store/store_server.hpp"
#include "distributed/topology/node_layout.hpp"

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
  // split_by_node()'s, made after the rest and gone before it. The mutex guards the list: broken() may be
  // asked on another thread (State::broken) while prepare makes them.
  std::optional<NodeSplit> split;
  mutable std::mutex subgroups_mutex;
  std::vector<std::unique_ptr<ProcessGroup>> subgroups;

  Transport& transport() const {
    if (shm && shm->active()) return *shm;
    return *backend;
  }

  // The group's health over `store`, its rendezvous and its transports.
  void join(c10::intrusive_ptr<c10d::Store> store) {
    try {
      health = std::make_unique<GroupHealth>(config, std::move(store));
      health->rendezvous();
      backend = C10dTransport::create(*health);
      if (config.backend != "nccl" && config.shared_memory) shm = ShmTransport::create(*health, *backend);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& error) {
      GroupHealth::rendezvous_failed(config, health.get(), message_of(error));
    }
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup> ProcessGroup::create(const GroupConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  require_resolvable(config.master_addr);
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    const int64_t generation = begin_rendezvous_generation();
    if (config.rank == 0) {
      impl->server = std::make_unique<StoreServer>(config.master_addr, config.master_port, config.job_key, generation);
    }
    tcp = c10::make_intrusive<JobStore>(config.master_addr, config.master_port, config.job_key, generation, config.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    GroupHealth::rendezvous_failed(config, nullptr, message_of(error));
  }
  impl->join(c10::make_intrusive<c10d::PrefixStore>("accel_default_pg", tcp));
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

const NodeSplit& ProcessGroup::split_by_node() {
  if (impl_->split) return *impl_->split;
  const GroupConfig& job = impl_->config;
  const auto keys = exchange_node_keys(job.rank, job.world_size, job.group_rank, impl_->health->exchange());
  const std::string uneven = uneven_nodes(keys);
  if (!uneven.empty()) {
    fail(Code::Unsupported, "hybrid sharding splits the state over each node's ranks, so every node needs as many "
                            "ranks, numbered consecutively (as accel launch and torchrun number them): " + uneven);
  }
  const NodeLayout layout = node_layout(job.rank, keys);
  NodeSplit split;
  split.node = layout.node;
  split.nodes = layout.nodes();
  split.local_rank = layout.local_rank;
  split.local_size = layout.local_size();
  // A subgroup of the job's ranks `members` (ascending), over the job's store under `prefix`.
  const auto subgroup = [&](const std::vector<int32_t>& members, int32_t rank, const std::string& prefix,
                            const std::string& name, int32_t within_node) {
    auto impl = std::make_unique<Impl>();
    impl->config = job;
    impl->config.rank = rank;
    impl->config.world_size = static_cast<int32_t>(members.size());
    impl->config.subgroup = name + " (the job's " + rank_list(members) + ")";
    impl->config.job_ranks = members;
    impl->config.within_node = within_node;
    impl->config.shared_memory = within_node >= 0 && uses_shared_memory();
    impl->config.shared_memory_required = false;
    impl->join(c10::make_intrusive<c10d::PrefixStore>(prefix, impl_->health->store()));
    auto made = std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
    ProcessGroup* group = made.get();
    std::lock_guard<std::mutex> lock(impl_->subgroups_mutex);
    impl_->subgroups.push_back(std::move(made));
    return group;
  };
  const std::string node = std::to_string(split.node), local = std::to_string(split.local_rank);
  // On one node its ranks are the job's, in the same order: the job's group serves.
  split.within_node = split.nodes == 1 ? this
                                       : subgroup(layout.members, split.local_rank, "accel_node_" + node,
                                                  "the ranks of node " + node, split.node);
  if (split.nodes > 1) {
    std::vector<int32_t> peers;
    for (int32_t n = 0; n < split.nodes; ++n) peers.push_back(n * split.local_size + split.local_rank);
    split.across_nodes = subgroup(peers, split.node, "accel_local_" + local, "every node's local rank " + local, -1);
  }
  impl_->split = split;
  return *impl_->split;
}

int32_t ProcessGroup::rank() const { return impl_->config.rank; }
int32_t ProcessGroup::world_size() const { return impl_->config.world_size; }
bool ProcessGroup::broken() const { return !first_failure().empty(); }
bool ProcessGroup::uses_shared_memory() const { return impl_->shm && impl_->shm->active(); }
bool ProcessGroup::shared_memory_spans_nodes() const { return impl_->shm && impl_->shm->spans_nodes(); }
bool ProcessGroup::allreduces_bfloat16() const { return impl_->transport().carries_bfloat16(); }
const std::string& ProcessGroup::first_failure() const {
  if (!impl_->health->broken()) {
    std::lock_guard<std::mutex> lock(impl_->subgroups_mutex);
    for (const auto& subgroup : impl_->subgroups) {
      if (subgroup->broken()) return subgroup->first_failure();
    }
  }
  return impl_->health->first_failure();
}

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
