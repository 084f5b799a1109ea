#include "distributed/health/stall_report.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace accel::distributed {

namespace {

constexpr const char* kRunning = "running";
constexpr const char* kGaveUp = "gave-up";
constexpr const char* kOutOfStep = "out-of-step";

// To a tenth of a second; a record from a host whose clock is ahead shows as 0.
std::string time_since(int64_t started_ms, int64_t now_ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(std::max<int64_t>(0, now_ms - started_ms)) / 1000.0);
  return text;
}

std::string collective_name(const CollectiveRecord& record) {
  return "#" + std::to_string(record.sequence) + " " + record.what;
}

// With the kind when it says more than the name: "#7 wait_for_everyone (barrier)", "#7 save_state".
std::string collective_and_kind(const CollectiveRecord& record) {
  return collective_name(record) + (record.kind != record.what ? " (" + record.kind + ")" : "");
}

bool has_joined(const CollectiveRecord& mine, const std::optional<CollectiveRecord>& record) {
  return record && record->sequence >= mine.sequence;
}

std::string whereabouts(const CollectiveRecord& mine, const std::optional<CollectiveRecord>& record, int64_t now_ms) {
  if (!record) return "no record: it never reached the process group's store";
  const std::string name = collective_name(*record);
  const std::string age = time_since(record->started_ms, now_ms);
  if (record->sequence < mine.sequence) {
    return "has not joined; the last collective it started is " + name + ", " + age + " ago" +
           (record->gave_up ? ", and it gave up on it" : "");
  }
  if (record->sequence > mine.sequence) return "is past it, in " + name + " for " + age;
  if (record->what != mine.what) {
    return "is in a different collective at the same point: " + name + " for " + age +
           " (the ranks issue collectives in different orders)";
  }
  return (record->gave_up ? "gave up on " + name + ", started " + age + " ago" : "in " + name + " for " + age);
}

}  // namespace

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string record_key(int32_t rank) { return "accel/seq/" + std::to_string(rank); }

std::string encode_record(const CollectiveRecord& record) {
  const char* state = record.out_of_step ? kOutOfStep : record.gave_up ? kGaveUp : kRunning;
  return std::to_string(record.sequence) + " " + std::to_string(record.started_ms) + " " + state + " " + record.kind +
         " " + record.what;
}

std::optional<CollectiveRecord> decode_record(const std::string& text) {
  std::istringstream in(text);
  CollectiveRecord record;
  std::string state;
  if (!(in >> record.sequence >> record.started_ms >> state >> record.kind) ||
      (state != kRunning && state != kGaveUp && state != kOutOfStep)) {
    return std::nullopt;
  }
  record.out_of_step = state == kOutOfStep;
  record.gave_up = state != kRunning;
  if (in.get() != ' ') return std::nullopt;
  std::getline(in, record.what, '\0');
  return record;
}

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string stall_report(const CollectiveRecord& mine, const std::vector<std::optional<CollectiveRecord>>& records,
                         int64_t now_ms) {
  std::vector<int32_t> absent;
  for (size_t r = 0; r < records.size(); ++r) {
    if (!has_joined(mine, records[r])) absent.push_back(static_cast<int32_t>(r));
  }
  std::string text = absent.empty() ? "every rank reached collective " + collective_name(mine)
                                    : rank_list(absent) + " did not join collective " + collective_name(mine);
  text += "; where each rank is:";
  for (size_t r = 0; r < records.size(); ++r) {
    text += "\n  - rank " + std::to_string(r) + ": " + whereabouts(mine, records[r], now_ms);
  }
  return text;
}

std::optional<std::string> out_of_step_report(int32_t rank, const CollectiveRecord& mine,
                                              const std::vector<std::optional<CollectiveRecord>>& records) {
  std::string others;
  for (size_t r = 0; r < records.size(); ++r) {
    const auto& record = records[r];
    if (static_cast<int32_t>(r) == rank || !record) continue;
    const bool elsewhere = record->sequence == mine.sequence && record->kind != mine.kind;
    if (!elsewhere && !record->out_of_step) continue;
    others += (others.empty() ? "" : ", and ") + std::string("rank ") + std::to_string(r) +
              (record->out_of_step ? " gave up on " : " is in ") + collective_and_kind(*record) +
              (record->out_of_step && !elsewhere ? ", having found the ranks out of step" : "");
  }
  if (others.empty()) return std::nullopt;
  return "collectives out of step: this rank (" + std::to_string(rank) + ") is in " + collective_and_kind(mine) +
         " while " + others +
         "; every process must issue the same collectives in the same order (save_state and load_state are "
         "collectives too: call them on every process, not only on the main one)";
}

std::string rendezvous_report(const std::vector<std::optional<CollectiveRecord>>& records) {
  std::vector<int32_t> missing, arrived;
  for (size_t r = 0; r < records.size(); ++r) (records[r] ? arrived : missing).push_back(static_cast<int32_t>(r));
  if (missing.empty()) return "every rank reached the rendezvous store";
  return rank_list(missing) + " never reached the rendezvous" + (arrived.empty() ? "" : " (" + rank_list(arrived) + " did)");
}

}  // namespace accel::distributed
