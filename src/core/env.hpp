// How the process was launched, read from the environment (torchrun, SLURM, Open MPI, PMI).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace accel {

// Looks a variable up; the indirection lets tests parse made-up environments.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

EnvLookup process_env();
// Names of the process's environment variables that start with prefix.
std::vector<std::string> environment_names(const std::string& prefix);

struct LaunchInfo {
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = 0;
  int32_t local_world_size = 1;
  // The launcher's node index (torchrun's and accel launch's GROUP_RANK); -1 where the launcher gives none.
  // Ranks on one host with different node indices are separate nodes to the hierarchical all-reduce.
  int32_t group_rank = -1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::string launcher = "none";  // "torchrun", "slurm", "openmpi", "pmi" or "none"
  // ACCEL_JOB_KEY: the secret a process presents to rank 0's store (accel launch makes one up for a job on
  // one host); "" when unset, which the store then requires of everyone.
  std::string job_key;
};

// Reads the launch variables. Precedence: torchrun's (RANK/WORLD_SIZE) over SLURM's over Open MPI's over
// PMI's, chosen as a whole by which family names the world size. Throws Error(Environment) naming the
// variable when one is malformed or the values contradict each other (rank >= world size, ...), and when
// MASTER_ADDR is missing although the processes span several nodes.
LaunchInfo parse_launch_env(const EnvLookup& env);

// Parses a boolean flag the way Accelerate does: y/yes/t/true/on/1 and n/no/f/false/off/0, any case.
std::optional<bool> parse_flag(const std::string& text);

// The text in upper case (ASCII letters): setting names and values compared as Accelerate writes them.
std::string upper_case(std::string text);

}  // namespace accel
