#include "distributed/health/watched_wait.hpp"

#include <algorithm>
#include <exception>
#include <thread>

namespace accel::distributed {

namespace {

constexpr std::chrono::milliseconds kSlice(500);
// Between reads of the records: an eighth of the wait so far, so that a long legitimate wait (the main
// process evaluating while the others wait for it) costs the store little, within these bounds.
constexpr std::chrono::milliseconds kFewestReadsApart(500);
constexpr std::chrono::milliseconds kMostReadsApart(5000);
// Until every other rank has had the chance to read a record that says the ranks are out of step.
constexpr std::chrono::milliseconds kPeersGiveUpWithin = kOutOfStepAfter + 2 * kSlice;
constexpr std::chrono::milliseconds kPeerPoll(100);

}  // namespace

std::optional<std::string> wait_in_step(int32_t rank, const CollectiveRecord& mine, const WaitSlice& wait_slice,
                                        const ReadRecords& read_records) {
  if (wait_slice(kSlice)) return std::nullopt;
  using Clock = std::chrono::steady_clock;
  const auto began = Clock::now() - kSlice;
  auto next_read = began + kOutOfStepAfter;
  while (!wait_slice(kSlice)) {
    const auto now = Clock::now();
    if (now < next_read) continue;
    try {
      if (auto proof = out_of_step_report(rank, mine, read_records())) return proof;
    } catch (const std::exception&) {
      // The store is gone with rank 0: the collective itself fails for that, as a peer failure.
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - began);
    next_read = now + std::clamp(waited / 8, kFewestReadsApart, kMostReadsApart);
  }
  return std::nullopt;
}

void wait_for_peers_to_give_up(int32_t rank, const ReadRecords& read_records) {
  const auto deadline = std::chrono::steady_clock::now() + kPeersGiveUpWithin;
  do {
    try {
      const auto records = read_records();
      bool all = true;
      for (size_t r = 0; r < records.size(); ++r) {
        if (static_cast<int32_t>(r) != rank && !(records[r] && records[r]->gave_up)) all = false;
      }
      if (all) return;
    } catch (const std::exception&) {
      return;  // the store is gone: nobody can read this rank's record any more
    }
    std::this_thread::sleep_for(kPeerPoll);
  } while (std::chrono::steady_clock::now() < deadline);
}

}  // namespace accel::distributed
