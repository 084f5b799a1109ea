#include "distributed/health/group_health.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <utility>

#include "core/options.hpp"
#include "distributed/topology/node_layout.hpp"
#include "distributed/health/departed_ranks.hpp"

namespace accel::distributed {

namespace {

bool mentions(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

// Rank 0's verdict on the rendezvous, and the keys by which the other ranks say they have read it.
constexpr const char* kVerdictKey = "accel/rendezvous";
constexpr const char* kEveryRankArrived = "every rank arrived";
std::string verdict_read_key(int32_t rank) { return "accel/rendezvous-read/" + std::to_string(rank); }
// How long beyond the timeout the verdict's exchange may take on a busy machine: the others wait this much
// longer for it, and rank 0 at most this long for them to read it.
constexpr std::chrono::milliseconds kVerdictGrace(5000);
// How long a failed collective waits for the process of a rank whose connection broke to be gone, so as to
// name it: its sockets close while it exits.
constexpr std::chrono::milliseconds kExitGrace(500);

std::string identity_key(int32_t rank) { return "accel/process/" + std::to_string(rank); }

int32_t job_rank(const GroupConfig& config) {
  return config.job_ranks.empty() ? config.rank : config.job_ranks[static_cast<size_t>(config.rank)];
}

// "rank 2"; in a subgroup, whose ranks its own records and stall reports number, "rank 2 (rank 0 of the ranks of
// node 1 (the job's ranks 2, 3))".
std::string rank_words(const GroupConfig& config) {
  if (config.job_ranks.empty()) return "rank " + std::to_string(config.rank);
  return "rank " + std::to_string(job_rank(config)) + " (rank " + std::to_string(config.rank) + " of " +
         config.subgroup + ")";
}

std::string rendezvous_name_of(const GroupConfig& config) {
  return "rendezvous of " + rank_words(config) + " of " + std::to_string(config.world_size) + " at " +
         config.master_addr + ":" + std::to_string(config.master_port);
}

}  // namespace

Code classify(const std::string& message) {
  if (mentions(message, "imed out") || mentions(message, "imeout")) return Code::Timeout;
  // Rank 0's store could not listen on the master port: another program holds it (or may not use it).
  // LibTorch 1.13 says "failed to bind", 2.x "failed to listen ... EADDRINUSE".
  if (mentions(message, "failed to bind") || mentions(message, "failed to listen") || mentions(message, "EADDRINUSE")) {
    return Code::Io;
  }
  return Code::PeerFailed;
}

std::string seconds(std::chrono::milliseconds timeout) {
  return format_number(static_cast<double>(timeout.count()) / 1000.0) + " s";
}

// Records reach the store within a quarter of the timeout (at most a second), long before anyone reads
// them: a reader has waited a whole timeout first.
GroupHealth::GroupHealth(const GroupConfig& config, c10::intrusive_ptr<c10d::Store> store)
    : config_(config), store_(std::move(store)) {
  const auto period = std::clamp(config_.timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  publisher_ = std::make_unique<RecordPublisher>(
      [this](const std::string& encoded) { set_text(record_key(config_.rank), encoded); }, period);
}

GroupHealth::~GroupHealth() = default;

ShmExchange GroupHealth::exchange() {
  return {[this](const std::string& key, const std::string& value) { set_text(key, value); },
          [this](const std::string& key) {
            store_->wait({key}, config_.timeout);
            const auto bytes = store_->get(key);
            return std::string(bytes.begin(), bytes.end());
          }};
}

void GroupHealth::set_text(const std::string& key, const std::string& text) {
  store_->set(key, std::vector<uint8_t>(text.begin(), text.end()));
}

// A rendezvous before the backend's own, so that a timeout names the ranks that never came: rank 0 waits
// for every rank's arrival record, then publishes its verdict; the others wait for the verdict. Every rank
// that came thus fails at the same moment with the same list.
void GroupHealth::rendezvous() {
  // Collective 0: the record that says this rank arrived.
  publisher_->update(CollectiveRecord{0, wall_clock_ms(), false, "rendezvous", "rendezvous"});
  publisher_->flush();
  if (config_.rank == 0) {
    judge_arrivals();
  } else {
    await_verdict();
  }
  set_text(identity_key(config_.rank), process_identity());
}

void GroupHealth::judge_arrivals() {
  std::vector<std::string> arrivals;
  for (int32_t r = 0; r < config_.world_size; ++r) arrivals.push_back(record_key(r));
  try {
    store_->wait(arrivals, config_.timeout);
    set_text(kVerdictKey, kEveryRankArrived);
    return;
  } catch (const std::exception& error) {
    if (classify(message_of(error)) != Code::Timeout) throw;
  }
  const auto records = read_records();
  const std::string verdict = rendezvous_report(records);
  set_text(kVerdictKey, verdict);
  // The store goes away with this rank: the ranks that came read the verdict first. One that came and went
  // since is not waited for beyond the grace.
  std::vector<std::string> readers;
  for (int32_t r = 1; r < config_.world_size; ++r) {
    if (records[static_cast<size_t>(r)]) readers.push_back(verdict_read_key(r));
  }
  try {
    if (!readers.empty()) store_->wait(readers, std::min(config_.timeout, kVerdictGrace));
  } catch (const std::exception&) {
  }
  rendezvous_timed_out(verdict);
}

void GroupHealth::await_verdict() {
  // Rank 0 started waiting about when this rank could connect, so its verdict comes within the timeout and
  // the grace; only a rank 0 that hangs leaves this wait to time out.
  store_->wait({kVerdictKey}, config_.timeout + std::min(config_.timeout, kVerdictGrace));
  const auto bytes = store_->get(kVerdictKey);
  const std::string verdict(bytes.begin(), bytes.end());
  if (verdict == kEveryRankArrived) return;
  set_text(verdict_read_key(config_.rank), "read");
  rendezvous_timed_out(verdict);
}

std::string GroupHealth::rendezvous_name() const { return rendezvous_name_of(config_); }

void GroupHealth::rendezvous_timed_out(const std::string& why) const {
  fail(Code::Timeout, rendezvous_name() + " did not complete within " + seconds(config_.timeout) + ": " + why);
}

// For a rendezvous that timed out: which ranks never published their arrival.
std::string GroupHealth::missing_ranks() {
  try {
    return rendezvous_report(read_records());
  } catch (const std::exception& error) {
    return "the store could not be read: " + message_of(error);
  }
}

void GroupHealth::rendezvous_failed(const GroupConfig& config, GroupHealth* health, const std::string& message) {
  const Code code = classify(message);
  if (code != Code::Timeout) fail(code, rendezvous_name_of(config) + " failed: " + message);
  const std::string missing =
      health != nullptr ? health->missing_ranks() : "the store that rank 0 serves could not be reached";
  fail(Code::Timeout, rendezvous_name_of(config) + " did not complete within " + seconds(config.timeout) + ": " +
                          missing + " (" + message + ")");
}

void GroupHealth::check_usable(const char* what) const {
  if (!first_failure_.empty()) {
    fail(Code::InvalidState,
         std::string(what) + ": the process group is unusable since an earlier failure: " + first_failure_);
  }
}

CollectiveRecord GroupHealth::open_record(const char* what, const char* kind) {
  CollectiveRecord record{++started_, wall_clock_ms(), false, what, kind};
  if (!announced_.empty()) {
    // Sent at once, so that a rank in anything else at this point finds the two out of step without waiting
    // for the publisher's period.
    record.what = record.kind = std::exchange(announced_, {});
    publisher_->update(record);
    try {
      publisher_->flush();
    } catch (const std::exception&) {
      // The store is gone with rank 0: the collective fails for that itself.
    }
    return record;
  }
  publisher_->update(record);
  return record;
}

std::optional<std::string> GroupHealth::watch(const CollectiveRecord& record, const WaitSlice& wait_slice) {
  return wait_in_step(config_.rank, record, wait_slice, [this] { return read_records(); });
}

void GroupHealth::conclude(const CollectiveRecord& record, const std::function<std::optional<std::string>()>& wait,
                           const std::function<void()>& abandon) {
  std::optional<std::string> proof;
  try {
    proof = wait();
  } catch (const Error& error) {
    // Different element counts leave the transport as usable as before.
    if (error.code() == Code::ShapeMismatch) fail(Code::ShapeMismatch, record.what + ": " + error.what());
    broke(record, error.what(), error.code());
  } catch (const std::exception& error) {
    const std::string message = message_of(error);
    broke(record, message, classify(message));
  }
  if (proof) {
    abandon();
    out_of_step(record, *proof);
  }
}

void GroupHealth::could_not_start(const char* what, const std::string& message) {
  first_failure_ = std::string(what) + " on " + rank_words(config_) + " could not start: " + message;
  fail(Code::PeerFailed, first_failure_);
}

void GroupHealth::out_of_step(const CollectiveRecord& record, const std::string& proof) {
  CollectiveRecord mine = record;
  mine.gave_up = mine.out_of_step = true;
  try {
    publisher_->update(mine);
    publisher_->flush();
    wait_for_peers_to_give_up(config_.rank, [this] { return read_records(); });
  } catch (const std::exception&) {
    // Nobody left to tell.
  }
  const std::string text = record.what + " on " + rank_words(config_) + ": " + proof;
  if (first_failure_.empty()) first_failure_ = text;
  fail(Code::InvalidState, text);
}

// Every rank's latest record; throws what the store throws.
std::vector<std::optional<CollectiveRecord>> GroupHealth::read_records() {
  std::vector<std::optional<CollectiveRecord>> records;
  for (const auto& bytes : read_each_rank(record_key)) {
    records.push_back(bytes ? std::optional<CollectiveRecord>(decode_record(*bytes)) : std::nullopt);
  }
  return records;
}

// What the store holds under key_of(r) for each rank r, in rank order (nullopt: nothing yet); throws what
// the store throws.
std::vector<std::optional<std::string>> GroupHealth::read_each_rank(std::string (*key_of)(int32_t)) {
  std::vector<std::optional<std::string>> values;
  for (int32_t r = 0; r < config_.world_size; ++r) {
    const std::string key = key_of(r);
    if (!store_->check({key})) {
      values.emplace_back();
      continue;
    }
    const auto bytes = store_->get(key);
    values.emplace_back(std::string(bytes.begin(), bytes.end()));
  }
  return values;
}

// Marks `record` given up, so that the ranks still waiting see it, and says where every rank is.
std::string GroupHealth::stall_report_for(CollectiveRecord record) {
  try {
    record.gave_up = true;
    publisher_->update(record);
    publisher_->flush();
    return stall_report(record, read_records(), wall_clock_ms());
  } catch (const std::exception& error) {
    return "the other ranks' progress could not be read from the store: " + message_of(error);
  }
}

void GroupHealth::broke(const CollectiveRecord& record, const std::string& message, Code code) {
  std::string text = record.what + " on " + rank_words(config_) + ": ";
  text += code == Code::Timeout ? "timed out after " + seconds(config_.timeout) + " waiting for the other ranks (" +
                                      message + "); " + stall_report_for(record)
                                : who_left() + " (" + message + ")";
  if (first_failure_.empty()) first_failure_ = text;
  fail(code, text);
}

// For a failure that is not a timeout: the ranks of this host whose process exited, or, when rank 0's store
// cannot be read any more, rank 0; else the backend's own words will have to do.
std::string GroupHealth::who_left() {
  std::vector<std::optional<std::string>> identities;
  try {
    identities = read_each_rank(identity_key);
  } catch (const std::exception&) {
    if (job_rank(config_) != 0) return "rank 0, which serves the rendezvous store, exited or cannot be reached";
  }
  const std::string gone = departed_ranks(config_.rank, identities, kExitGrace, config_.job_ranks);
  return gone.empty() ? "another rank failed or exited" : gone;
}

}  // namespace accel::distributed
