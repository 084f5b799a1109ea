// The rendezvous and failure verdicts of a process group, shared by every transport it has (transport.hpp),
// so that each names ranks alike: rank 0's verdict on who never came to the rendezvous, the records of the
// collectives each rank starts (stall_report.hpp) kept in the job's store, the wait in slices that finds
// ranks out of step (watched_wait.hpp), the stall report of a collective that timed out, the ranks whose
// process went away (departed_ranks.hpp), and the group's first failure, after which every collective is
// refused at once. Not thread-safe: the collectives' thread (one at a time) uses it, but for what
// RecordPublisher does on its own thread.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "distributed/topology/group_config.hpp"
#include "distributed/health/record_publisher.hpp"
#include "distributed/health/stall_report.hpp"
#include "distributed/health/watched_wait.hpp"

namespace c10d {
class Store;
}

namespace accel::distributed {

struct ShmExchange;

// What a c10d or store error message says happened: Timeout, Io (the master port is taken), or PeerFailed.
Code classify(const std::string& message);
// "1.5 s"
std::string seconds(std::chrono::milliseconds timeout);

class GroupHealth {
 public:
  // Starts publishing this rank's records to `store` (the group's, prefixed).
  GroupHealth(const GroupConfig& config, c10::intrusive_ptr<c10d::Store> store);
  ~GroupHealth();
  GroupHealth(const GroupHealth&) = delete;
  GroupHealth& operator=(const GroupHealth&) = delete;

  const GroupConfig& config() const { return config_; }
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  // The store as the shared-memory segments' negotiation and the node discovery use it.
  ShmExchange exchange();

  // Collective, before the backend's own rendezvous: publishes this rank's arrival, then rank 0 waits for
  // every rank's and publishes its verdict, which the others wait for; a timeout names the ranks that never
  // came, on every rank that did (Error(Timeout)). Then publishes what departed_ranks needs of this process.
  void rendezvous();
  // For a rendezvous that failed with `message` (a c10d or store error): throws Error naming the rendezvous,
  // and for a timeout which ranks never came (`health`: nullptr when the store could not be reached).
  [[noreturn]] static void rendezvous_failed(const GroupConfig& config, GroupHealth* health, const std::string& message);

  // Error(InvalidState) naming `what` and the first failure once the group is broken.
  void check_usable(const char* what) const;
  // The record of the collective this rank starts now, of kind `kind` (what it can meet on the other ranks):
  // named after the announced operation, if any, and then sent at once.
  CollectiveRecord open_record(const char* what, const char* kind);
  // Waits for a started collective to end: `wait` waits (watch(), typically) and returns nullopt once it is
  // done or the proof that the ranks are out of step. A failure breaks the group (a ShapeMismatch only
  // fails this collective); out of step, `abandon` runs first (to free what waits for a rank that will never
  // come), then the group breaks as on a timeout, every rank saying so.
  void conclude(const CollectiveRecord& record, const std::function<std::optional<std::string>()>& wait,
                const std::function<void()>& abandon);
  // Waits in slices (watched_wait.hpp): nullopt once done, or the proof that the ranks are out of step.
  std::optional<std::string> watch(const CollectiveRecord& record, const WaitSlice& wait_slice);
  // A collective the backend refused to start: the group breaks (Error(PeerFailed)).
  [[noreturn]] void could_not_start(const char* what, const std::string& message);

  bool broken() const { return !first_failure_.empty(); }
  const std::string& first_failure() const { return first_failure_; }
  int64_t started() const { return started_; }
  void announce(const char* operation) { announced_ = operation; }
  // The operation announced for the next collective; empty when none is.
  const std::string& announced() const { return announced_; }

 private:
  // Breaks the group with `message` (code Timeout: the stall report; otherwise who left).
  [[noreturn]] void broke(const CollectiveRecord& record, const std::string& message, Code code);
  // Breaks the group as a timeout does, and says so in this rank's record at once: the other ranks,
  // wherever they wait, give up on seeing it.
  [[noreturn]] void out_of_step(const CollectiveRecord& record, const std::string& proof);
  std::vector<std::optional<CollectiveRecord>> read_records();
  std::vector<std::optional<std::string>> read_each_rank(std::string (*key_of)(int32_t));
  std::string stall_report_for(CollectiveRecord record);
  std::string who_left();
  void set_text(const std::string& key, const std::string& text);
  std::string rendezvous_name() const;
  [[noreturn]] void rendezvous_timed_out(const std::string& why) const;
  void judge_arrivals();
  void await_verdict();
  std::string missing_ranks();

  GroupConfig config_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<RecordPublisher> publisher_;  // after the store, so that it stops first
  std::string first_failure_;
  int64_t started_ = 0;
  std::string announced_;  // announce()'s operation, for the next collective's record
};

}  // namespace accel::distributed
