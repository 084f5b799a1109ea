// Device decisions, apart from LibTorch types so that many files can include this.
#pragma once

#include <string>

namespace accel {

// Number of CUDA devices LibTorch can use (0 in a CPU-only build or on a host without GPUs).
int cuda_device_count();

// The device a process uses: the explicit `requested` one when not empty, else cuda:<local_rank modulo
// the device count> when CUDA is present and use_cpu is off, else "cpu". Throws Error(Unsupported) when a
// CUDA device is requested that this build or host lacks, Error(InvalidArgument) for a CUDA device while
// use_cpu is on.
std::string choose_device(const std::string& requested, bool use_cpu, int local_rank);

// Makes `device` the current CUDA device of the calling thread (no-op for "cpu").
void activate_device(const std::string& device);

// Returns the CUDA caching allocator's unused blocks to the driver (torch.cuda.empty_cache); nothing
// without CUDA.
void release_cached_device_memory();

}  // namespace accel
