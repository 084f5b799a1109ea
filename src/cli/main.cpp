// The `accel` program: a thin front on the library (launch, config, env, shard-plan, plot, timeline, checkpoint).
#include <cstdio>
#include <cstring>

#include "cli/checkpoint_command.hpp"
#include "cli/config_command.hpp"
#include "cli/env_command.hpp"
#include "cli/launch.hpp"
#include "cli/plot_command.hpp"
#include "cli/timeline_command.hpp"
#include "cli/shard_plan.hpp"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: accel <command> [options]\n"
               "commands:\n"
               "  launch   start a program on several processes (like accelerate launch / torchrun)\n"
               "  config   write the config file accel launch reads (like accelerate config)\n"
               "  env      print the version, features, what the environment says and every launch setting\n"
               "  shard-plan  show which dataset indices each rank's loader yields\n"
               "  plot     draw the scalars a run logged (loss curves) into a PNG\n"
               "  timeline merge the ranks' step timelines into one Chrome trace\n"
               "  checkpoint  inspect a checkpoint or a saved model (what it holds, as JSON), or merge its model\n"
               "              into the files save_model writes\n"
               "  merge-weights  Accelerate's name for accel checkpoint merge\n"
               "run 'accel <command> --help' for a command's options\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char* command = argv[1];
  if (std::strcmp(command, "launch") == 0) return accel::cli::run_launch(argc - 1, argv + 1);
  if (std::strcmp(command, "config") == 0) return accel::cli::run_config(argc - 1, argv + 1);
  if (std::strcmp(command, "shard-plan") == 0) return accel::cli::run_shard_plan(argc - 1, argv + 1);
  if (std::strcmp(command, "env") == 0) return accel::cli::run_env(argc - 1, argv + 1);
  if (std::strcmp(command, "plot") == 0) return accel::cli::run_plot(argc - 1, argv + 1);
  if (std::strcmp(command, "timeline") == 0) return accel::cli::run_timeline(argc - 1, argv + 1);
  if (std::strcmp(command, "checkpoint") == 0) return accel::cli::run_checkpoint(argc - 1, argv + 1);
  if (std::strcmp(command, "merge-weights") == 0) return accel::cli::run_merge_weights(argc - 1, argv + 1);
  if (std::strcmp(command, "-h") == 0 || std::strcmp(command, "--help") == 0) {
    usage(stdout);
    return 0;
  }
  std::fprintf(stderr, "accel: unknown command '%s'\n", command);
  usage(stderr);
  return 2;
}
