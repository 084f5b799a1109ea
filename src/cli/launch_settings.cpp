#include "cli/launch_settings.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>

#include "cli/cpu_shares.hpp"
#include "core/error.hpp"
#include "core/features.hpp"
#include "core/files.hpp"
#include "core/options.hpp"
#include "distributed/state_options.hpp"

namespace accel::cli {

namespace {

constexpr double kMaxGracePeriodS = 86400;

// What one layer says. A flag's bad value is a UsageError, a config file's a ConfigError naming the file.
class Layer {
 public:
  Source source;
  SettingValues values;
  std::string path;  // the config file's

  const std::string* find(const std::string& key) const {
    const auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
  std::string where(const std::string& key) const {
    return source == Source::Flag ? flag_names(key) : "config file " + path + ": " + key;
  }
  [[noreturn]] void fail(const std::string& message) const {
    if (source == Source::Flag) throw UsageError(message);
    throw ConfigError("config file " + path + ": " + message);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const { raise(where(key) + " " + message); }
  // For a message that names the key itself.
  [[noreturn]] void refuse(const std::string& key, const std::string& message) const {
    raise(where(key) + ": " + message);
  }

 private:
  [[noreturn]] void raise(const std::string& text) const {
    if (source == Source::Flag) throw UsageError(text);
    throw ConfigError(text);
  }
};

using Layers = std::vector<Layer>;  // highest first

const Layer* top(const Layers& layers, const std::string& key) {
  for (const auto& layer : layers) {
    if (layer.find(key) != nullptr) return &layer;
  }
  return nullptr;
}

int parse_int(const Layer& layer, const std::string& key, long min, long max) {
  const std::string& text = *layer.find(key);
  const bool digits =
      !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
  errno = 0;
  const long value = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (!digits || errno != 0 || value < min || value > max) {
    layer.fail(key, "expects an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", got '" +
                        text + "'");
  }
  return static_cast<int>(value);
}

bool parse_bool(const Layer& layer, const std::string& key) {
  const auto flag = parse_flag(*layer.find(key));
  if (!flag) layer.fail(key, "expects true or false, got '" + *layer.find(key) + "'");
  return *flag;
}

// A layer's distributed_type stands for settings of its own: MULTI_CPU is use_cpu, MULTI_GPU is not, NO is a
// single process. The layer gets them, unless it says otherwise, which contradicts it. DEEPSPEED and FSDP
// (whose sections the config file turns into the ranks' environment) are MULTI_GPU, or MULTI_CPU with use_cpu.
void apply_distributed_type(Layer& layer) {
  const std::string* given = layer.find("distributed_type");
  if (given == nullptr) return;
  std::string type = upper_case(*given);
  if (type == "DEEPSPEED" || type == "FSDP") {
    type = layer.find("use_cpu") != nullptr && parse_bool(layer, "use_cpu") ? "MULTI_CPU" : "MULTI_GPU";
  }
  if (type != "NO" && type != "MULTI_CPU" && type != "MULTI_GPU") {
    layer.fail("distributed_type", "is " + type +
                                       ": accel trains data parallel (NO, MULTI_CPU, MULTI_GPU), with ZeRO stages 1 and 2 "
                                       "(DEEPSPEED, FSDP); Megatron-LM, TPUs and other devices are Accelerate's alone");
  }
  layer.values["distributed_type"] = type;
  if (type == "NO") {
    if (layer.find("num_processes") != nullptr && parse_int(layer, "num_processes", 1, INT_MAX) != 1) {
      layer.fail("distributed_type NO is one process, and num_processes says " + *layer.find("num_processes"));
    }
    if (layer.find("nproc_per_node") == nullptr) layer.values["num_processes"] = "1";
    return;
  }
  const bool cpu = type == "MULTI_CPU";
  if (layer.find("use_cpu") != nullptr && parse_bool(layer, "use_cpu") != cpu) {
    layer.fail("distributed_type " + type + " contradicts use_cpu " + (cpu ? "false" : "true"));
  }
  layer.values["use_cpu"] = cpu ? "true" : "false";
}

// The GPUs the ranks of this node could use, without loading the CUDA runtime: none in a build without CUDA;
// else those gpu_ids names, else those CUDA_VISIBLE_DEVICES names, else the driver's.
int visible_gpus(const std::string& gpu_ids, const EnvLookup& env) {
  if (!has_feature("cuda")) return 0;
  const auto count_list = [](const std::string& list) { return static_cast<int>(option_list(list).size()); };
  if (gpu_ids != "all") return count_list(gpu_ids);
  if (const auto visible = env("CUDA_VISIBLE_DEVICES")) return count_list(*visible);
  try {
    return static_cast<int>(list_directory("/proc/driver/nvidia/gpus").size());
  } catch (const std::exception&) {
    return 0;
  }
}

// torchrun's --nproc-per-node: a count, or cpu (one per CPU the launcher may use), gpu (one per GPU), auto
// (gpu when there are GPUs and the job is not on the CPU, else cpu).
int processes_per_node(const Layer& flags, bool use_cpu, const std::string& gpu_ids, const EnvLookup& env) {
  const std::string& text = *flags.find("nproc_per_node");
  if (text == "cpu") return usable_cpu_count();
  const int gpus = text == "gpu" || text == "auto" ? visible_gpus(gpu_ids, env) : 0;
  if (text == "gpu" && gpus == 0) flags.fail("nproc_per_node", "gpu: no GPU is visible to this build of accel");
  if (text == "gpu" || text == "auto") return gpus > 0 && !use_cpu ? gpus : usable_cpu_count();
  return parse_int(flags, "nproc_per_node", 1, INT_MAX);
}

std::string checked_gpu_ids(const Layer& layer) {
  const std::string& text = *layer.find("gpu_ids");
  const auto ids = option_list(text);
  const bool listed = !ids.empty() && std::all_of(ids.begin(), ids.end(), [](const std::string& id) {
    return std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); });
  });
  if (text != "all" && !listed) layer.fail("gpu_ids", "expects all or GPU indices separated by commas, got '" + text + "'");
  return text;
}

double parse_seconds(const Layer& layer, const std::string& key, double max) {
  const std::string& text = *layer.find(key);
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(value) || value < 0 || value > max) {
    layer.fail(key, "expects a non-negative number of seconds, got '" + text + "'");
  }
  return value;
}

