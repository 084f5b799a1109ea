// A connection to the job's key-value store (store_server.hpp), as the c10d::Store that the process group,
// Gloo's rendezvous and the background saves use. Every operation blocks the connection until its reply,
// one at a time (a wait holds it for as long as it waits, as c10d's TCPStore client does).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace accel::distributed {

class JobStore final : public c10d::Store {
 public:
  // Connects to host:port, retrying until timeout (rank 0 may not listen yet, or still serve an earlier
  // generation), and presents job_key and generation (rendezvous_generation.hpp).
  // Throws std::runtime_error: "timed out connecting ..." when nobody listened in time (or only a server of
  // another generation), "... refused this process: its job key differs" when the server serves another job.
  JobStore(const std::string& host, uint16_t port, const std::string& job_key, int64_t generation,
           std::chrono::milliseconds timeout);
  ~JobStore() override;
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // As c10d's TCPStore: get waits for the key up to the store's timeout; wait throws std::runtime_error
  // "... timed out ..." naming the keys; every call throws std::runtime_error when the server is gone.
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
#if TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR >= 206
  // LibTorch 2.6+ asks a store for a second connection of its own (as TCPStore's clone): the same server,
  // job key, generation and timeout. Throws as the constructor does.
  c10::intrusive_ptr<c10d::Store> clone() override;
#endif

 private:
  enum class Greeting { Accepted, Refused, OtherGeneration, Closed };
  // Sends the hello on fd_ and reads the server's answer by deadline.
  Greeting greet(std::chrono::steady_clock::time_point deadline);

  std::string host_;
  uint16_t port_;
  std::string job_key_;
  int64_t generation_;
  std::string where_;  // "the rendezvous store at host:port", for messages
  int fd_ = -1;
  std::mutex mutex_;  // one request and its reply at a time
};

}  // namespace accel::distributed
