// The all-reduce of ranks that share one host, through a POSIX shared-memory segment instead of Gloo's
// loopback sockets: each rank copies its tensor into its slot, reduces its 1/world slice of every rank's
// slot in rank order 0..n-1 (so the result is the same run to run, and for two ranks bit for bit what
// Gloo gives), and copies the reduced tensor back. Ranks meet at barriers made of atomics in the segment:
// a spin (barrier_spin: long while each rank can have a core, short otherwise), then a futex sleep, so that
// more ranks than cores do not starve each other.
//
// Across several nodes (NodeLayout) each node has a segment of its own and the same steps run within
// it; between the reduction and the copy back, the node's leader all-reduces the node's sum with the
// other nodes' leaders (the leader step, Gloo's: LeadersGroup in c10d_transport.hpp) in place in the segment, and the
// node's other ranks wait for it at a third barrier. A leader whose step fails says why in the segment,
// so that its node's ranks fail at once with the same code instead of waiting out the timeout.
//
// The segment's name goes from the node's leader to the others through the rendezvous store, and the
// leader unlinks it as soon as every rank of the node has mapped it: a crash leaves nothing behind in
// /dev/shm (but for the moment between creation and the last mapping, which `accel launch` covers by
// removing its job's leftovers, shm_names.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/topology/node_layout.hpp"
#include "distributed/transport/transport.hpp"
#include "distributed/transport/shm_element.hpp"

namespace accel::distributed {

// A contiguous run [begin, end) of an all-reduce's elements that this rank holds in memory of its own (a
// gradient) rather than in the all-reduced tensor.
struct PrivateRun {
  int64_t begin = 0;
  int64_t end = 0;
  void* data = nullptr;
};

// An average of every rank's contribution whose share this rank reduces comes from private memory: `own`
// covers that share (share_of), in order, but for the gaps between a bucket's members (alignment padding,
// zero in every rank's slot, so their sum needs no reducing), pointing into `holders`, which the all-reduce
// keeps alive until it ends (also when nobody waits for it any more).
struct PrivateAverage {
  std::vector<PrivateRun> own;
  std::vector<at::Tensor> holders;
  double divisor = 1;
};

// How long a rank waiting at the segment's barrier spins before it sleeps on a futex. A peer that arrives
// within the spin costs no wake-up, and the waiter keeps its core: a thread woken on a core another thread
// runs on (the rank's training thread, when `accel launch --cpu-affinity` bound the rank to one core) waits
// for the scheduler to let it in, and its peers wait for it in turn. Long (kLongBarrierSpin) when each of
// the node's `node_ranks` can have one of the machine's `cpus` to itself; short otherwise, so that more
// ranks than cores do not spin away the time a late peer needs (cpus <= 0: unknown, short).
// On two cores, 2 processes training the benchmark's MLP, bound: 7.34 against 7.49 ms a step with this
// spin against the library before it (medians of 8 interleaved runs); 6.64 against 6.73 with 200 against
// 20 us on a quieter machine (6 runs each).
constexpr std::chrono::microseconds kLongBarrierSpin(200);
constexpr std::chrono::microseconds kShortBarrierSpin(20);
std::chrono::microseconds barrier_spin(int32_t node_ranks, long cpus);

// The leader's part across nodes: all-reduces `numel` elements at `data` (the node's sum, in the segment)
// in place with the other nodes' leaders. Throws accel::Error.
using LeaderStep = std::function<void(void* data, int64_t numel, ShmElement type, ReduceKind kind)>;

class SharedMemoryAllreduce {
 public:
  // Collective over the store: maps a segment per node with room for `slot_bytes` per rank of the node.
  // nullptr, with the reason in *why_not, on every rank of every node alike when any rank could not create
  // or map its node's segment (/dev/shm too small, ranks of one node on different hosts, no shm_open).
  // With several nodes, `leader_step` is the leader's step (called on the node's leader only).
  // With `resident`, the segment holds the callers' tensors themselves (resident_data, allreduce_resident)
  // and never grows; a group numbers its resident segments from 0, so that each negotiates under store keys
  // of its own.
  struct Resident {
    int index = 0;
  };
  static std::unique_ptr<SharedMemoryAllreduce> create(const NodeLayout& layout, uint16_t master_port,
                                                       std::chrono::milliseconds timeout, ShmExchange exchange,
                                                       size_t slot_bytes, LeaderStep leader_step,
                                                       std::string* why_not, const Resident* resident = nullptr);
  ~SharedMemoryAllreduce();
  SharedMemoryAllreduce(const SharedMemoryAllreduce&) = delete;
  SharedMemoryAllreduce& operator=(const SharedMemoryAllreduce&) = delete;

  // Collective: a segment with room for `bytes` per rank (a new, larger one when needed; every rank asks
  // for the same size, as every rank all-reduces the same tensor). false, with the reason, on every rank
  // alike when the larger segment could not be made; the current one then stays.
  bool reserve(size_t bytes, std::string* why_not);
  // Whether `bytes` per rank fit the current segment (then reserve has nothing to do).
  bool fits(size_t bytes) const;
  // The nodes whose segments this all-reduce joins (1: every rank is on this one).
  int32_t nodes() const { return nodes_; }

