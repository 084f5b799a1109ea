// Whether these GPU tests can run here. They are built everywhere (LibTorch 1.13 CPU as 2.x CUDA) and
// skip, rather than fail, on a host without a CUDA device, so that `ctest -L gpu` is meaningful on both.
#pragma once

#include <ATen/Context.h>

#include <cstdio>

namespace gpu {

// The process exit code by which ctest (SKIP_RETURN_CODE) counts a launched worker as skipped.
constexpr int kSkipExitCode = 77;
constexpr const char* kNoCuda = "no CUDA device";

// A CPU-only LibTorch and a CUDA LibTorch on a host without a GPU both answer false.
inline bool cuda_present() { return at::hasCUDA(); }

// For a launched worker's main, before it makes a state: says why and answers true when it must exit with
// kSkipExitCode.
inline bool worker_skipped_without_cuda() {
  if (cuda_present()) return false;
  std::printf("skipped: %s\n", kNoCuda);
  return true;
}

}  // namespace gpu

#define SKIP_WITHOUT_CUDA()                             \
  do {                                                  \
    if (!gpu::cuda_present()) GTEST_SKIP() << gpu::kNoCuda; \
  } while (0)
