// The process group: rendezvous and the raw collectives, with c10d kept out of this header.
// All c10d and LibTorch-version differences (1.13 vs 2.x) live in process_group.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace accel::distributed {

struct GroupConfig {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  // What a process presents to rank 0's store to be served (LaunchInfo::job_key).
  std::string job_key;
  std::chrono::milliseconds timeout{1800 * 1000};
  std::string backend = "gloo";  // "gloo" or "nccl"
  // All-reduces of CPU tensors go through shared memory within each node instead of the backend; with
  // several nodes, between them through one Gloo group of the nodes' leaders (node_layout.hpp).
  bool shared_memory = false;
  // The launcher's node index (LaunchInfo::group_rank), part of what tells nodes apart.
  int32_t group_rank = -1;
  // Shared memory that cannot be set up is then an error; otherwise Gloo does the work, said once.
  bool shared_memory_required = false;
};

enum class ReduceKind { Sum, Max };

// A contiguous run [begin, end) of an all-reduce's elements that this rank holds in memory of its own (a
// gradient) rather than in the all-reduced tensor.
struct PrivateRun {
  int64_t begin = 0;
  int64_t end = 0;
  void* data = nullptr;
};

// An average of every rank's contribution whose share this rank reduces comes from private memory:
// `own` covers exactly that share (ProcessGroup::private_share), in order, pointing into `holders`, which
// the all-reduce keeps alive until it ends (also when nobody waits for it any more).
struct PrivateAverage {
  std::vector<PrivateRun> own;
  std::vector<at::Tensor> holders;
  double divisor = 1;
};

// A collective in flight. wait() blocks until it is done, with the same errors as a blocking collective.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

// One rendezvous and one c10d process group. Every operation blocks until done and throws accel::Error:
// Timeout when a rank does not take part within the timeout, PeerFailed when a rank went away,
// InvalidState ("collectives out of step", naming the ranks and what each is in) when the ranks issued
// different collectives at the same point, such as save_state on rank 0 only while rank 1 goes on to its
// next gradient all-reduce or a barrier: a wait that lasts a couple of seconds reads the other ranks'
// records (stall_report.hpp, watched_wait.hpp), and a rank in a collective of another kind under the same
// sequence number, or one that gave up for that reason, ends it on every rank within seconds, whatever the
// timeout. After any of these, the group is broken: every later call throws InvalidState at once, naming
// the first failure. Not thread-safe: one collective at a time, issued in the same order on every rank.
class ProcessGroup {
 public:
  // Collective: blocks until every rank has joined (Timeout otherwise).
  static std::unique_ptr<ProcessGroup> create(const GroupConfig& config);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int32_t rank() const;
  int32_t world_size() const;
  bool broken() const;
  // Whether all-reduces of CPU tensors go through shared memory (GroupConfig::shared_memory, and it worked).
  bool uses_shared_memory() const;
  // Whether those join several nodes' segments through the nodes' leaders.
  bool shared_memory_spans_nodes() const;
  // Whether all-reduces of bfloat16 tensors can be carried: by shared memory on one node, NCCL or LibTorch
  // 2.x's Gloo, not by 1.13's Gloo ("Invalid scalar type"), which also joins the nodes' leaders.
  bool allreduces_bfloat16() const;
  // The message of the failure that broke the group; empty while it is not broken.
  const std::string& first_failure() const;

  // `what` names the user-facing operation in error messages.
  void allreduce(at::Tensor& tensor, ReduceKind kind, const char* what);
  // Starts a sum all-reduce; the tensor must stay alive and untouched until wait() returns. Collectives
  // started this way complete in the order they were started on every rank. Through shared memory they
  // run on a thread of the group's, one after the other, in the order they were started.
  // on_complete (optional) runs on the backend's thread once the all-reduce is done.
  std::unique_ptr<PendingCollective> allreduce_async(at::Tensor& tensor, const char* what,
                                                     std::function<void()> on_complete = {});
  // Where allreduce_average_async can take this rank's share of `tensor` (a piece of a shared_empty tensor)
  // from private memory: the range of `tensor`'s elements this rank reduces. nullopt when it cannot
  // (`tensor` is not in a segment, the ranks span several nodes, or it is neither float32 nor float64).
  std::optional<std::pair<int64_t, int64_t>> private_share(const at::Tensor& tensor) const;
  // allreduce_async's averaging form on such a tensor: every rank's contribution divided by
  // average.divisor and summed in rank order, bit for bit what allreduce_async of contributions divided
  // beforehand gives. This rank's contribution to its share is read undivided from average.own, which
  // receives the result there; the rest of `tensor` must hold this rank's contribution already divided, and
  // receives the result. Every rank may use either form for the same all-reduce. The private memory must
  // stay untouched until wait() returns.
  std::unique_ptr<PendingCollective> allreduce_average_async(at::Tensor& tensor, PrivateAverage average,
                                                             const char* what, std::function<void()> on_complete = {});
  // Collective (every rank asks for the same numel): an uninitialised 1-d tensor of `numel` elements with
  // like's dtype that all-reduces in place, without being copied in and out: it lives in this rank's part
  // of a shared-memory segment that every rank maps, and allreduce_async on it, or on a contiguous piece of
  // it, reduces straight from and into every rank's memory. Undefined when all-reduces of such tensors do
  // not go through shared memory (not on the CPU, not a float type, no segment) or a segment could not be
  // made (said once): the caller allocates as usual. The tensor (and any view of it) keeps its segment
  // mapped, also after the group is gone; the segment goes with the last of them. Throws like a collective
  // when the ranks cannot agree.
  at::Tensor shared_empty(int64_t numel, const at::Tensor& like);
  // Collectives started so far on this rank (tests count them to prove that none happened).
  int64_t collectives_started() const;
  // The next collective this rank starts is the first of `operation` (one word: "save_state"), which every
  // rank must call: its record names it and goes to the store at once. A rank that is in any other
  // collective at that point, and this one, then fail within seconds (see below) instead of waiting out
  // the timeout.
  void announce(const char* operation);
  // CPU time used so far by the thread that runs the shared-memory all-reduces (0 without it): what
  // overlapping them with backward costs this rank's cores.
  double helper_cpu_seconds() const;

  struct Impl;  // c10d's side, defined in process_group.cpp
  // outputs[r] receives rank r's input; every rank's input must have the same size.
  void allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what);
  void broadcast(at::Tensor& tensor, int32_t root, const char* what);
  void barrier(const char* what);

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
