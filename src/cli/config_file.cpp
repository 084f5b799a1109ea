#include "cli/config_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/files.hpp"

namespace accel::cli {

namespace {

// Keys accel reads (dynamo_backend sits inside dynamo_config, or at the top in files older than Accelerate's
// dynamo_config).
constexpr const char* kReadKeys[] = {
    "distributed_type", "num_processes",       "num_machines",        "machine_rank",
    "main_process_ip",  "main_process_port",   "mixed_precision",     "use_cpu",
    "gpu_ids",          "enable_cpu_affinity", "gradient_accumulation_steps", "dynamo_backend",
};

// Accelerate's keys (ClusterConfig's fields) for what accel does not do; passed over, and named by `accel env`.
constexpr const char* kPassedOverKeys[] = {
    "debug",       "downcast_bf16",   "main_training_function", "rdzv_backend",  "same_network",
    "ipex_config", "mpirun_config",   "fp8_config",
    "tp_config",   "megatron_lm_config", "tpu_name",            "tpu_zone",      "tpu_use_cluster",
    "tpu_use_sudo", "command_file",   "commands",               "tpu_vm",        "tpu_env",
};

bool listed(const char* const* begin, const char* const* end, const std::string& key) {
  return std::any_of(begin, end, [&](const char* known) { return key == known; });
}

std::string key_list() {
  std::string out;
  for (const char* key : kReadKeys) out += (out.empty() ? "" : ", ") + std::string(key);
  return out;
}

// A key's single value as text, or nothing for null.
std::optional<std::string> scalar(const ConfigFile& file, const std::string& key, const YAML::Node& node) {
  if (node.IsNull()) return std::nullopt;
  if (!node.IsScalar()) {
    throw ConfigError("config file " + file.path + ": " + key + " expects a single value, not a " +
                      (node.IsSequence() ? "list" : "mapping"));
  }
  return node.Scalar();
}

// A section's keys and single values (a list, as Accelerate's fsdp_transformer_layer_cls_to_wrap may be,
// joined with commas); null values are left out.
std::map<std::string, std::string> section_values(const ConfigFile& file, const std::string& section,
                                                  const YAML::Node& node) {
  std::map<std::string, std::string> values;
  if (node.IsNull()) return values;
  if (!node.IsMap()) throw ConfigError("config file " + file.path + ": " + section + " expects a mapping");
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) throw ConfigError("config file " + file.path + ": a key of " + section + " is not a single word");
    const std::string key = entry.first.Scalar();
    if (entry.second.IsSequence()) {
      std::string joined;
      for (const auto& item : entry.second) joined += (joined.empty() ? "" : ",") + item.as<std::string>();
      values[key] = joined;
    } else if (auto value = scalar(file, section + "." + key, entry.second)) {
      values[key] = *value;
    }
  }
  return values;
}

// fsdp_config's keys and the variables Accelerate's launcher exports for them.
const std::map<std::string, std::string> kFsdpVariables = {
    {"fsdp_sharding_strategy", "FSDP_SHARDING_STRATEGY"},
    {"fsdp_offload_params", "FSDP_OFFLOAD_PARAMS"},
    {"fsdp_min_num_params", "FSDP_MIN_NUM_PARAMS"},
    {"fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"},
    {"fsdp_transformer_layer_cls_to_wrap", "FSDP_TRANSFORMER_CLS_TO_WRAP"},
    {"fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"},
    // Accelerate's older name, which its launcher still reads (and prefers when both are given).
    {"fsdp_backward_prefetch_policy", "FSDP_BACKWARD_PREFETCH"},
    {"fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"},
    {"fsdp_forward_prefetch", "FSDP_FORWARD_PREFETCH"},
    {"fsdp_use_orig_params", "FSDP_USE_ORIG_PARAMS"},
    {"fsdp_cpu_ram_efficient_loading", "FSDP_CPU_RAM_EFFICIENT_LOADING"},
    {"fsdp_sync_module_states", "FSDP_SYNC_MODULE_STATES"},
    {"fsdp_activation_checkpointing", "FSDP_ACTIVATION_CHECKPOINTING"},
    {"fsdp_reshard_after_forward", "FSDP_RESHARD_AFTER_FORWARD"},
    {"fsdp_version", "FSDP_VERSION"},
};

