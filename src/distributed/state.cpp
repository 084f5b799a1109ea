#include "distributed/state.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <unistd.h>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"
#include "distributed/call_agreement.hpp"
#include "distributed/transport/transport_plan.hpp"
#include "distributed/state_options.hpp"

namespace accel::distributed {

const char* distributed_type_name(DistributedType type) {
  switch (type) {
    case DistributedType::No: return "NO";
    case DistributedType::MultiCpu: return "MULTI_CPU";
    case DistributedType::MultiGpu: return "MULTI_GPU";
  }
  return "NO";
}

namespace {

std::mutex shared_mutex;
std::weak_ptr<State> shared_state;
// The process that made shared_state: a child forked after it (Python's debug_launcher, multiprocessing)
// inherits the pointer but not the process group's threads and sockets, and makes a state of its own.
pid_t shared_state_pid = 0;
// The last state reset() retired, whose process group the next state may take over.
std::weak_ptr<State> retired_state;

bool same_group(const GroupConfig& a, const GroupConfig& b) {
  return a.rank == b.rank && a.world_size == b.world_size && a.master_addr == b.master_addr &&
         a.master_port == b.master_port && a.job_key == b.job_key && a.timeout == b.timeout && a.backend == b.backend &&
         a.shared_memory == b.shared_memory && a.group_rank == b.group_rank &&
         a.shared_memory_required == b.shared_memory_required;
}

// Like Accelerate, a process has one state: a second one may not ask for other settings.
void refuse_change(const ResolvedOptions& existing, const ResolvedOptions& wanted) {
  const std::string key = existing.first_difference(wanted, per_handle_options());
  if (key.empty()) return;
  fail(Code::InvalidState, "this process already has a state with " + key + "=" +
                               format_option_value(existing.value(key)) + ", which a second state cannot change to " +
                               format_option_value(wanted.value(key)) + " (restart the process to change it)");
}

// An ACCEL_* variable that sets nothing is most likely a typo or a setting of another object (ACCEL_LR):
// say so once, on the first state, instead of ignoring it silently.
void warn_about_unknown_variables() {
  const auto unknown = unknown_environment_settings(state_option_scope(), environment_names("ACCEL_"),
                                                    non_option_variables());
  if (unknown.empty()) return;
  std::string keys;
  for (const auto& spec : state_option_scope().specs) keys += (keys.empty() ? "" : ", ") + option_env_name(spec.key);
  for (const auto& name : unknown) {
    std::fprintf(stderr,
                 "accel: warning: %s is not a state setting and is ignored (environment variables set only %s; "
                 "other objects take their settings through an options object)\n",
                 name.c_str(), keys.c_str());
  }
}

// Settings Accelerate has and accel cannot honour: refused with the reason, whether or not a state exists.
void refuse_unsupported(const ResolvedOptions& options) {
  std::string backend = options.get_string("dynamo_backend");
  std::transform(backend.begin(), backend.end(), backend.begin(), [](unsigned char c) { return std::tolower(c); });
  if (backend != "no") {
    fail(Code::Unsupported, "dynamo_backend '" + options.get_string("dynamo_backend") +
                                "': LibTorch has no TorchDynamo (torch.compile is Python); accel runs the TorchScript "
                                "the model was saved as, so optimise it in Python before saving (torch.jit.script, "
                                "torch.jit.freeze or torch.jit.optimize_for_inference for inference) and leave "
                                "dynamo_backend at \"no\"; for what torch.compile's \"reduce-overhead\" mode gives, "
                                "the training step as CUDA graphs, use a train step with cuda_graph on "
                                "(accel_train_step_new)");
  }
}

}  // namespace

std::shared_ptr<State> State::acquire(const Options* options, const EnvLookup& env) {
  std::lock_guard<std::mutex> lock(shared_mutex);
  const auto wanted = resolve_options(state_option_scope(), options, env);
  refuse_unsupported(wanted);
  if (shared_state_pid != getpid()) {
    shared_state.reset();
    retired_state.reset();
  }
  if (auto existing = shared_state.lock(); existing && !existing->shut_down()) {
    refuse_change(existing->options_, wanted);
    return existing;
  }
  static std::once_flag warned;
  std::call_once(warned, warn_about_unknown_variables);
  std::shared_ptr<State> created(new State(wanted, env));
  shared_state = created;
  shared_state_pid = getpid();
  return created;
}

State::State(ResolvedOptions options, const EnvLookup& env)
    : launch_(parse_launch_env(env)), options_(std::move(options)) {
  device_ = choose_device(options_.get_string("device"), options_.get_bool("use_cpu"), launch_.local_rank);
  check_shapes_ = options_.get_bool("check_shapes");
  if (const auto& directory = options_.get_string("timeline"); !directory.empty()) {
    timeline::start(directory, launch_.rank, options_.get_int("timeline_steps"));
  }
  // Also for one process: code that allocates on the bare "cuda" device (DLPack consumers, user kernels)
  // then lands on the state's device.
  activate_device(device_);
  if (launch_.world_size == 1) return;
  const bool cuda = device_ != "cpu";
  type_ = cuda ? DistributedType::MultiGpu : DistributedType::MultiCpu;
  const std::string& requested = options_.get_string("backend");
  // NCCL refuses two ranks on one GPU ("Duplicate GPU detected"); Gloo moves CUDA tensors too.
  const bool ranks_share_a_gpu = cuda && launch_.local_world_size > cuda_device_count();
  backend_ = requested == "auto" ? (cuda && !ranks_share_a_gpu ? "nccl" : "gloo") : requested;
  if (backend_ == "nccl" && !cuda) {
    fail(Code::Unsupported, "backend 'nccl' needs a CUDA device, but the device is '" + device_ + "'");
  }
  if (backend_ == "nccl" && ranks_share_a_gpu) {
    fail(Code::Unsupported, "backend 'nccl' cannot serve " + std::to_string(launch_.local_world_size) +
                                " local ranks on " + std::to_string(cuda_device_count()) +
                                " GPU(s) (NCCL refuses two ranks on one GPU): use backend 'gloo' or 'auto'");
  }
  // Shared memory serves the all-reduces of CPU tensors among the ranks of each node; explicitly asked for,
  // it must be possible.
  const TransportPlan plan = plan_transport(launch_, backend_, options_.get_string("intra_node_transport"), cuda);
  GroupConfig config;
  config.rank = launch_.rank;
  config.world_size = launch_.world_size;
  config.master_addr = launch_.master_addr;
  config.master_port = launch_.master_port;
  config.job_key = launch_.job_key;
  // Options cap timeout_s at 1e9, so the milliseconds (and the nanoseconds c10d and Gloo add to their
  // clocks) stay far inside int64_t.
  config.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(options_.get_double("timeout_s") * 1000.0)));
  config.backend = backend_;
  config.shared_memory = plan.shared_memory;
  config.shared_memory_required = plan.required;
  config.group_rank = launch_.group_rank;
  group_config_ = config;
  group_ = group_for(config);
  backend_name_ = !group_->uses_shared_memory()        ? backend_
                  : group_->shared_memory_spans_nodes() ? backend_ + "+hier-shm"
                                                        : backend_ + "+shm";
}

