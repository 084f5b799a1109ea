// `accel launch --cpu-affinity`: each local rank gets a share of its own of the CPUs the launcher may use,
// as mpirun binds ranks to cores. On a machine with a core per rank this keeps a rank and its helper
// threads (the shared-memory all-reduce's) on one core instead of letting the scheduler move them onto
// another rank's, which on two cores costs the 2-process training step about 4% (bench/run_train.sh).
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace accel::cli {

// The CPUs of `allowed` in ascending order, split into `ranks` runs of consecutive entries whose sizes
// differ by at most one (the first ranks get the larger ones). Throws std::runtime_error, naming both
// counts and the CPUs, when `allowed` has fewer CPUs than `ranks`.
std::vector<cpu_set_t> split_cpus(const cpu_set_t& allowed, int ranks);

// How many CPUs this process may run on: its affinity mask (which honours taskset and cpusets, unlike the
// count of CPUs online), else the CPUs online, else 1.
int usable_cpu_count();

// The CPUs of `set` as Linux lists them ("0-3,8,10-11"; "" for none).
std::string cpu_list(const cpu_set_t& set);

}  // namespace accel::cli