// The state's settings: defaults < ACCEL_<KEY> < config file < flags; those of the last two go to the ranks.
void resolve_state(const Layers& layers, const EnvLookup& env, ResolvedLaunch& out) {
  const auto& scope = distributed::state_option_scope();
  Options explicit_options({&scope});
  std::map<std::string, Source> sources;
  for (const auto& spec : scope.specs) {
    const Layer* layer = top(layers, spec.key);
    if (layer == nullptr) continue;
    try {
      explicit_options.set_text(spec.key, *layer->find(spec.key));
    } catch (const Error& error) {
      layer->refuse(spec.key, error.what());
    }
    sources[spec.key] = layer->source;
  }
  std::optional<ResolvedOptions> resolved;
  try {
    resolved = resolve_options(scope, &explicit_options, env);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  for (const auto& spec : scope.specs) {
    const std::string text = format_option_value(resolved->value(spec.key));
    const auto given = sources.find(spec.key);
    if (given == sources.end()) {
      const bool from_env = resolved->source(spec.key) == OptionSource::Environment;
      out.state.push_back({spec.key, text, from_env ? Source::Environment : Source::Default});
      continue;
    }
    out.state.push_back({spec.key, text, given->second});
    // The ranks read booleans as Accelerate's do; 1 and 0 are what its launcher exports.
    const std::string exported = spec.type == OptionType::Bool ? (text == "true" ? "1" : "0") : text;
    out.options.rank_variables.emplace_back(option_env_name(spec.key), exported);
  }
}

const Setting& find_setting(const std::vector<Setting>& settings, const std::string& name) {
  return *std::find_if(settings.begin(), settings.end(), [&](const Setting& s) { return s.name == name; });
}

}  // namespace

const char* source_name(Source source) {
  switch (source) {
    case Source::Default: return "default";
    case Source::Environment: return "env";
    case Source::ConfigFile: return "config file";
    case Source::Flag: return "flag";
  }
  return "?";
}

std::optional<ConfigFile> find_config_file(const SettingValues& flags, const EnvLookup& env) {
  if (const auto given = flags.find("config_file"); given != flags.end()) return read_config_file(given->second);
  const std::string path = default_config_path(env);
  if (path.empty() || !path_exists(path)) return std::nullopt;
  return read_config_file(path);
}

