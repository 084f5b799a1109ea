// What `accel launch` starts, once its flags, config file, environment and defaults are resolved
// (launch_settings.hpp): the job's shape on this node and what every rank is given.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace accel::cli {

using Variables = std::vector<std::pair<std::string, std::string>>;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: a free port, picked for each attempt
  bool cpu_affinity = false;
  double grace_period_s = 5;
  int max_restarts = 0;
  // What the flags and the config file set for the ranks, replacing the launcher's own values: the state
  // settings they name as ACCEL_<KEY> (ACCEL_USE_CPU, ACCEL_MIXED_PRECISION, ...), CUDA_VISIBLE_DEVICES for
  // gpu_ids.
  Variables rank_variables;
  std::vector<std::string> command;  // what each rank executes: argv, the interpreter first for Python
  std::string job_key;               // ACCEL_JOB_KEY for the ranks
};

}  // namespace accel::cli
