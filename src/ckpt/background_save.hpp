// Background checkpoint saving (accel_state_save_state_async; one BackgroundSaves per Accelerator,
// accelerator/accelerator.hpp): the snapshot is taken on the caller's
// thread, then a thread of its own writes it and moves it into place while training goes on.
//
// Completion without collectives: the process group is not thread-safe and its collectives must come in
// the same order on every rank, so the writer never uses it. Each rank's writer posts its outcome to the
// rendezvous store over a connection of its own (distributed/store/store_client.hpp); rank 0's writer waits for
// every rank's, moves the folder into place only when every part was written, and posts the verdict, which
// every writer reads before it ends. So every rank ends with the same outcome, and a failure on any rank
// leaves the previous checkpoint where it was.
//
// Memory: one snapshot in flight at most (a new save first waits for the previous one), about one
// checkpoint's size in host memory: the models' tensors copied, optimizer, scheduler, scaler and loader
// states serialised, random states and registered objects' bytes. It goes once its files are written.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ckpt/checkpoint.hpp"
#include "core/error.hpp"

namespace accel::ckpt {

// The background saves of one process state: at most one in flight, and the failure of the last one until
// a call reports it.
class BackgroundSaves : public std::enable_shared_from_this<BackgroundSaves> {
 public:
  // Copies what the writer needs of the state; nothing is started. Owned through a shared_ptr (the exit
  // handler finishes the saves still alive when the process exits).
  explicit BackgroundSaves(const std::shared_ptr<distributed::State>& state);
  // Waits for the save in flight; a failure no call reported is written to stderr, as nobody else can.
  ~BackgroundSaves();
  BackgroundSaves(const BackgroundSaves&) = delete;
  BackgroundSaves& operator=(const BackgroundSaves&) = delete;

  // Collective, on the thread that trains. Waits for the previous save (throwing its failure, if no call
  // reported it, instead of saving), takes the snapshot (begin_save: a failure there fails the call on every
  // rank and changes nothing), then returns while a thread writes "<directory>.saving" and moves it to
  // directory once every rank's part is written. before_move runs on rank 0's writer just before that move
  // (project rotation; a failure there moves nothing). The failures of the writing are recorded for a later call to throw, and
  // leave no staging folder. `directory` is checked first, as save_state checks it.
  void start(const std::shared_ptr<distributed::State>& state, const std::string& directory,
             const CheckpointObjects& objects, std::function<void()> before_move = {});
  // Waits for the save in flight, if any; then throws the failure of the last one if no call reported it
  // yet (once: the next call finds none).
  void wait();
  // The same without waiting: throws a recorded failure, once, or returns (one atomic load when there is
  // none: the training calls check it each step).
  void take_failure();
  // Waits; then a failure no call reported goes to stderr, as nobody else will say it (process exit).
  void finish_unheard(const char* when);

 private:
  struct Job;
  void join();
  // The writer thread's whole work; records the verdict.
  void run(Job& job);
  // The verdict of every rank's outcome, agreed through the store: "" or an encoded failure.
  std::string agree(Job& job, const std::string& own);
  // Rank 0, once every rank's outcome is known: moves the checkpoint into place when none failed.
  std::string conclude(Job& job, const std::string& failures);
  void record(const Error& failure);

  // What the writer needs of the state, copied: it never touches the state itself.
  int32_t rank_;
  int32_t world_size_;
  std::string master_addr_;
  uint16_t master_port_;
  std::string job_key_;
  std::chrono::milliseconds timeout_;

  std::mutex thread_mutex_;  // guards thread_: joined by the training thread, or at exit
  std::thread thread_;
  std::mutex failure_mutex_;  // guards failure_: recorded by the writer, taken by the training thread
  std::optional<Error> failure_;
  std::atomic<bool> failed_{false};
  std::once_flag listed_;  // in the exit handler's list since the first start  // failure_ holds one: read without the lock
};

}  // namespace accel::ckpt
