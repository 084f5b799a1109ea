#include "core/env.hpp"

#include <algorithm>
#include <cctype>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/error.hpp"

namespace accel {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::vector<std::string> environment_names(const std::string& prefix) {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    if (text.rfind(prefix, 0) == 0) names.push_back(text.substr(0, text.find('=')));
  }
  return names;
}

std::string upper_case(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

std::optional<bool> parse_flag(const std::string& text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::vector<std::string> yes{"y", "yes", "t", "true", "on", "1"};
  static const std::vector<std::string> no{"n", "no", "f", "false", "off", "0"};
  if (std::find(yes.begin(), yes.end(), lower) != yes.end()) return true;
  if (std::find(no.begin(), no.end(), lower) != no.end()) return false;
  return std::nullopt;
}

namespace {

struct Family {
  const char* launcher;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

// SLURM_NTASKS_PER_NODE may read "2(x3)"; only the leading count matters for this node.
int64_t parse_int(const std::string& name, const std::string& text, bool allow_suffix) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    fail(Code::Environment, name + "='" + text + "' is not an integer");
  }
  if (used != text.size() && !(allow_suffix && text[used] == '(')) {
    fail(Code::Environment, name + "='" + text + "' is not an integer");
  }
  return value;
}

std::optional<int64_t> read_int(const EnvLookup& env, const char* name, bool allow_suffix = false) {
  if (name == nullptr) return std::nullopt;
  auto text = env(name);
  if (!text || text->empty()) return std::nullopt;
  return parse_int(name, *text, allow_suffix);
}

}  // namespace

LaunchInfo parse_launch_env(const EnvLookup& env) {
  static const Family families[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  LaunchInfo info;
  const Family* chosen = nullptr;
  for (const auto& family : families) {
    if (read_int(env, family.world)) {
      chosen = &family;
      break;
    }
  }
  if (chosen == nullptr) {
    if (read_int(env, "RANK").value_or(0) != 0) {
      fail(Code::Environment, "RANK is set but WORLD_SIZE is not");
    }
    return info;
  }
  const std::string world_name = chosen->world;
  const std::string rank_name = chosen->rank;
  info.launcher = chosen->launcher;
  const int64_t world = *read_int(env, chosen->world);
  if (world < 1 || world > (1 << 20)) {
    fail(Code::Environment, world_name + "=" + std::to_string(world) + " must be between 1 and 1048576");
  }
  auto rank = read_int(env, chosen->rank);
  if (!rank) {
    if (world > 1) fail(Code::Environment, world_name + " is " + std::to_string(world) + " but " + rank_name + " is not set");
    rank = 0;
  }
  if (*rank < 0 || *rank >= world) {
    fail(Code::Environment, rank_name + "=" + std::to_string(*rank) + " is outside [0, " + world_name + "=" +
                                std::to_string(world) + ")");
  }
  const std::string local_world_name = chosen->local_world;
  const std::string local_rank_name = chosen->local_rank;
  const int64_t local_world = read_int(env, chosen->local_world, /*allow_suffix=*/true).value_or(world);
  const int64_t local_rank = read_int(env, chosen->local_rank).value_or(*rank % local_world);
  if (local_world < 1 || local_world > world) {
    fail(Code::Environment, local_world_name + "=" + std::to_string(local_world) + " must be between 1 and " +
                                world_name + "=" + std::to_string(world));
  }
  if (local_rank < 0 || local_rank >= local_world) {
    fail(Code::Environment, local_rank_name + "=" + std::to_string(local_rank) + " is outside [0, " +
                                local_world_name + "=" + std::to_string(local_world) + ")");
  }
  info.world_size = static_cast<int32_t>(world);
  info.rank = static_cast<int32_t>(*rank);
  info.local_world_size = static_cast<int32_t>(local_world);
  info.local_rank = static_cast<int32_t>(local_rank);
  if (info.launcher == "torchrun") {
    if (const auto group = read_int(env, "GROUP_RANK")) {
      if (*group < 0 || *group >= world) {
        fail(Code::Environment, "GROUP_RANK=" + std::to_string(*group) + " is outside [0, " + world_name + "=" +
                                    std::to_string(world) + ")");
      }
      info.group_rank = static_cast<int32_t>(*group);
    }
  }

  auto addr = env("MASTER_ADDR");
  if (addr && !addr->empty()) {
    info.master_addr = *addr;
  } else if (local_world != world) {
    fail(Code::Environment, "MASTER_ADDR must be set when the " + std::to_string(world) +
                                " processes span several nodes (" + std::to_string(local_world) + " on this one)");
  }
  if (auto port = read_int(env, "MASTER_PORT")) {
    if (*port < 1 || *port > 65535) {
      fail(Code::Environment, "MASTER_PORT=" + std::to_string(*port) + " is not a port number (1..65535)");
    }
    info.master_port = static_cast<uint16_t>(*port);
  }
  if (auto key = env("ACCEL_JOB_KEY")) info.job_key = *key;
  return info;
}

}  // namespace accel
