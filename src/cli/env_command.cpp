#include "cli/env_command.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/cpu_shares.hpp"
#include "core/error.hpp"
#include "core/features.hpp"
#include "core/options.hpp"
#include "core/env.hpp"
#include "distributed/state_options.hpp"
#include "distributed/transport_plan.hpp"

namespace accel::cli {

namespace {

constexpr const char* kLaunchVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "ACCEL_RESTART_COUNT",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK", "PMI_SIZE", "OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES",
};

// What a state made in this environment asks for (accel_state_backend says what it got): for CPU tensors,
// as `accel env` cannot tell which device a state would pick without loading LibTorch.
void print_transport(const ResolvedOptions& options) {
  try {
    const LaunchInfo launch = parse_launch_env(process_env());
    if (launch.world_size == 1) {
      std::printf("- all-reduce transport: none (one process)\n");
      return;
    }
    const std::string& requested = options.get_string("backend");
    const auto plan = distributed::plan_transport(launch, requested == "auto" ? "gloo" : requested,
                                                  options.get_string("intra_node_transport"), /*cuda=*/false);
    std::printf("- all-reduce transport of CPU tensors: %s (%s)\n", plan.name.c_str(), plan.reason.c_str());
  } catch (const Error& error) {
    std::printf("- all-reduce transport: refused: %s\n", error.what());
  }
}

}  // namespace

int run_env(int argc, char** argv) {
  (void)argv;
  if (argc > 1) {
    std::fprintf(stderr, "usage: accel env\n");
    return 2;
  }
  std::printf("- accel version: %s\n", version_string());
  std::printf("- LibTorch version: %s\n", torch_version());
  std::printf("- features: %s\n", feature_list().c_str());
  std::printf("- CPU cores online: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  // What taskset, a cpuset or `accel launch --cpu-affinity` left this process.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    std::printf("- CPUs this process may use: %s (%d)\n", cpu_list(allowed).c_str(), CPU_COUNT(&allowed));
  }
  std::printf("- launch environment:\n");
  for (const char* name : kLaunchVariables) {
    if (const char* value = std::getenv(name)) std::printf("    %s=%s\n", name, value);
  }
  const auto& scope = distributed::state_option_scope();
  try {
    const ResolvedOptions options = resolve_options(scope, nullptr, process_env());
    const std::string dump = options.dump();
    std::printf("- state configuration (defaults < ACCEL_* environment):\n");
    for (size_t start = 0; start < dump.size();) {
      const size_t end = dump.find('\n', start);
      std::printf("    %s\n", dump.substr(start, end - start).c_str());
      start = end == std::string::npos ? dump.size() : end + 1;
    }
    print_transport(options);
  } catch (const Error& error) {
    std::fprintf(stderr, "accel env: %s\n", error.what());
    return 1;
  }
  for (const auto& name : unknown_environment_settings(scope, environment_names("ACCEL_"), distributed::non_option_variables())) {
    std::printf("- warning: %s sets nothing (ACCEL_* variables set state settings only)\n", name.c_str());
  }
  return 0;
}

}  // namespace accel::cli
