#include "cli/launch_flags.hpp"

#include <algorithm>

#include "cli/config_file.hpp"

namespace accel::cli {

namespace {

struct FlagSpec {
  const char* flag;     // with '-' between words; '_' is accepted in its place
  const char* setting;  // the setting it sets
  const char* implied;  // the value of a flag that takes none, or nullptr when it takes one
};

// Accelerate's spelling beside torchrun's and accel's where they name the same setting. A setting's name is
// the config file key when the file has one.
constexpr FlagSpec kFlags[] = {
    {"--config-file", "config_file", nullptr},
    {"--num-processes", "num_processes", nullptr},
    {"--nproc-per-node", "nproc_per_node", nullptr},
    {"--num-machines", "num_machines", nullptr},
    {"--nnodes", "num_machines", nullptr},
    {"--machine-rank", "machine_rank", nullptr},
    {"--node-rank", "machine_rank", nullptr},
    {"--main-process-ip", "main_process_ip", nullptr},
    {"--master-addr", "main_process_ip", nullptr},
    {"--main-process-port", "main_process_port", nullptr},
    {"--master-port", "main_process_port", nullptr},
    {"--distributed-type", "distributed_type", nullptr},
    {"--multi-gpu", "distributed_type", "MULTI_GPU"},
    {"--mixed-precision", "mixed_precision", nullptr},
    {"--cpu", "use_cpu", "true"},
    {"--gradient-accumulation-steps", "gradient_accumulation_steps", nullptr},
    {"--enable-cpu-affinity", "enable_cpu_affinity", "true"},
    {"--cpu-affinity", "enable_cpu_affinity", "true"},
    {"--gpu-ids", "gpu_ids", nullptr},
    {"--dynamo-backend", "dynamo_backend", nullptr},
    {"--timeout-s", "timeout_s", nullptr},
    {"--grace-period-s", "grace_period_s", nullptr},
    {"--max-restarts", "max_restarts", nullptr},
    {"--module", "module", "true"},
    {"-m", "module", "true"},
    {"--no-python", "no_python", "true"},
};

bool in_set(const FlagSpec& spec, FlagSet set) {
  const std::string setting = spec.setting;
  switch (set) {
    case FlagSet::Launch: return true;
    case FlagSet::Env: return setting != "module" && setting != "no_python";
    case FlagSet::Config: return setting == "config_file" || is_config_key(setting);
  }
  return false;
}

// "--num_processes" and "--num-processes" alike; a single-dash flag as it is.
std::string normalized(const std::string& flag) {
  if (flag.rfind("--", 0) != 0) return flag;
  std::string name = flag;
  std::replace(name.begin() + 2, name.end(), '_', '-');
  return name;
}

const FlagSpec* find_flag(const std::string& flag, FlagSet set) {
  const std::string name = normalized(flag);
  for (const auto& spec : kFlags) {
    if (name == spec.flag && in_set(spec, set)) return &spec;
  }
  return nullptr;
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv, FlagSet set) {
  CommandLine line;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      line.help = true;
      return line;
    }
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const FlagSpec* spec = find_flag(flag, set);
    if (spec == nullptr) throw UsageError("unknown option '" + flag + "'");
    if (spec->implied != nullptr) {
      if (eq != std::string::npos) throw UsageError(flag + " takes no value");
      line.flags[spec->setting] = spec->implied;
      continue;
    }
    if (eq == std::string::npos && i + 1 >= argc) throw UsageError(flag + " needs a value");
    line.flags[spec->setting] = eq != std::string::npos ? arg.substr(eq + 1) : argv[++i];
  }
  line.program.assign(argv + i, argv + argc);
  if (set != FlagSet::Launch && !line.program.empty()) {
    throw UsageError("unexpected argument '" + line.program.front() + "'");
  }
  if (line.flags.count("num_processes") != 0 && line.flags.count("nproc_per_node") != 0) {
    throw UsageError("give --num_processes (processes of all machines) or --nproc-per-node (of this one), not both");
  }
  return line;
}

std::string flag_names(const std::string& setting) {
  std::string names;
  for (const auto& spec : kFlags) {
    if (setting == spec.setting) names += (names.empty() ? "" : "/") + std::string(spec.flag);
  }
  return names.empty() ? setting : names;
}

}  // namespace accel::cli
