#include "dist/state.hpp"

#include <chrono>
#include <cmath>

#include "core/device.hpp"
#include "core/error.hpp"

namespace accel::dist {

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

// Like Accelerate, a process has one state: a second one may not ask for other settings.
void refuse_change(const ResolvedOptions& existing, const ResolvedOptions& wanted) {
  for (const char* key : {"use_cpu", "device", "backend", "mixed_precision"}) {
    const std::string before = format_option_value(existing.value(key));
    const std::string after = format_option_value(wanted.value(key));
    if (before != after) {
      fail(Code::InvalidState, std::string("this process already has a state with ") + key + "=" + before +
                                   ", which a second state cannot change to " + after +
                                   " (restart the process to change it)");
    }
  }
}

}  // namespace

std::shared_ptr<State> State::acquire(const Options* options, const EnvLookup& env) {
  std::lock_guard<std::mutex> lock(shared_mutex);
  if (auto existing = shared_state.lock(); existing && !existing->shut_down_) {
    refuse_change(existing->options_, resolve_options(options, env));
    return existing;
  }
  std::shared_ptr<State> created(new State(options, env));
  shared_state = created;
  return created;
}

State::State(const Options* options, const EnvLookup& env)
    : launch_(parse_launch_env(env)), options_(resolve_options(options, env)) {
  device_ = choose_device(options_.get_string("device"), options_.get_bool("use_cpu"), launch_.local_rank);
  check_shapes_ = options_.get_bool("check_shapes");
  if (launch_.world_size == 1) return;
  const bool cuda = device_ != "cpu";
  type_ = cuda ? DistributedType::MultiGpu : DistributedType::MultiCpu;
  const std::string& requested = options_.get_string("backend");
  backend_ = requested == "auto" ? (cuda ? "nccl" : "gloo") : requested;
  if (backend_ == "nccl" && !cuda) {
    fail(Code::Unsupported, "backend 'nccl' needs a CUDA device, but the device is '" + device_ + "'");
  }
  activate_device(device_);
  GroupConfig config;
  config.rank = launch_.rank;
  config.world_size = launch_.world_size;
  config.master_addr = launch_.master_addr;
  config.master_port = launch_.master_port;
  // Options cap timeout_s at 1e9, so the milliseconds (and the nanoseconds c10d and Gloo add to their
  // clocks) stay far inside int64_t.
  config.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(options_.get_double("timeout_s") * 1000.0)));
  config.backend = backend_;
  group_ = ProcessGroup::create(config);
}

bool State::broken() const { return group_ && group_->broken(); }
std::string State::group_failure() const { return group_ ? group_->first_failure() : std::string(); }

ProcessGroup* State::group(const char* what) {
  if (shut_down_) fail(Code::InvalidState, std::string(what) + ": the state was shut down");
  return group_.get();
}

void State::wait_for_everyone() {
  if (auto* pg = group("wait_for_everyone")) pg->barrier("wait_for_everyone");
}

void State::shutdown() {
  if (shut_down_) return;
  auto group = std::move(group_);
  shut_down_ = true;
  if (group && !group->broken()) group->barrier("shutdown");
}

}  // namespace accel::dist
