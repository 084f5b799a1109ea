// The job's key-value store, served by rank 0 (c10d's TCPStore server of LibTorch 1.13 listens on every
// interface, *:<port>, and lets anyone who connects read and write the job's keys). This one listens only
// on the address MASTER_ADDR names (127.0.0.1 for a job on one host: loopback only), and serves only
// connections that present the job's key (ACCEL_JOB_KEY, which accel launch makes up for each job); a
// connection without it is closed after its first message. job_store.hpp is the client.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace accel::distributed {

class StoreServer {
 public:
  // Listens on `address` (an address of this host, as MASTER_ADDR names it; a host name is resolved),
  // `port`. Throws Error(Io) "failed to bind ..." when the port is taken or the address is not this host's.
  StoreServer(const std::string& address, uint16_t port, std::string job_key);
  // Stops listening, closes every connection (their waits end) and joins the threads.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    bool done = false;
  };

  void accept_loop();
  void serve(Connection& connection);
  bool handle(int fd, const std::string& peer);
  // Blocks until every key is set, the deadline passes (false) or the server stops (false).
  bool wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, int64_t timeout_ms);
  void reap_finished();

  std::string job_key_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::list<Connection> connections_;
  bool stopping_ = false;
};

}  // namespace accel::distributed