// deepspeed_config's keys accel reads and the variables Accelerate's launcher exports for them.
const std::map<std::string, std::string> kDeepSpeedVariables = {
    {"zero_stage", "ACCELERATE_DEEPSPEED_ZERO_STAGE"},
    {"offload_optimizer_device", "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"},
    {"offload_param_device", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"},
};

// The ranks' environment for the file's distributed_type, from its section; the section's other keys (and
// the section of the type not chosen) are ignored, as accel env lists them.
void export_plugin_section(ConfigFile& file, const std::map<std::string, std::map<std::string, std::string>>& sections) {
  const auto type = file.values.find("distributed_type");
  const std::string chosen = type == file.values.end() ? "" : upper_case(type->second);
  for (const auto& [section, values] : sections) {
    const bool used = (section == "fsdp_config" && chosen == "FSDP") || (section == "deepspeed_config" && chosen == "DEEPSPEED");
    if (used && section == "fsdp_config") file.rank_variables.emplace_back("ACCELERATE_USE_FSDP", "true");
    if (used && section == "deepspeed_config") file.rank_variables.emplace_back("ACCELERATE_USE_DEEPSPEED", "true");
    for (const auto& [key, value] : values) {
      if (used && section == "deepspeed_config" && key == "deepspeed_config_file") {
        throw ConfigError("config file " + file.path + ": deepspeed_config.deepspeed_config_file is DeepSpeed's own "
                          "configuration, which accel does not read; give zero_stage (1, 2 or 3) in deepspeed_config");
      }
      const auto fsdp = kFsdpVariables.find(key);
      const bool superseded = key == "fsdp_backward_prefetch" && values.count("fsdp_backward_prefetch_policy") != 0;
      if (used && section == "fsdp_config" && fsdp != kFsdpVariables.end() && !superseded) {
        file.rank_variables.emplace_back(fsdp->second, value);
      } else if (used && section == "deepspeed_config" && kDeepSpeedVariables.count(key) != 0) {
        file.rank_variables.emplace_back(kDeepSpeedVariables.at(key), value);
      } else {
        file.ignored.push_back(section + "." + key);
      }
    }
  }
}

void read_dynamo_config(ConfigFile& file, const YAML::Node& node) {
  if (node.IsNull()) return;
  if (!node.IsMap()) throw ConfigError("config file " + file.path + ": dynamo_config expects a mapping");
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) throw ConfigError("config file " + file.path + ": a key is not a single word");
    const std::string key = entry.first.Scalar();
    if (key != "dynamo_backend") {
      file.ignored.push_back("dynamo_config." + key);
    } else if (auto value = scalar(file, "dynamo_config.dynamo_backend", entry.second)) {
      file.values["dynamo_backend"] = *value;
    }
  }
}

// YAML 1.1, which Accelerate's PyYAML reads, takes these plain words as booleans or null and these texts as
// numbers: such strings are quoted, as PyYAML quotes them ('no', '0').
bool needs_quotes(const std::string& text) {
  static const char* const kWords[] = {"y",  "yes", "n",   "no",  "true", "false", "on",
                                       "off", "null", "~"};
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text.empty() || std::any_of(std::begin(kWords), std::end(kWords), [&](const char* w) { return lower == w; })) {
    return true;
  }
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0';
}

void emit_text(YAML::Emitter& out, const std::string& text) {
  if (needs_quotes(text)) out << YAML::SingleQuoted;
  out << text;
}

}  // namespace

bool is_config_key(const std::string& key) { return listed(std::begin(kReadKeys), std::end(kReadKeys), key); }

std::string default_config_path(const EnvLookup& env) {
  const auto xdg = env("XDG_CONFIG_HOME");
  if (xdg && !xdg->empty()) return join_path(*xdg, "accel/default_config.yaml");
  const auto home = env("HOME");
  if (home && !home->empty()) return join_path(*home, ".config/accel/default_config.yaml");
  return "";
}

