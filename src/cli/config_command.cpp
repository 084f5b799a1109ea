#include "cli/config_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/config_file.hpp"
#include "cli/launch_flags.hpp"
#include "cli/launch_settings.hpp"
#include "core/env.hpp"

namespace accel::cli {

namespace {

constexpr const char kUsage[] =
    "usage: accel config [default] [--config-file FILE] [settings]\n"
    "\n"
    "Writes the config file that `accel launch` reads when given no --config-file (FILE defaults to\n"
    "$XDG_CONFIG_HOME/accel/default_config.yaml, else ~/.config/accel/default_config.yaml), in the\n"
    "format of Accelerate's default_config.yaml, replacing the file there. With no settings, on a\n"
    "terminal, it asks for them (unless told 'default'); elsewhere it writes the defaults (one\n"
    "process).\n"
    "\n"
    "settings ('_' or '-' between words), as `accel launch` takes them:\n"
    "  --num-processes N                 processes of the whole job, all machines together\n"
    "  --num-machines M, --machine-rank R, --main-process-ip A, --main-process-port P\n"
    "  --cpu | --multi-gpu | --distributed-type NO|MULTI_CPU|MULTI_GPU\n"
    "  --mixed-precision no|fp16|bf16    --gradient-accumulation-steps N\n"
    "  --gpu-ids LIST    --enable-cpu-affinity    --dynamo-backend B\n"
    "\n"
    "e.g. accel config --num_processes 2 --cpu --mixed_precision bf16\n";

// One answer, or `fallback` for an empty line; nothing once the input has ended.
std::optional<std::string> ask(const std::string& question, const std::string& fallback) {
  std::printf("%s [%s]: ", question.c_str(), fallback.c_str());
  std::fflush(stdout);
  std::string answer;
  if (!std::getline(std::cin, answer)) return std::nullopt;
  return answer.empty() ? fallback : answer;
}

// Accelerate's questions that accel has a use for, in its order. Answers are checked when they are resolved.
std::optional<SettingValues> ask_settings() {
  SettingValues settings;
  const auto type = ask("Which type of machine are you using? NO (no distributed training), MULTI_CPU, MULTI_GPU", "NO");
  if (!type) return std::nullopt;
  settings["distributed_type"] = *type;
  if (*type != "NO") {
    const auto machines = ask("How many different machines will you use?", "1");
    if (!machines) return std::nullopt;
    settings["num_machines"] = *machines;
    if (*machines != "1") {
      const auto rank = ask("What is the rank of this machine?", "0");
      const auto ip = rank ? ask("What is the IP address of the machine that will host the main process?", "") : rank;
      const auto port = ip ? ask("What is the port you will use to communicate with the main process?", "29500") : ip;
      if (!port) return std::nullopt;
      settings["machine_rank"] = *rank;
      settings["main_process_ip"] = *ip;
      settings["main_process_port"] = *port;
    }
    const auto processes = ask("How many processes should be used for distributed training, all machines together?", "1");
    if (!processes) return std::nullopt;
    settings["num_processes"] = *processes;
  } else {
    const auto cpu = ask("Do you want to run your training on CPU only? (yes/no)", "no");
    if (!cpu) return std::nullopt;
    settings["use_cpu"] = *cpu;
  }
  const auto precision = ask("Do you wish to use mixed precision? (no/fp16/bf16)", "no");
  if (!precision) return std::nullopt;
  settings["mixed_precision"] = *precision;
  return settings;
}

const Setting& setting_named(const std::vector<Setting>& settings, const std::string& name) {
  for (const auto& setting : settings) {
    if (setting.name == name) return setting;
  }
  throw std::logic_error("no setting " + name);
}

}  // namespace

int run_config(int argc, char** argv) {
  // `accelerate config default`: the settings given, the rest defaults, never a question.
  const bool never_ask = argc > 1 && std::string(argv[1]) == "default";
  if (never_ask) {
    --argc;
    ++argv;
  }
  CommandLine line;
  try {
    line = parse_command_line(argc, argv, FlagSet::Config);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "accel config: %s\nrun 'accel config --help' for usage\n", error.what());
    return 2;
  }
  if (line.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const EnvLookup env = process_env();
  const auto file = line.flags.find("config_file");
  const std::string path = file != line.flags.end() ? file->second : default_config_path(env);
  if (path.empty()) {
    std::fprintf(stderr, "accel config: no --config-file, and neither XDG_CONFIG_HOME nor HOME is set\n");
    return 2;
  }
  SettingValues settings = line.flags;
  settings.erase("config_file");
  if (settings.empty() && !never_ask && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
    const auto answers = ask_settings();
    if (!answers) {
      std::fprintf(stderr, "\naccel config: the input ended before the last question; nothing written\n");
      return 1;
    }
    settings = *answers;
  }
  try {
    // Checked as a launch resolves them, with nothing beneath: the file holds what was given, and what follows
    // from it (the total of processes, the distributed_type), the rest at Accelerate's defaults.
    const EnvLookup nothing = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    const ResolvedLaunch resolved = resolve_launch(settings, nullptr, nothing);
    SettingValues written;
    for (const auto* group : {&resolved.launch, &resolved.state}) {
      for (const auto& setting : *group) {
        if (setting.source == Source::Flag && is_config_key(setting.name)) written[setting.name] = setting.value;
      }
    }
    written["num_processes"] = setting_named(resolved.launch, "num_processes").value;
    written["distributed_type"] = resolved.distributed_type;
    write_config_file(path, written);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "accel config: %s\nnothing written\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel config: %s\n", error.what());
    return 1;
  }
  std::printf("accel config: wrote %s\n", path.c_str());
  return 0;
}

}  // namespace accel::cli
