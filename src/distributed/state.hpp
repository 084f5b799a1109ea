// The process-wide state shared by every accel_state_t of a process (Accelerate's PartialState):
// launch information, resolved options, device, distributed type, and the process group.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/env.hpp"
#include "core/gradient_state.hpp"
#include "core/options.hpp"
#include "distributed/topology/group_config.hpp"
#include "distributed/group/process_group.hpp"

namespace accel::distributed {

enum class DistributedType { No = 0, MultiCpu = 1, MultiGpu = 2 };

const char* distributed_type_name(DistributedType type);

class State {
 public:
  // Returns the state this process already has (after checking that `options` do not contradict it) or
  // creates it, joining the process group when there are several processes. Thread-safe.
  static std::shared_ptr<State> acquire(const Options* options, const EnvLookup& env);
  // Accelerate's AcceleratorState._reset_state / PartialState._reset_state: `state`, when it is still this
  // process's current one, is retired (the calls of its handles that need it fail with Error(InvalidState)
  // "the state was reset"; its timeline is written now), and the next acquire() makes a new state with any
  // settings. With several processes that state takes over the retired one's process group when it asks for
  // the same group (rank, rendezvous, backend, transport, timeout); otherwise the retired group is closed
  // first, with a barrier, so every rank must make its next state at the same point of the program, as
  // Accelerate's tests do. Not collective itself. Thread-safe.
  static void reset(const std::shared_ptr<State>& state);

  // Writes the timeline, if one is recorded.
  ~State();

  const LaunchInfo& launch() const { return launch_; }
  const ResolvedOptions& options() const { return options_; }
  const std::string& device() const { return device_; }
  DistributedType distributed_type() const { return type_; }
  // The c10d backend: "gloo", "nccl", or "" with one process.
  const std::string& backend() const { return backend_; }
  // What accel_state_backend says: the backend, with "+shm" when all-reduces go through shared memory on
  // one host, "+hier-shm" when through each node's shared memory and the nodes' leaders.
  const std::string& backend_name() const { return backend_name_; }
  bool check_shapes() const { return check_shapes_; }
  // Thread-safe (queries may run while another thread shuts the state down).
  bool broken() const;
  bool shut_down() const;
  // Why the process group broke; empty while it works (or with one process).
  std::string group_failure() const;
  GradientState& gradient_state() { return gradient_state_; }
  // The number of the next background save (0, 1, ...): its keys in the rendezvous store. Counted here, by
  // the state every handle of the process shares, so that it is the same on every rank whichever
  // Accelerator started each save. Thread-safe.
  int64_t next_background_save() { return background_saves_started_.fetch_add(1); }
  bool sync_gradients() const { return gradient_state_.sync_gradients(); }

  // The group for a collective named `what`; nullptr with one process. Throws InvalidState after shutdown.
  ProcessGroup* group(const char* what);
  void wait_for_everyone();
  // Barrier, then the group goes away; states made later start a new one. Idempotent.
  void shutdown();

 private:
  State(ResolvedOptions options, const EnvLookup& env);
  // The group a new state with `config` uses: the retired state's when it is the same group, else a new one
  // (the retired group closed first). Called with the process's state lock held.
  static std::unique_ptr<ProcessGroup> group_for(const GroupConfig& config);

  LaunchInfo launch_;
  ResolvedOptions options_;
  std::string device_;
  DistributedType type_ = DistributedType::No;
  std::string backend_;
  std::string backend_name_;
  bool check_shapes_ = true;
  // Guards group_ and shut_down_: shutdown() moves the group out while accessors may read it.
  mutable std::mutex group_mutex_;
  std::unique_ptr<ProcessGroup> group_;
  GroupConfig group_config_;  // what group_ was made with
  bool shut_down_ = false;
  bool retired_ = false;  // reset(): another state is (or will be) the process's
  GradientState gradient_state_;
  std::atomic<int64_t> background_saves_started_{0};
};

}  // namespace accel::distributed
