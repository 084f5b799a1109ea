#include "cli/env_command.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cli/config_file.hpp"
#include "cli/cpu_shares.hpp"
#include "cli/launch_flags.hpp"
#include "cli/launch_settings.hpp"
#include "cli/python_program.hpp"
#include "core/env.hpp"
#include "core/error.hpp"
#include "core/features.hpp"
#include "core/options.hpp"
#include "distributed/transport/transport_plan.hpp"
#include "distributed/state_options.hpp"

namespace accel::cli {

namespace {

constexpr const char* kLaunchVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "ACCEL_RESTART_COUNT",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK", "PMI_SIZE", "OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES",
};

constexpr const char kUsage[] =
    "usage: accel env [launch options]\n"
    "Prints the version, features and CPUs, the launch environment, the Python that .py programs run\n"
    "with, the config file, and every setting a launch with these options would use, with where it\n"
    "comes from (flag > config file > ACCEL_* environment > default); see 'accel launch --help'.\n";

void print_config_file(const ConfigFile* config, const EnvLookup& env) {
  if (config == nullptr) {
    const std::string path = default_config_path(env);
    std::printf("- config file: none (%s)\n",
                path.empty() ? "neither XDG_CONFIG_HOME nor HOME is set" : (path + " does not exist").c_str());
    return;
  }
  std::printf("- config file: %s\n", config->path.c_str());
  if (config->ignored.empty()) return;
  std::string keys;
  for (const auto& key : config->ignored) keys += (keys.empty() ? "" : ", ") + key;
  std::printf("    passed over (Accelerate's, for what accel does not do): %s\n", keys.c_str());
}

void print_settings(const ResolvedLaunch& resolved) {
  std::printf("- launch configuration (defaults < config file < flags):\n");
  std::printf("    distributed_type=%s (from the processes and use_cpu)\n", resolved.distributed_type.c_str());
  for (const auto& setting : resolved.launch) {
    std::printf("    %s=%s (%s)\n", setting.name.c_str(), setting.value.c_str(), source_name(setting.source));
  }
  std::printf("- state configuration (defaults < ACCEL_* environment < config file < flags):\n");
  for (const auto& setting : resolved.state) {
    std::printf("    %s=%s (%s)\n", setting.name.c_str(), setting.value.c_str(), source_name(setting.source));
  }
}

// What a state made in this environment, or by the launch the flags describe when this process is not a
// rank, asks for (accel_state_backend says what it got): for CPU tensors, as `accel env` cannot tell which
// device a state would pick without loading LibTorch.
void print_transport(const ResolvedLaunch& resolved) {
  try {
    LaunchInfo launch = parse_launch_env(process_env());
    if (launch.launcher == "none") {
      launch.world_size = resolved.options.nnodes * resolved.options.nproc_per_node;
      launch.local_world_size = resolved.options.nproc_per_node;
    }
    if (launch.world_size == 1) {
      std::printf("- all-reduce transport: none (one process)\n");
      return;
    }
    const auto setting = [&](const char* name) -> const std::string& {
      for (const auto& s : resolved.state) {
        if (s.name == name) return s.value;
      }
      throw std::logic_error(std::string("no state setting ") + name);
    };
    const std::string& requested = setting("backend");
    const auto plan = distributed::plan_transport(launch, requested == "auto" ? "gloo" : requested,
                                                  setting("intra_node_transport"), /*cuda=*/false);
    std::printf("- all-reduce transport of CPU tensors: %s (%s)\n", plan.name.c_str(), plan.reason.c_str());
  } catch (const Error& error) {
    std::printf("- all-reduce transport: refused: %s\n", error.what());
  }
}

}  // namespace

int run_env(int argc, char** argv) {
  CommandLine line;
  try {
    line = parse_command_line(argc, argv, FlagSet::Env);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "accel env: %s\n%s", error.what(), kUsage);
    return 2;
  }
  if (line.help) {
    std::fputs(kUsage, stdout);
    return 0;
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
  const EnvLookup env = process_env();
  const Interpreter python = choose_python(env);
  std::printf("- Python for .py programs and -m: %s (%s)\n", python.path.c_str(), python.why.c_str());
  try {
    const auto config = find_config_file(line.flags, env);
    print_config_file(config ? &*config : nullptr, env);
    const ResolvedLaunch resolved = resolve_launch(line.flags, config ? &*config : nullptr, env);
    print_settings(resolved);
    print_transport(resolved);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel env: %s\n", error.what());
    return 1;
  }
  const auto& scope = distributed::state_option_scope();
  for (const auto& name : unknown_environment_settings(scope, environment_names("ACCEL_"), distributed::non_option_variables())) {
    std::printf("- warning: %s sets nothing (ACCEL_* variables set state settings only)\n", name.c_str());
  }
  return 0;
}

}  // namespace accel::cli
