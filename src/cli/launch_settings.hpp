// The settings of a launch resolved from their four layers, highest first: flags, the config file, the
// environment (ACCEL_<KEY> for the state's settings: the ranks inherit the launcher's variables), defaults.
// `accel launch` starts what they say, `accel env` shows them with where each came from, `accel config`
// checks what it writes through them.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/config_file.hpp"
#include "cli/launch_flags.hpp"
#include "cli/launch_options.hpp"
#include "core/env.hpp"

namespace accel::cli {

enum class Source { Default, Environment, ConfigFile, Flag };

// "default", "env", "config file", "flag".
const char* source_name(Source source);

struct Setting {
  std::string name;
  std::string value;  // canonical text: integers without sign or leading zeros, booleans true/false
  Source source;
};

struct ResolvedLaunch {
  LaunchOptions options;  // without command and job_key, which the launch adds
  // num_processes, nproc_per_node, num_machines, machine_rank, main_process_ip/port, enable_cpu_affinity,
  // gpu_ids, max_restarts, grace_period_s, with their sources; distributed_type follows from them.
  std::vector<Setting> launch;
  std::string distributed_type;  // NO (one process in all), MULTI_CPU (use_cpu) or MULTI_GPU
  // Every state setting (distributed::state_option_scope), in the scope's order.
  std::vector<Setting> state;
  // No flag nor config file said how many processes: one is started, and `accel launch` says so.
  bool process_count_defaulted = false;
};

// The config file a command line reads: --config-file (which must exist), else default_config_path when a
// file is there. Throws ConfigError for a file that cannot be read or used.
std::optional<ConfigFile> find_config_file(const SettingValues& flags, const EnvLookup& env);

// Resolves flags over config (null: none) over env over defaults. Throws UsageError for a flag's bad value
// and ConfigError for a config file's (naming the file and key), both for what contradicts itself within
// one layer (distributed_type MULTI_CPU with use_cpu false, NO with several processes), for a total of
// processes that the machines cannot share evenly, and for a distributed_type accel does not do (DEEPSPEED,
// FSDP, XLA, ...); UsageError also for an environment variable's bad value, naming it.
ResolvedLaunch resolve_launch(const SettingValues& flags, const ConfigFile* config, const EnvLookup& env);

}  // namespace accel::cli
