#include "ckpt/background_save.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <utility>
#include <vector>

#include "ckpt/checkpoint_snapshot.hpp"
#include "ckpt/directory_swap.hpp"
#include "ckpt/save_directory.hpp"
#include "core/files.hpp"
#include "core/timeline.hpp"
#include "distributed/store/store_client.hpp"

namespace accel::ckpt {

namespace {

// The background saves alive in the process, for the exit handler. Never destroyed: the handler reads it
// after static destructors may have begun elsewhere.
struct LiveSaves {
  std::mutex mutex;
  std::vector<std::weak_ptr<BackgroundSaves>> saves;
};

LiveSaves& live_saves() {
  static LiveSaves* instance = new LiveSaves;
  return *instance;
}

// Process exit through exit() or a return from main, with state handles never freed: every save in flight
// still ends, so that a checkpoint the program was told is on its way gets written and moved.
void finish_every_save_at_exit() {
  std::vector<std::shared_ptr<BackgroundSaves>> live;
  {
    std::lock_guard<std::mutex> lock(live_saves().mutex);
    for (const auto& weak : live_saves().saves) {
      if (auto saves = weak.lock()) live.push_back(std::move(saves));
    }
  }
  for (const auto& saves : live) saves->finish_unheard("before the process exited");
}

// An outcome as the store carries it: "" for success, else the code, a newline and the message.
std::string encode(Code code, const std::string& message) { return std::to_string(static_cast<int>(code)) + "\n" + message; }

Error decode(const std::string& encoded, const std::string& directory) {
  const size_t newline = encoded.find('\n');
  const Code code = static_cast<Code>(std::atoi(encoded.substr(0, newline).c_str()));
  return Error(code, "the background save to '" + directory + "' failed: " + encoded.substr(newline + 1));
}

}  // namespace

struct BackgroundSaves::Job {
  CheckpointSnapshot snapshot;
  std::string directory;
  int64_t sequence = 0;
  std::function<void()> before_move;
};

BackgroundSaves::BackgroundSaves(const std::shared_ptr<distributed::State>& state)
    : rank_(state->launch().rank),
      world_size_(state->launch().world_size),
      master_addr_(state->launch().master_addr),
      master_port_(state->launch().master_port),
      job_key_(state->launch().job_key),
      timeout_(static_cast<int64_t>(state->options().get_double("timeout_s") * 1000.0)) {}

BackgroundSaves::~BackgroundSaves() { finish_unheard("before its state was freed"); }

void BackgroundSaves::join() {
  std::lock_guard<std::mutex> lock(thread_mutex_);
  if (thread_.joinable()) thread_.join();
}

void BackgroundSaves::wait() {
  join();
  take_failure();
}

void BackgroundSaves::take_failure() {
  if (!failed_.load()) return;
  std::optional<Error> failure;
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    failure.swap(failure_);
    failed_.store(false);
  }
  if (failure) throw *failure;
}

void BackgroundSaves::finish_unheard(const char* when) {
  join();
  try {
    take_failure();
  } catch (const Error& failure) {
    std::fprintf(stderr, "accel: %s (no call reported it %s)\n", failure.what(), when);
  }
}

void BackgroundSaves::start(const std::shared_ptr<distributed::State>& state, const std::string& requested_directory,
                            const CheckpointObjects& objects, std::function<void()> before_move) {
  const std::string directory = checkpoint_directory(requested_directory);
  wait();
  const timeline::Span span("save_state_async");
  auto job = std::make_shared<Job>();
  job->snapshot = begin_save(state, directory, objects, /*copy_tensors=*/true);
  // Counted only once every rank took its snapshot (begin_save is all or none): the same on every rank.
  job->sequence = state->next_background_save();
  job->directory = directory;
  job->before_move = std::move(before_move);
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] { std::atexit(finish_every_save_at_exit); });
  std::call_once(listed_, [this] {
    std::lock_guard<std::mutex> lock(live_saves().mutex);
    auto& saves = live_saves().saves;
    saves.erase(std::remove_if(saves.begin(), saves.end(), [](const auto& weak) { return weak.expired(); }), saves.end());
    saves.push_back(weak_from_this());
  });
  std::lock_guard<std::mutex> lock(thread_mutex_);
  try {
    thread_ = std::thread([this, job] { run(*job); });
  } catch (const std::system_error&) {
    // No thread to be had: write now, so that the other ranks still hear from this one.
    run(*job);
  }
}