void State::reset(const std::shared_ptr<State>& state) {
  std::lock_guard<std::mutex> lock(shared_mutex);
  if (shared_state.lock() != state) return;  // reset already: another state is the process's
  {
    std::lock_guard<std::mutex> group_lock(state->group_mutex_);
    state->retired_ = true;
  }
  // The timeline is the process's: the retired state writes its part now, the next one starts its own.
  timeline::stop();
  shared_state.reset();
  retired_state = state;
}

std::unique_ptr<ProcessGroup> State::group_for(const GroupConfig& config) {
  if (auto retired = retired_state.lock()) {
    std::unique_ptr<ProcessGroup> group;
    {
      std::lock_guard<std::mutex> lock(retired->group_mutex_);
      group = std::move(retired->group_);
    }
    if (group && !group->broken()) {
      if (same_group(config, retired->group_config_)) return group;
      // Every rank is here, making its next state: none uses the old group (and rank 0's store) after this.
      agree(*retired, *group, Call(CallKind::Shutdown));
    }
  }
  return ProcessGroup::create(config);
}

bool State::broken() const {
  std::lock_guard<std::mutex> lock(group_mutex_);
  return group_ && group_->broken();
}

bool State::shut_down() const {
  std::lock_guard<std::mutex> lock(group_mutex_);
  return shut_down_;
}

std::string State::group_failure() const {
  std::lock_guard<std::mutex> lock(group_mutex_);
  return group_ ? group_->first_failure() : std::string();
}

ProcessGroup* State::group(const char* what) {
  std::lock_guard<std::mutex> lock(group_mutex_);
  if (shut_down_) fail(Code::InvalidState, std::string(what) + ": the state was shut down");
  if (retired_) {
    fail(Code::InvalidState, std::string(what) + ": the state was reset (AcceleratorState._reset_state): objects "
                                                 "made before the reset cannot be used; make them again");
  }
  return group_.get();
}

// An agreement is a barrier (every rank's row must arrive), and one that finds a rank in another
// collective fails every rank at once instead of leaving them in different collectives.
void State::wait_for_everyone() {
  if (auto* pg = group("wait_for_everyone")) agree(*this, *pg, Call(CallKind::WaitForEveryone));
}

void State::shutdown() {
  std::unique_ptr<ProcessGroup> group;
  {
    std::lock_guard<std::mutex> lock(group_mutex_);
    if (shut_down_) return;
    group = std::move(group_);
    shut_down_ = true;
  }
  if (group && !group->broken()) agree(*this, *group, Call(CallKind::Shutdown));
  if (!retired_) timeline::stop();
}

State::~State() {
  // A state freed without shutdown still leaves its trace; a destructor cannot report a failed write. A
  // retired state wrote its part when reset, and the timeline is its successor's now.
  if (retired_) return;
  try {
    timeline::stop();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel: the timeline was not written: %s\n", error.what());
  }
}

}  // namespace accel::distributed