  // Reduces `numel` elements at `data` in place over every rank. Throws Error: Timeout when a rank does not
  // arrive within the timeout, PeerFailed when a rank's process is gone, ShapeMismatch when the ranks'
  // element counts differ (on one node the segment stays usable; across nodes the other nodes' leaders
  // are left waiting, so every later all-reduce fails), or the leader step's error. reserve() must have
  // made room first.
  void allreduce(void* data, int64_t numel, ShmElement type, ReduceKind kind);
  // Reduces every rank's `numel` elements at `data` as allreduce does (the same sums, in the same order), but
  // writes only the result's elements [begin, begin + count) to `out`: on one node each rank reduces just
  // those from every rank's slot. Same errors as allreduce; reserve() must have made room for `numel`.
  void reduce_scatter(const void* data, int64_t numel, ShmElement type, ReduceKind kind, int64_t begin, int64_t count,
                      void* out);
  // On one node: every rank's `numel` elements at `data`, in rank order, to `out` (numel times the node's
  // ranks). Error(ShapeMismatch) when the ranks' counts differ; Error(Internal) across nodes.
  void all_gather(const void* data, int64_t numel, ShmElement type, void* out);

  // Resident segments: this rank's slot, where the tensors to reduce live (slot_bytes of them, page-aligned).
  char* resident_data() const;
  // Reduces the `numel` elements at resident_data() + offset over every rank in place, without copying them
  // in or out: each rank reduces its slice straight from every rank's slot and, on one node, writes the
  // result into every slot (across nodes, each rank copies the leaders' result from the node's first slot,
  // and a last barrier keeps the leader from changing it before everyone has).
  // Same sums, order and errors as allreduce. The caller must not touch those bytes until it returns (the
  // other ranks read and write them meanwhile).
  // With `average` (a sum; resident, on one node, float32 or float64: averages_privately), this rank's
  // contribution to its share (share_of) is read undivided from average->own, which receives the result
  // there, and nothing is written to that part of its slot (ShmTransport's average of a bucket).
  void allreduce_resident(size_t offset, int64_t numel, ShmElement type, ReduceKind kind,
                          const PrivateAverage* average = nullptr);
  // The elements [first, second) of a `numel`-element all-reduce that this rank reduces: whole cache lines,
  // so that no two ranks write one line.
  std::pair<int64_t, int64_t> share_of(int64_t numel, ShmElement type) const;
  // Whether allreduce_resident can take an average with a private share of `type`.
  bool averages_privately(ShmElement type) const;

  // Makes a wait in allreduce (on another thread) give up within a few tens of milliseconds, throwing
  // PeerFailed: for a group that goes away while an all-reduce waits for a rank that will never come.
  void cancel() { cancelled_ = true; }

  struct Segment;

 private:
  SharedMemoryAllreduce() = default;
  bool map(size_t slot_bytes, std::string* why_not);
  // Waits for every rank of the node; `grace` longer after the leader step, which itself may take the
  // whole timeout.
  void barrier(std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // Copies this rank's `numel` elements at `data` into its slot of the next half; returns the half.
  uint64_t copy_in(const void* data, int64_t numel, ShmElement type);
  // Publishes this rank's element count for `half` and waits for every rank of the node: Error(ShapeMismatch)
  // naming each rank's count when they differ (`operation`: "all-reduce", for the message).
  void agree_on_numel(uint64_t half, int64_t numel, const char* operation);
  // Both kinds of all-reduce, between the element counts' publication and the result's availability: this
  // rank reduces its slice of the `numel` elements at `offset` of every rank's slot into the node's first
  // slot (and, resident on one node, into every slot); across nodes the leader step follows.
  void reduce(uint64_t half, size_t offset, int64_t numel, ShmElement type, ReduceKind kind,
              const PrivateAverage* average = nullptr);
  void run_leader_step(char* data, int64_t numel, ShmElement type, ReduceKind kind);
  // "rank R" for the node's rank `local`: messages name ranks as the job numbers them.
  std::string rank_name(int32_t local) const;

  int32_t rank_ = 0;                 // within the node
  int32_t world_ = 1;                // ranks of the node
  std::vector<int32_t> ranks_;       // their ranks in the job, for messages
  int32_t node_ = 0;
  int32_t nodes_ = 1;
  LeaderStep leader_step_;
  std::string unusable_;             // why no all-reduce can succeed any more (a mismatch across nodes)
  std::chrono::milliseconds timeout_{0};
  ShmExchange exchange_;
  std::string name_prefix_;
  std::string store_prefix_;  // of the store keys that carry the segments' names
  bool resident_ = false;
  int64_t epoch_ = 0;        // segments made so far: each has its own name and store keys
  uint64_t operations_ = 0;  // picks the half of the slots an all-reduce uses
  bool check_peers_ = false;
  std::chrono::microseconds spin_{kShortBarrierSpin};  // barrier_spin's
  std::atomic<bool> cancelled_{false};
  std::vector<char*> slots_;  // this all-reduce's slots, kept to allocate nothing per call
  std::unique_ptr<Segment> segment_;
};

}  // namespace accel::distributed
