#include "core/lent_memory.hpp"

#include <ATen/dlpack.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace accel {

namespace {

thread_local int call_depth = 0;

struct Queue {
  std::mutex mutex;
  std::vector<DLManagedTensor*> waiting;
  std::atomic<bool> any{false};  // read without the lock on every call: the common case is an empty queue
};

// Never destroyed: a library thread may queue while the process exits.
Queue& queue() {
  static auto* instance = new Queue;
  return *instance;
}

void run_deleter(DLManagedTensor* managed) noexcept {
  if (managed->deleter != nullptr) managed->deleter(managed);
}

void give_back_waiting() noexcept {
  Queue& waiting = queue();
  if (!waiting.any.load(std::memory_order_acquire)) return;
  std::vector<DLManagedTensor*> due;
  {
    std::lock_guard<std::mutex> lock(waiting.mutex);
    due.swap(waiting.waiting);
    waiting.any.store(false, std::memory_order_release);
  }
  for (DLManagedTensor* managed : due) run_deleter(managed);
}

}  // namespace

CallerThread::CallerThread() noexcept {
  if (call_depth++ == 0) give_back_waiting();
}

CallerThread::~CallerThread() {
  if (call_depth == 1) give_back_waiting();
  --call_depth;
}

void give_back(DLManagedTensor* managed) noexcept {
  if (call_depth > 0) {
    run_deleter(managed);
    return;
  }
  Queue& waiting = queue();
  std::lock_guard<std::mutex> lock(waiting.mutex);
  try {
    waiting.waiting.push_back(managed);
  } catch (...) {
    // No memory for the queue: the memory stays lent until the process ends, which is safe.
    return;
  }
  waiting.any.store(true, std::memory_order_release);
}

}  // namespace accel
