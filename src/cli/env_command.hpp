// `accel env`: what this installation is and what the environment says (like `accelerate env`).
#pragma once

namespace accel::cli {

int run_env(int argc, char** argv);

}  // namespace accel::cli
