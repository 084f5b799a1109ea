// Runs the shared-memory collectives in the order they were started, on a thread of its own: the rank's
// own thread goes on with backward while a bucket waits for the other ranks (on a busy machine, a rank
// that waited at every bucket itself would lose a time slice at each).
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "distributed/shm/shm_allreduce.hpp"

namespace accel::distributed {

class ShmThread {
 public:
  enum class Operation { AllReduce, ReduceScatter, AllGather };

  struct Job {
    Operation operation = Operation::AllReduce;
    at::Tensor tensor;  // contiguous: what goes through the segment (the input)
    at::Tensor target;  // an all-reduce's caller's tensor, when it is not `tensor`
    // A reduce-scatter's or all-gather's destination (contiguous), and for a reduce-scatter the first
    // element of the result that it receives.
    at::Tensor output;
    int64_t output_begin = 0;
    // Set when `tensor` lives in a resident segment, at this offset of the rank's slot: reduced in place.
    SharedMemoryAllreduce* resident = nullptr;
    size_t offset = 0;
    std::optional<PrivateAverage> average;  // resident only: the average of a bucket with a private share
    ShmElement element = ShmElement::Float32;
    ReduceKind kind = ReduceKind::Sum;
    std::function<void()> on_complete;
    std::promise<void> done;
  };

  // cancel_waits makes a wait in any segment this thread works in give up (SharedMemoryAllreduce::cancel).
  ShmThread(SharedMemoryAllreduce& shm, std::function<void()> cancel_waits);
  ~ShmThread();
  ShmThread(const ShmThread&) = delete;
  ShmThread& operator=(const ShmThread&) = delete;

  std::shared_future<void> submit(std::unique_ptr<Job> job);
  // The thread's CPU clock, read from outside; 0 if it cannot be read.
  double cpu_seconds();
  // Returns once every submitted collective is over: the segment may then be replaced.
  void drain();

 private:
  void run();
  void execute(Job& job);

  SharedMemoryAllreduce& shm_;
  std::function<void()> cancel_waits_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<Job>> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;  // the worker's own
  std::thread thread_;          // last: starts once the rest is ready
};

}  // namespace accel::distributed