void BackgroundSaves::run(Job& job) {
  std::string own;
  try {
    write_snapshot(job.snapshot, staging_directory(job.directory));
  } catch (const std::exception& error) {
    own = encode(code_of(error, Code::Io), "rank " + std::to_string(rank_) + ": " + message_of(error));
  }
  job.snapshot = CheckpointSnapshot{};  // the copies go as soon as they are on disk
  std::string verdict;
  try {
    verdict = world_size_ == 1 ? conclude(job, own) : agree(job, own);
  } catch (const std::exception& error) {
    verdict = encode(code_of(error, Code::Internal), "rank " + std::to_string(rank_) + ": " + message_of(error));
  }
  if (!verdict.empty()) record(decode(verdict, job.directory));
}

// The keys of save <sequence> in the store: failed<r> (a rank's encoded failure, only when it failed),
// then done<r> from every rank; from rank 0 moved (only when the checkpoint is in place), then verdict
// (its encoded failure, or ""); read<r> once rank r has the verdict. Only set, wait and check are on the
// path of a save that succeeds: with c10d's TCPStore a get took about 200 ms each (its reply came in two
// writes, held by TCP's delayed acknowledgement), which made a 2-process save take 0.8 s.
std::string BackgroundSaves::agree(Job& job, const std::string& own) {
  distributed::StoreClient store(master_addr_, master_port_, job_key_, "accel_background_save", timeout_);
  const std::string prefix = std::to_string(job.sequence) + "/";
  const auto of_rank = [&](const char* what, int32_t rank) { return prefix + what + std::to_string(rank); };
  if (rank_ != 0) {
    if (!own.empty()) store.set(of_rank("failed", rank_), own);
    store.set(of_rank("done", rank_), "");
    // Rank 0 waits up to a timeout for the slowest rank, then decides.
    store.wait({prefix + "verdict"}, 2 * timeout_);
    const std::string verdict = store.check(prefix + "moved") ? "" : store.get(prefix + "verdict");
    store.set(of_rank("read", rank_), "");
    return verdict;
  }
  std::string verdict;
  try {
    std::vector<std::string> done;
    for (int32_t r = 1; r < world_size_; ++r) done.push_back(of_rank("done", r));
    store.wait(done, timeout_);
    // The first failing rank's code; every failing rank's message.
    std::string failures = own;
    for (int32_t r = 1; r < world_size_; ++r) {
      if (!store.check(of_rank("failed", r))) continue;
      const std::string outcome = store.get(of_rank("failed", r));
      failures = failures.empty() ? outcome : failures + "; " + outcome.substr(outcome.find('\n') + 1);
    }
    verdict = conclude(job, failures);
  } catch (const std::exception& error) {
    // A rank that never said it finished may still be writing: its folder is left for the next save to clear.
    verdict = encode(code_of(error, Code::PeerFailed),
                     "rank 0 did not learn that every rank wrote its part, so nothing was moved into place: " + message_of(error));
  }
  if (verdict.empty()) store.set(prefix + "moved", "");
  store.set(prefix + "verdict", verdict);
  // The store goes away with rank 0's process group: the others read the verdict first.
  std::vector<std::string> readers;
  for (int32_t r = 1; r < world_size_; ++r) readers.push_back(of_rank("read", r));
  try {
    store.wait(readers, std::min(timeout_, std::chrono::milliseconds(60 * 1000)));
  } catch (const Error&) {
    // A rank gone by now learns nothing more from a longer wait.
  }
  return verdict;
}

std::string BackgroundSaves::conclude(Job& job, const std::string& failures) {
  const std::string staging = staging_directory(job.directory);
  if (!failures.empty()) {
    discard_staging(staging);  // every rank is done with it
    return failures + "; nothing was moved into place, so the previous checkpoint there, if any, is intact";
  }
  try {
    if (job.before_move) job.before_move();
    move_into_place(staging, job.directory);
  } catch (const std::exception& error) {
    discard_staging(staging);
    return encode(code_of(error, Code::Io), "rank 0: " + message_of(error));
  }
  return "";
}

void BackgroundSaves::record(const Error& failure) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  failure_ = failure;
  failed_.store(true);
}

}  // namespace accel::ckpt
