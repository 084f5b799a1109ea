// `accel config`: writes the config file `accel launch` reads (like `accelerate config`), from flags, so that
// scripts and CI can write one too; with no flags on a terminal it asks, as Accelerate's does.
#pragma once

namespace accel::cli {

// argv[0] is "config"; returns the process exit code.
int run_config(int argc, char** argv);

}  // namespace accel::cli
