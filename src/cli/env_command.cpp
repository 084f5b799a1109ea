#include "cli/env_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "accel.h"

namespace accel::cli {

namespace {

constexpr const char* kLaunchVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK", "PMI_SIZE", "OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES",
};

}  // namespace

int run_env(int argc, char** argv) {
  (void)argv;
  if (argc > 1) {
    std::fprintf(stderr, "usage: accel env\n");
    return 2;
  }
  std::printf("- accel version: %s\n", accel_version_string());
  std::printf("- LibTorch version: %s\n", accel_torch_version());
  std::printf("- features: %s\n", accel_features());
  std::printf("- CPU cores online: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("- launch environment:\n");
  for (const char* name : kLaunchVariables) {
    if (const char* value = std::getenv(name)) std::printf("    %s=%s\n", name, value);
  }
  accel_options_t* options = nullptr;
  const char* dump = nullptr;
  if (accel_options_new(&options) != ACCEL_OK || accel_options_dump(options, &dump) != ACCEL_OK) {
    std::fprintf(stderr, "accel env: %s\n", accel_error_last());
    accel_options_free(options);
    return 1;
  }
  std::printf("- configuration (defaults < ACCEL_* environment):\n");
  for (const char* line = dump; *line != '\0';) {
    const char* end = line;
    while (*end != '\0' && *end != '\n') ++end;
    std::printf("    %.*s\n", static_cast<int>(end - line), line);
    line = *end == '\n' ? end + 1 : end;
  }
  accel_options_free(options);
  return 0;
}

}  // namespace accel::cli
