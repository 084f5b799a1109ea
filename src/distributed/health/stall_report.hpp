// Horovod's stall inspector, at the c10d layer: before each collective a rank publishes in the rendezvous
// store which collective it is starting (one small record per rank, overwritten each time). When a
// collective times out, every rank reads all the records and can say which ranks never joined and where
// each rank is. This file holds the records and the wording; group_health.cpp does the store I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel::distributed {

struct CollectiveRecord {
  int64_t sequence = 0;    // collectives this rank has started, this one included; 0 is the rendezvous
  int64_t started_ms = 0;  // wall clock in ms since the epoch: across hosts only as exact as their clocks agree
  bool gave_up = false;    // this rank's wait for it failed
  std::string what;        // the operation, as error messages name it
  // What it can meet on the other ranks, one word: the backend's operation ("all-gather", "barrier", ...),
  // or the operation every rank must call when it was announced (ProcessGroup::announce: "save_state").
  // Ranks whose collectives of one sequence number differ in kind can never complete it.
  std::string kind;
  bool out_of_step = false;  // it gave up because the records proved the ranks out of step (gave_up too)
};

// "rank 2", "ranks 0, 2": how failures list ranks.
std::string rank_list(const std::vector<int32_t>& ranks);

// The store key of a rank's record.
std::string record_key(int32_t rank);
std::string encode_record(const CollectiveRecord& record);
// nullopt for text that is not a record.
std::optional<CollectiveRecord> decode_record(const std::string& text);
int64_t wall_clock_ms();

// records[r] is rank r's latest record (nullopt: none). For `mine`, the collective that timed out: which
// ranks did not join it, then one line per rank with what it is in (or last started) and for how long.
std::string stall_report(const CollectiveRecord& mine, const std::vector<std::optional<CollectiveRecord>>& records,
                         int64_t now_ms);

// For `mine`, the collective this rank (`rank`) has waited on for a while: why the ranks can never complete
// it, or nullopt when the records prove nothing (a slow rank is not out of step). The proof: a rank whose
// record has the same sequence number but another kind (the ranks issued different collectives at this
// point), or a rank that gave up because it found them out of step. Stale records prove nothing false: a
// record is only ever replaced by a later collective's.
std::optional<std::string> out_of_step_report(int32_t rank, const CollectiveRecord& mine,
                                              const std::vector<std::optional<CollectiveRecord>>& records);

// For a rendezvous that timed out: the ranks without a record never reached the store.
std::string rendezvous_report(const std::vector<std::optional<CollectiveRecord>>& records);

}  // namespace accel::distributed
