// A connection of its own to the rendezvous store that rank 0 serves, for a thread other than the one
// that issues collectives (the background checkpoint writer). c10d's TCPStore client runs one operation
// at a time under a lock that a wait holds throughout, so waiting on the process group's own client would
// hold up its stall records and rendezvous; a second client waits on its own connection. Its keys live
// under a prefix apart from the group's. c10d stays behind this header, as in process_group.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace accel::distributed {

class StoreClient {
 public:
  // Connects to master_addr:master_port. Error(PeerFailed) when the store cannot be reached within timeout.
  StoreClient(const std::string& master_addr, uint16_t master_port, const std::string& prefix,
              std::chrono::milliseconds timeout);
  // Closes the connection; hold a client only while it is needed, as c10d's client spins on a connection
  // whose server went away.
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // Every call: Error(PeerFailed) when the store is gone.
  void set(const std::string& key, const std::string& value);
  // Returns once every key is set; Error(Timeout) naming the keys still unset after timeout.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool check(const std::string& key);
  // The value of a key that is set. Slow from a training process: about 200 ms each, measured on LibTorch
  // 1.13 (c10d answers it in two writes, likely held by TCP's delayed acknowledgement), so hot paths use
  // set, wait and check, which are answered in one.
  std::string get(const std::string& key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