ConfigFile read_config_file(const std::string& path) {
  ConfigFile file;
  file.path = path;
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception& error) {
    throw ConfigError(std::string("cannot read the config file: ") + error.what());
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    throw ConfigError("config file " + path + " is not YAML: " + error.what());
  }
  if (root.IsNull()) return file;
  if (!root.IsMap()) throw ConfigError("config file " + path + " is not a mapping of keys to values");
  std::optional<bool> legacy_fp16;
  std::map<std::string, std::map<std::string, std::string>> sections;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) throw ConfigError("config file " + path + ": a key is not a single word");
    const std::string key = entry.first.Scalar();
    if (is_config_key(key)) {
      if (auto value = scalar(file, key, entry.second)) file.values[key] = *value;
    } else if (key == "dynamo_config") {
      read_dynamo_config(file, entry.second);
    } else if (key == "fsdp_config" || key == "deepspeed_config") {
      sections[key] = section_values(file, key, entry.second);
    } else if (key == "compute_environment") {
      const auto value = scalar(file, key, entry.second);
      if (value && *value != "LOCAL_MACHINE") {
        throw ConfigError("config file " + path + ": compute_environment " + *value +
                          " is not something accel launches on (it starts processes on this machine: LOCAL_MACHINE)");
      }
    } else if (key == "fp16") {
      // Accelerate's files before mixed_precision: "fp16: true" meant fp16.
      if (auto value = scalar(file, key, entry.second)) legacy_fp16 = parse_flag(*value);
      file.ignored.push_back(key);
    } else if (listed(std::begin(kPassedOverKeys), std::end(kPassedOverKeys), key)) {
      file.ignored.push_back(key);
    } else {
      throw ConfigError("config file " + path + ": unknown key '" + key + "' (accel reads " + key_list() +
                        ", and passes over Accelerate's other keys)");
    }
  }
  if (legacy_fp16.value_or(false) && file.values.count("mixed_precision") == 0) file.values["mixed_precision"] = "fp16";
  export_plugin_section(file, sections);
  return file;
}

void write_config_file(const std::string& path, const SettingValues& values) {
  const auto given = [&](const char* key) { return values.count(key) != 0; };
  const auto value = [&](const char* key, const std::string& fallback) {
    return given(key) ? values.at(key) : fallback;
  };
  const bool use_cpu = value("use_cpu", "false") == "true";
  // Each key with how it is written, sorted by key as Accelerate's yaml.safe_dump sorts them.
  std::vector<std::pair<std::string, std::function<void(YAML::Emitter&)>>> keys;
  const auto plain = [&](const char* key, const std::string& text) {
    keys.emplace_back(key, [text](YAML::Emitter& out) { out << text; });
  };
  const auto quoted_if_needed = [&](const char* key, const std::string& text) {
    keys.emplace_back(key, [text](YAML::Emitter& out) { emit_text(out, text); });
  };
  plain("compute_environment", "LOCAL_MACHINE");
  plain("debug", "false");
  plain("distributed_type", value("distributed_type", "NO"));
  quoted_if_needed("downcast_bf16", "no");
  if (given("dynamo_backend") && value("dynamo_backend", "no") != "no") {
    const std::string backend = values.at("dynamo_backend");
    keys.emplace_back("dynamo_config", [backend](YAML::Emitter& out) {
      out << YAML::BeginMap << YAML::Key << "dynamo_backend" << YAML::Value;
      emit_text(out, backend);
      out << YAML::EndMap;
    });
  }
  plain("enable_cpu_affinity", value("enable_cpu_affinity", "false"));
  if (given("gpu_ids") || !use_cpu) quoted_if_needed("gpu_ids", value("gpu_ids", "all"));
  if (given("gradient_accumulation_steps")) plain("gradient_accumulation_steps", values.at("gradient_accumulation_steps"));
  plain("machine_rank", value("machine_rank", "0"));
  if (given("main_process_ip")) quoted_if_needed("main_process_ip", values.at("main_process_ip"));
  if (given("main_process_port")) plain("main_process_port", values.at("main_process_port"));
  plain("main_training_function", "main");
  quoted_if_needed("mixed_precision", value("mixed_precision", "no"));
  plain("num_machines", value("num_machines", "1"));
  plain("num_processes", value("num_processes", "1"));
  plain("rdzv_backend", "static");
  plain("same_network", "true");
  keys.emplace_back("tpu_env", [](YAML::Emitter& out) { out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq; });
  plain("tpu_use_cluster", "false");
  plain("tpu_use_sudo", "false");
  plain("use_cpu", use_cpu ? "true" : "false");
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [key, write] : keys) {
    out << YAML::Key << key << YAML::Value;
    write(out);
  }
  out << YAML::EndMap;
  const std::string text = std::string(out.c_str()) + "\n";

  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) create_directories(path.substr(0, slash));
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace accel::cli
