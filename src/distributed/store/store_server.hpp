// The job's key-value store, served by rank 0 (c10d's TCPStore server of LibTorch 1.13 listens on every
// interface, *:<port>, and lets anyone who connects read and write the job's keys). This one listens only
// on the address MASTER_ADDR names (127.0.0.1 for a job on one host: loopback only), and serves only
// connections that present the job's key (ACCEL_JOB_KEY, which accel launch makes up for each job); a
// connection without it is closed after its first message. job_store.hpp is the client.
//
// A server serves one rendezvous generation of the job (see rendezvous_generation.hpp): a client of the
// job that comes for another one (a rank that already shut down this generation's state and made its next
// while rank 0 still tears this one down) is told to retry, so that it reaches the next server, not this
// one as it closes.
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
  StoreServer(const std::string& address, uint16_t port, std::string job_key, int64_t generation);
  // Stops listening first (a client that connects from then on is refused and retries), then closes every
  // connection (their waits end) and joins the threads.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The port it listens on (the kernel's choice when it was given 0).
  uint16_t port() const;

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
  int64_t generation_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::list<Connection> connections_;
  bool stopping_ = false;
};

}  // namespace accel::distributed
