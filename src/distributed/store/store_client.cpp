#include "distributed/store/store_client.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <cstdio>

#include "core/error.hpp"
#include "distributed/store/job_store.hpp"
#include "distributed/store/rendezvous_generation.hpp"

namespace accel::distributed {

struct StoreClient::Impl {
  std::string where;  // "host:port", for messages
  c10::intrusive_ptr<c10d::Store> store;

  [[noreturn]] void lost(const std::exception& error) const {
    fail(Code::PeerFailed, "the store at " + where + " could not be used: " + message_of(error));
  }
};

StoreClient::StoreClient(const std::string& master_addr, uint16_t master_port, const std::string& job_key,
                         const std::string& prefix, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->where = master_addr + ":" + std::to_string(master_port);
  try {
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(
        prefix, c10::make_intrusive<JobStore>(master_addr, master_port, job_key, current_rendezvous_generation(), timeout));
  } catch (const std::exception& error) {
    impl_->lost(error);
  }
}

StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    impl_->lost(error);
  }
}

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  try {
    impl_->store->wait(keys, timeout);
    return;
  } catch (const std::exception& error) {
    // A timeout and a lost connection look alike from here: asking again tells them apart.
    std::string missing;
    try {
      for (const std::string& key : keys) {
        if (!impl_->store->check({key})) missing += (missing.empty() ? "" : ", ") + key;
      }
    } catch (const std::exception&) {
      impl_->lost(error);
    }
    if (missing.empty()) impl_->lost(error);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g s", static_cast<double>(timeout.count()) / 1000.0);
    fail(Code::Timeout, "the store at " + impl_->where + " had no " + missing + " after " + seconds);
  }
}

bool StoreClient::check(const std::string& key) {
  try {
    return impl_->store->check({key});
  } catch (const std::exception& error) {
    impl_->lost(error);
  }
}

std::string StoreClient::get(const std::string& key) {
  try {
    const std::vector<uint8_t> bytes = impl_->store->get(key);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception& error) {
    impl_->lost(error);
  }
}

}  // namespace accel::distributed
