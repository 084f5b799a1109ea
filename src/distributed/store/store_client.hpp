// A connection of its own to the rendezvous store that rank 0 serves, for a thread other than the one
// that issues collectives (the background checkpoint writer). A store connection (job_store.hpp) runs one
// operation at a time, and a wait holds it throughout, so waiting on the process group's own connection
// would hold up its stall records and rendezvous; a second client waits on its own connection. Its keys
// live under a prefix apart from the group's. c10d stays behind this header, as in process_group.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace accel::distributed {

class StoreClient {
 public:
  // Connects to master_addr:master_port, presenting job_key (LaunchInfo::job_key). Error(PeerFailed) when
  // the store cannot be reached within timeout or refuses the key.
  StoreClient(const std::string& master_addr, uint16_t master_port, const std::string& job_key,
              const std::string& prefix, std::chrono::milliseconds timeout);
  // Closes the connection; hold a client only while it is needed.
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // Every call: Error(PeerFailed) when the store is gone.
  void set(const std::string& key, const std::string& value);
  // Returns once every key is set; Error(Timeout) naming the keys still unset after timeout.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool check(const std::string& key);
  // The value of a key that is set.
  std::string get(const std::string& key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