ResolvedLaunch resolve_launch(const SettingValues& flags, const ConfigFile* config, const EnvLookup& env) {
  Layers layers{{Source::Flag, flags, ""}};
  if (config != nullptr) layers.push_back({Source::ConfigFile, config->values, config->path});
  for (auto& layer : layers) apply_distributed_type(layer);

  ResolvedLaunch out;
  if (config != nullptr) {
    out.options.rank_variables.insert(out.options.rank_variables.end(), config->rank_variables.begin(),
                                      config->rank_variables.end());
  }
  resolve_state(layers, env, out);
  const bool use_cpu = find_setting(out.state, "use_cpu").value == "true";

  // A launch setting's value and source: the highest layer's, checked by `parse`, else the default.
  const auto resolve = [&](const std::string& key, const std::string& fallback, auto parse) {
    const Layer* layer = top(layers, key);
    Setting setting{key, fallback, Source::Default};
    if (layer != nullptr) setting = {key, parse(*layer), layer->source};
    out.launch.push_back(setting);
    return setting;
  };
  const auto int_in = [](const std::string& key, long min, long max) {
    return [=](const Layer& layer) { return std::to_string(parse_int(layer, key, min, max)); };
  };
  LaunchOptions& options = out.options;
  const Layer& flag_layer = layers.front();

  options.nnodes = std::stoi(resolve("num_machines", "1", int_in("num_machines", 1, INT_MAX)).value);
  if (flag_layer.find("nproc_per_node") != nullptr) {
    const std::string gpu_ids = top(layers, "gpu_ids") ? checked_gpu_ids(*top(layers, "gpu_ids")) : "all";
    options.nproc_per_node = processes_per_node(flag_layer, use_cpu, gpu_ids, env);
    if (static_cast<int64_t>(options.nnodes) * options.nproc_per_node > INT_MAX) {
      throw UsageError("--nnodes times --nproc-per-node is too large");
    }
    out.launch.push_back({"num_processes", std::to_string(options.nnodes * options.nproc_per_node), Source::Flag});
  } else if (const Layer* layer = top(layers, "num_processes")) {
    const int total = parse_int(*layer, "num_processes", 1, INT_MAX);
    if (total % options.nnodes != 0) {
      layer->fail("num_processes", std::to_string(total) + " cannot be shared evenly by the " +
                                       std::to_string(options.nnodes) + " machines (num_machines)");
    }
    options.nproc_per_node = total / options.nnodes;
    out.launch.push_back({"num_processes", std::to_string(total), layer->source});
  } else {
    options.nproc_per_node = 1;
    out.process_count_defaulted = true;
    out.launch.push_back({"num_processes", std::to_string(options.nnodes), Source::Default});
  }
  const Source count_source = out.launch.back().source;
  out.launch.push_back({"nproc_per_node", std::to_string(options.nproc_per_node), count_source});

  options.node_rank = std::stoi(resolve("machine_rank", "0", int_in("machine_rank", 0, INT_MAX)).value);
  options.master_addr = resolve("main_process_ip", "127.0.0.1", [](const Layer& layer) {
                          if (layer.find("main_process_ip")->empty()) layer.fail("main_process_ip", "must not be empty");
                          return *layer.find("main_process_ip");
                        }).value;
  options.master_port = std::stoi(resolve("main_process_port", "29500", int_in("main_process_port", 0, 65535)).value);
  options.cpu_affinity = resolve("enable_cpu_affinity", "false", [](const Layer& layer) {
                           return std::string(parse_bool(layer, "enable_cpu_affinity") ? "true" : "false");
                         }).value == "true";
  const std::string gpu_ids = resolve("gpu_ids", "all", checked_gpu_ids).value;
  if (gpu_ids != "all") options.rank_variables.emplace_back("CUDA_VISIBLE_DEVICES", gpu_ids);
  options.max_restarts = std::stoi(resolve("max_restarts", "0", int_in("max_restarts", 0, INT_MAX)).value);
  options.grace_period_s = std::stod(resolve("grace_period_s", "5", [](const Layer& layer) {
                                       return format_number(parse_seconds(layer, "grace_period_s", kMaxGracePeriodS));
                                     }).value);

  if (options.node_rank >= options.nnodes) {
    throw UsageError("machine_rank (--node-rank) must be below num_machines (--nnodes), " +
                     std::to_string(options.nnodes));
  }
  // Every node would pick a different free port, so the ranks could never meet.
  if (options.master_port == 0 && options.nnodes > 1) {
    throw UsageError("main_process_port (--master-port) 0 only works with a single node; give the port all nodes use");
  }
  const bool one_process = options.nnodes == 1 && options.nproc_per_node == 1;
  out.distributed_type = one_process ? "NO" : use_cpu ? "MULTI_CPU" : "MULTI_GPU";
  return out;
}

}  // namespace accel::cli
