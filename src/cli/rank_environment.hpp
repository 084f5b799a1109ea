// What `accel launch` gives the ranks it starts (launch.cpp starts and supervises them): the master port
// of each attempt, the variables every rank of the node shares, each rank's environment, and the job's key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/launch_options.hpp"

namespace accel::cli {

// A port on master_addr that nothing was bound to a moment ago (else on 127.0.0.1); none when neither
// address can be bound.
std::optional<int> pick_free_port(const std::string& master_addr);

// Variables every rank of this node shares in attempt `restart` of the job.
Variables common_variables(const LaunchOptions& options, int port, int restart);

// The launcher's environment with `vars` added or replacing what it had.
std::vector<std::string> environment_with(const Variables& vars);

// The secret every rank presents to rank 0's store (ACCEL_JOB_KEY); "" for a job on several nodes without
// one (after a warning). Throws std::runtime_error when no random bytes can be drawn.
std::string job_key_for(const LaunchOptions& options);

}  // namespace accel::cli
