// The all-reduce of ranks that share one host, through a POSIX shared-memory segment instead of Gloo's
// loopback sockets: each rank copies its tensor into its slot, reduces its 1/world slice of every rank's
// slot in rank order 0..n-1 (so the result is the same run to run, and for two ranks bit for bit what
// Gloo gives), and copies the reduced tensor back. Ranks meet at barriers made of atomics in the segment:
// a short spin, then a futex sleep, so that more ranks than cores do not starve each other.
//
// The segment's name goes from rank 0 to the others through the rendezvous store, and rank 0 unlinks it
// as soon as every rank has mapped it: a crash leaves nothing behind in /dev/shm (but for the moment
// between creation and the last mapping, which `accel launch` covers by removing its job's leftovers,
// shm_names.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.hpp"

namespace accel::distributed {

enum class ShmElement { Float32, Float64, BFloat16, Float16 };

size_t shm_element_size(ShmElement type);

// The rendezvous store, as much of it as the segment's negotiation needs. wait_get blocks until the key
// exists (throwing what the store throws on a timeout).
struct ShmExchange {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key)> wait_get;
};

class SharedMemoryAllreduce {
 public:
  // Collective over the store: maps a segment with room for `slot_bytes` per rank. nullptr, with the reason
  // in *why_not, on every rank alike when any rank could not create or map it (/dev/shm too small, ranks
  // on different hosts, no shm_open).
  static std::unique_ptr<SharedMemoryAllreduce> create(int32_t rank, int32_t world_size, uint16_t master_port,
                                                       std::chrono::milliseconds timeout, ShmExchange exchange,
                                                       size_t slot_bytes, std::string* why_not);
  ~SharedMemoryAllreduce();
  SharedMemoryAllreduce(const SharedMemoryAllreduce&) = delete;
  SharedMemoryAllreduce& operator=(const SharedMemoryAllreduce&) = delete;

  // Collective: a segment with room for `bytes` per rank (a new, larger one when needed; every rank asks
  // for the same size, as every rank all-reduces the same tensor). false, with the reason, on every rank
  // alike when the larger segment could not be made; the current one then stays.
  bool reserve(size_t bytes, std::string* why_not);
  // Whether `bytes` per rank fit the current segment (then reserve has nothing to do).
  bool fits(size_t bytes) const;

  // Reduces `numel` elements at `data` in place over every rank. Throws Error: Timeout when a rank does not
  // arrive within the timeout, PeerFailed when a rank's process is gone, ShapeMismatch (the segment still
  // usable) when the ranks' element counts differ. reserve() must have made room first.
  void allreduce(void* data, int64_t numel, ShmElement type, ReduceKind kind);

  // Makes a wait in allreduce (on another thread) give up within a few tens of milliseconds, throwing
  // PeerFailed: for a group that goes away while an all-reduce waits for a rank that will never come.
  void cancel() { cancelled_ = true; }

  struct Segment;

 private:
  SharedMemoryAllreduce() = default;
  bool map(size_t slot_bytes, std::string* why_not);
  void barrier();

  int32_t rank_ = 0;
  int32_t world_ = 1;
  std::chrono::milliseconds timeout_{0};
  ShmExchange exchange_;
  std::string name_prefix_;
  int64_t epoch_ = 0;        // segments made so far: each has its own name and store keys
  uint64_t operations_ = 0;  // picks the half of the slots an all-reduce uses
  bool check_peers_ = false;
  std::atomic<bool> cancelled_{false};
  std::vector<char*> slots_;  // this all-reduce's slots, kept to allocate nothing per call
  std::unique_ptr<Segment> segment_;
};

}  // namespace accel::distributed
