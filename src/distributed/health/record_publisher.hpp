// Keeps this rank's collective record (stall_report.hpp) in the store without making collectives wait
// for it: update() costs a lock and a copy, and a background thread sends the latest record at most once
// a period. A stalled rank's record is thus at most one period old when the others read it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/health/stall_report.hpp"

namespace accel::distributed {

class RecordPublisher {
 public:
  // send stores an encoded record; it is called on the background thread or in flush().
  using Send = std::function<void(const std::string& encoded)>;
  RecordPublisher(Send send, std::chrono::milliseconds period);
  ~RecordPublisher();
  RecordPublisher(const RecordPublisher&) = delete;
  RecordPublisher& operator=(const RecordPublisher&) = delete;

  void update(const CollectiveRecord& record);
  // Sends the latest record now, on the calling thread; throws what send throws.
  void flush();

 private:
  void send_latest();
  void run();

  Send send_;
  std::chrono::milliseconds period_;
  std::mutex mutex_;  // guards latest_, unsent_ and stopping_
  std::condition_variable wake_;
  CollectiveRecord latest_;
  bool unsent_ = false;
  bool stopping_ = false;
  std::mutex send_mutex_;  // one send at a time, so that the last one sent carries the latest record
  std::thread thread_;
};

}  // namespace accel::distributed
