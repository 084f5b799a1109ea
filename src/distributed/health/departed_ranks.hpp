// Naming the rank that left, when a collective fails because a peer's connection broke (Gloo says only
// "Read error [127.0.0.1]:port"). Every rank publishes its process identity at the rendezvous; after such a
// failure, a rank on this host whose process is gone is named, as the shared-memory path names it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel::distributed {

// This process's identity: "<host name>/<boot id> <pid>".
std::string process_identity();

// For identities[r], rank r's published identity (nullopt: unknown), the ranks other than `self` on this
// host whose process has exited (or is a zombie the launcher has not reaped yet): "rank 1 (process 4242)
// exited", several joined by ", ", each rank r named as names[r] when `names` has it (a subgroup's ranks by
// the job's). A process may still be exiting when its socket closes, so this polls up to `grace` before
// deciding that none did. "" when no rank is known to be gone (one on another host, or one that failed
// without exiting).
std::string departed_ranks(int32_t self, const std::vector<std::optional<std::string>>& identities,
                           std::chrono::milliseconds grace, const std::vector<int32_t>& names = {});

}  // namespace accel::distributed
