// `accel launch`: starts the ranks of a job on this node, like `accelerate launch` / `torchrun`.
#pragma once

namespace accel::cli {

// argv[0] is "launch"; returns the process exit code for `accel launch`.
int run_launch(int argc, char** argv);

}  // namespace accel::cli
