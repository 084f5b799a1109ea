// The launch config file: Accelerate's default_config.yaml (as `accelerate config` writes it, or the JSON of
// `accelerate config default`), read and written with yaml-cpp. accel reads the keys it shares with
// Accelerate, plus gradient_accumulation_steps of its own, turns the section of distributed_type FSDP or
// DEEPSPEED into the ranks' environment as Accelerate's launcher does, and passes over Accelerate's keys for
// what it does not do (TPU's, IPEX's, ...) as long as they ask for nothing it would have to refuse.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "cli/launch_flags.hpp"
#include "cli/launch_options.hpp"
#include "core/env.hpp"

namespace accel::cli {

// A config file that cannot be used: the message names the file and, where there is one, the key.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ConfigFile {
  std::string path;
  // The settings it gives, as text, by key (dynamo_config's dynamo_backend as "dynamo_backend"). A key
  // whose value is null (Accelerate's None) is left out, as Accelerate leaves it unset.
  SettingValues values;
  // Accelerate's keys present in the file that accel has no use for, in file order.
  std::vector<std::string> ignored;
  // What Accelerate's launcher exports for distributed_type FSDP or DEEPSPEED, from the file's fsdp_config
  // (ACCELERATE_USE_FSDP=true, FSDP_SHARDING_STRATEGY, ...) or deepspeed_config (ACCELERATE_USE_DEEPSPEED=true,
  // ACCELERATE_DEEPSPEED_ZERO_STAGE): the Python package reads them as Accelerate's does.
  Variables rank_variables;
};

// Whether key is one that accel reads from a config file and `accel config` writes.
bool is_config_key(const std::string& key);

// Where `accel config` writes and `accel launch` looks when given no --config-file:
// $XDG_CONFIG_HOME/accel/default_config.yaml, else $HOME/.config/accel/default_config.yaml; "" when neither
// variable is set.
std::string default_config_path(const EnvLookup& env);

// Throws ConfigError when the file cannot be read, is not YAML, is not a mapping, has a key neither accel nor
// Accelerate knows, holds a list or mapping where a single value belongs, or asks for what accel does not do
// (compute_environment other than LOCAL_MACHINE; a deepspeed_config_file, DeepSpeed's own JSON). Values are
// checked where they are resolved.
ConfigFile read_config_file(const std::string& path);

// Writes values (every key is_config_key accepts may be present; use_cpu and enable_cpu_affinity as
// "true"/"false") as Accelerate's `accelerate config` would, keys sorted, with Accelerate's other keys at the
// values its questions default to, so that Accelerate reads the file too (but for gradient_accumulation_steps,
// which it does not know). The parent directories are made; the file is replaced whole or not at all. Throws
// Error(Io) naming the file.
void write_config_file(const std::string& path, const SettingValues& values);

}  // namespace accel::cli
