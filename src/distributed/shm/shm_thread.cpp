#include "distributed/shm/shm_thread.hpp"

#include <pthread.h>
#include <time.h>

#include <utility>

#include "core/error.hpp"

namespace accel::distributed {

ShmThread::ShmThread(SharedMemoryAllreduce& shm, std::function<void()> cancel_waits)
    : shm_(shm), cancel_waits_(std::move(cancel_waits)), thread_([this] { run(); }) {}

ShmThread::~ShmThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  // Nobody waits for what is left (a broken group): it must not wait out the timeout either.
  cancel_waits_();
  thread_.join();
}

std::shared_future<void> ShmThread::submit(std::unique_ptr<Job> job) {
  auto done = job->done.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  work_.notify_one();
  return done;
}

double ShmThread::cpu_seconds() {
  clockid_t clock = 0;
  timespec time{};
  if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0 || clock_gettime(clock, &time) != 0) return 0;
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_nsec) * 1e-9;
}

void ShmThread::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
}

void ShmThread::run() {
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    execute(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
    }
    idle_.notify_all();
  }
}

void ShmThread::execute(Job& job) {
  if (failure_) {
    job.done.set_exception(failure_);
    return;
  }
  try {
    switch (job.operation) {
      case Operation::AllReduce:
        if (job.resident != nullptr) {
          job.resident->allreduce_resident(job.offset, job.tensor.numel(), job.element, job.kind,
                                           job.average ? &*job.average : nullptr);
        } else {
          shm_.allreduce(job.tensor.data_ptr(), job.tensor.numel(), job.element, job.kind);
        }
        if (job.target.defined()) job.target.copy_(job.tensor);
        break;
      case Operation::ReduceScatter:
        shm_.reduce_scatter(job.tensor.data_ptr(), job.tensor.numel(), job.element, job.kind, job.output_begin,
                            job.output.numel(), job.output.data_ptr());
        break;
      case Operation::AllGather:
        shm_.all_gather(job.tensor.data_ptr(), job.tensor.numel(), job.element, job.output.data_ptr());
        break;
    }
    if (job.on_complete) job.on_complete();
    job.done.set_value();
  } catch (const Error& error) {
    // Different element counts leave the segment as usable as before; after anything else, no later
    // collective can succeed.
    if (error.code() != Code::ShapeMismatch) failure_ = std::current_exception();
    job.done.set_exception(std::current_exception());
  } catch (...) {
    failure_ = std::current_exception();
    job.done.set_exception(failure_);
  }
}

}  // namespace accel::distributed
