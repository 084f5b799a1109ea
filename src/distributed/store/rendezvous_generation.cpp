#include "distributed/store/rendezvous_generation.hpp"

#include <atomic>

namespace accel::distributed {

namespace {
std::atomic<int64_t> generation{0};
}  // namespace

int64_t begin_rendezvous_generation() { return generation.fetch_add(1) + 1; }

int64_t current_rendezvous_generation() { return generation.load(); }

}  // namespace accel::distributed
