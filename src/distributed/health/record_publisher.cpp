#include "distributed/health/record_publisher.hpp"

#include <exception>

namespace accel::distributed {

RecordPublisher::RecordPublisher(Send send, std::chrono::milliseconds period)
    : send_(std::move(send)), period_(period), thread_([this] { run(); }) {}

RecordPublisher::~RecordPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void RecordPublisher::update(const CollectiveRecord& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = record;
  unsent_ = true;
}

void RecordPublisher::flush() { send_latest(); }

void RecordPublisher::send_latest() {
  std::lock_guard<std::mutex> sending(send_mutex_);
  std::string encoded;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!unsent_) return;
    encoded = encode_record(latest_);
    unsent_ = false;
  }
  send_(encoded);
}

void RecordPublisher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stopping_; })) {
    lock.unlock();
    try {
      send_latest();
    } catch (const std::exception&) {
      // The store is gone (rank 0 exited): the group's own operations report that; there is nobody
      // left to read records.
      return;
    }
    lock.lock();
  }
}

}  // namespace accel::distributed
