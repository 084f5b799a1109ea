// Waiting for a collective without waiting out the timeout when the ranks are out of step (one rank in
// save_state, another in its next gradient all-reduce): such a collective never completes, and the
// backend would only say so after the timeout, 30 minutes by default. The wait goes in slices; once it has
// lasted kOutOfStepAfter, the ranks' records (stall_report.hpp) are read between slices, less often as the
// wait grows, and a proof that the ranks are out of step ends it. A wait that ends sooner (every step of a
// healthy run) costs one bounded wait and reads nothing from the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distributed/health/stall_report.hpp"

namespace accel::distributed {

// How long a wait goes before the records are read: longer than most waits of a healthy run (ranks a
// little apart), short enough that a program out of step fails within seconds.
constexpr std::chrono::milliseconds kOutOfStepAfter(2000);

// Waits up to `slice` for the collective: true once it is done (throwing its error, if it failed).
using WaitSlice = std::function<bool(std::chrono::milliseconds slice)>;
// Every rank's latest record; may throw (the store is gone), which proves nothing.
using ReadRecords = std::function<std::vector<std::optional<CollectiveRecord>>()>;

// Returns nullopt once the collective `mine` is done, or out_of_step_report's proof that it never will be.
std::optional<std::string> wait_in_step(int32_t rank, const CollectiveRecord& mine, const WaitSlice& wait_slice,
                                        const ReadRecords& read_records);

// For the rank that found the ranks out of step and said so in its record: waits until every other rank's
// record says it gave up too (each reads the records within a slice or two of its own wait's first
// kOutOfStepAfter), for at most that long. A rank that failed at once and exited would otherwise leave the
// others to fail on its closed connections or its vanished store, with no word of the cause.
void wait_for_peers_to_give_up(int32_t rank, const ReadRecords& read_records);

}  // namespace accel::distributed
