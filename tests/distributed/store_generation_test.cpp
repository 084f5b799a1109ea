// A rank that shut its state down and made the next one must reach rank 0's next store, never the one
// rank 0 still tears down (a 2-process job making a second Accelerator after end_training failed about one
// run in six with "the rendezvous store ... closed the connection").
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/store/job_store.hpp"
#include "distributed/store/store_server.hpp"

namespace accel::distributed {
namespace {

constexpr const char* kHost = "127.0.0.1";
constexpr const char* kJobKey = "store-generation-test";

// A port the kernel says is free now (bound to 0, read back, released).
uint16_t free_port() {
  StoreServer probe(kHost, 0, kJobKey, 1);
  return probe.port();
}

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

TEST(StoreGeneration, AClientOfTheNextGenerationWaitsForTheNextServer) {
  const uint16_t port = free_port();
  auto previous = std::make_unique<StoreServer>(kHost, port, kJobKey, 1);
  auto client = std::async(std::launch::async, [&] {
    return c10::make_intrusive<JobStore>(kHost, port, kJobKey, 2, std::chrono::milliseconds(10000));
  });
  // The previous generation's server still runs: the client is told to retry, and is not connected to it.
  EXPECT_EQ(client.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  previous.reset();
  StoreServer next(kHost, port, kJobKey, 2);
  auto store = client.get();
  store->set("key", bytes("value"));
  EXPECT_EQ(store->get("key"), bytes("value"));
}

TEST(StoreGeneration, AClientOfAnotherGenerationTimesOutSayingWhy) {
  StoreServer server(kHost, 0, kJobKey, 3);
  try {
    JobStore store(kHost, server.port(), kJobKey, 4, std::chrono::milliseconds(200));
    FAIL() << "a client of generation 4 was accepted by generation 3's server";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("previous rendezvous"), std::string::npos) << error.what();
  }
}

TEST(StoreGeneration, AnotherJobIsRefusedAtOnce) {
  StoreServer server(kHost, 0, kJobKey, 1);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(JobStore(kHost, server.port(), "another job", 1, std::chrono::milliseconds(5000)), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
}

}  // namespace
}  // namespace accel::distributed
