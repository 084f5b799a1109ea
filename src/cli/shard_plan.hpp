// `accel shard-plan`: prints which dataset indices each rank gets, batch by batch, for one epoch.
#pragma once

namespace accel::cli {

// argv[0] is "shard-plan"; returns the process exit code (0, or 2 for bad usage and impossible settings).
int run_shard_plan(int argc, char** argv);

}  // namespace accel::cli
