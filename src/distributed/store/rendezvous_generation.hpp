// The job's rendezvous generation: how many process groups this process has begun. Every rank of a job
// makes its states (and so its groups) in the same order, so the count agrees across ranks without a
// message, and tells one rendezvous of the job from the next: a rank that shut its state down and made the
// next one must not reach rank 0's store of the previous one while rank 0 still tears it down
// (store_server.hpp tells such a client to retry).
#pragma once

#include <cstdint>

namespace accel::distributed {

// Counts a new process group's rendezvous and returns its generation (1 for the first). Thread-safe.
int64_t begin_rendezvous_generation();
// The generation of the latest process group begun (0 before any): what the store clients of its
// background saves present. Thread-safe.
int64_t current_rendezvous_generation();

}  // namespace accel::distributed
