#include "distributed/process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/version.h>

#ifdef ACCEL_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <netdb.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "core/options.hpp"
#include "distributed/departed_ranks.hpp"
#include "distributed/job_store.hpp"
#include "distributed/rendezvous_generation.hpp"
#include "distributed/node_layout.hpp"
#include "distributed/record_publisher.hpp"
#include "distributed/shm_allreduce.hpp"
#include "distributed/stall_report.hpp"
#include "distributed/store_server.hpp"
#include "distributed/watched_wait.hpp"

#define ACCEL_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace accel::distributed {

namespace {

// The one place where 1.13 (Gloo and NCCL are ProcessGroups) and 2.x (they are Backends behind a
// dispatching ProcessGroup) differ.
template <class BackendT>
c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const GroupConfig& config,
                                                        c10::intrusive_ptr<BackendT> backend, bool cuda) {
#if ACCEL_TORCH_VERSION < 200
  (void)store;
  (void)config;
  (void)cuda;
  return backend;
#else
#if ACCEL_TORCH_VERSION < 206
  auto group = c10::make_intrusive<c10d::ProcessGroup>(
      store, config.rank, config.world_size,
      c10::make_intrusive<c10d::ProcessGroup::Options>(cuda ? "nccl" : "gloo", config.timeout));
#else
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, config.rank, config.world_size);
  group->setDefaultBackend(cuda ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO);
#endif
  if (cuda) {
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend);
  } else {
    // Gloo moves CUDA tensors too (through host memory): registering it for both device types is what lets
    // several ranks share one GPU, where NCCL refuses ("Duplicate GPU detected").
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
#ifdef ACCEL_WITH_CUDA
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, backend);
#endif
  }
  return group;
#endif
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const GroupConfig& config) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (is_loopback(config.master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

bool mentions(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

Code classify(const std::string& message) {
  if (mentions(message, "imed out") || mentions(message, "imeout")) return Code::Timeout;
  // Rank 0's store could not listen on the master port: another program holds it (or may not use it).
  // LibTorch 1.13 says "failed to bind", 2.x "failed to listen ... EADDRINUSE".
  if (mentions(message, "failed to bind") || mentions(message, "failed to listen") || mentions(message, "EADDRINUSE")) {
    return Code::Io;
  }
  return Code::PeerFailed;
}

std::string seconds(std::chrono::milliseconds timeout) {
  return format_number(static_cast<double>(timeout.count()) / 1000.0) + " s";
}

// Rank 0's verdict on the rendezvous, and the keys by which the other ranks say they have read it.
constexpr const char* kVerdictKey = "accel/rendezvous";
constexpr const char* kEveryRankArrived = "every rank arrived";
std::string verdict_read_key(int32_t rank) { return "accel/rendezvous-read/" + std::to_string(rank); }
// How long beyond the timeout the verdict's exchange may take on a busy machine: the others wait this much
// longer for it, and rank 0 at most this long for them to read it.
constexpr std::chrono::milliseconds kVerdictGrace(5000);
// How long a failed collective waits for the process of a rank whose connection broke to be gone, so as to
// name it: its sockets close while it exits.
constexpr std::chrono::milliseconds kExitGrace(500);

// c10d retries an address it cannot resolve until the timeout; a name that does not resolve now is a
// configuration error, so it fails at once.
void require_resolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (status != 0) {
    fail(Code::Environment, "the master address '" + host + "' (MASTER_ADDR) cannot be resolved: " + gai_strerror(status));
  }
  freeaddrinfo(found);
}

// The kinds of the collective records (stall_report.hpp): what each collective can meet on the other ranks.
constexpr const char* kAllReduce = "all-reduce";
constexpr const char* kShmAllReduce = "shm-all-reduce";
constexpr const char* kAllGather = "all-gather";
constexpr const char* kBroadcast = "broadcast";
constexpr const char* kBarrier = "barrier";

// Work::wait with a timeout throws when the time passes first, and the work goes on, to be waited on again.
bool work_done(c10d::Work& work, std::chrono::milliseconds slice) {
  try {
    work.wait(slice);
    return true;
  } catch (const std::exception&) {
    if (!work.isCompleted()) return false;
  }
  work.wait();  // done meanwhile: returns, or throws the work's own error
  return true;
}

// The first segment's room per rank; a larger tensor makes a larger one (the reducer's buckets do at the
// first step).
constexpr size_t kInitialSlotBytes = 1 << 20;

std::optional<ShmElement> shm_element(const at::Tensor& tensor) {
  if (!tensor.device().is_cpu()) return std::nullopt;
  switch (tensor.scalar_type()) {
    case at::kFloat: return ShmElement::Float32;
    case at::kDouble: return ShmElement::Float64;
    case at::kBFloat16: return ShmElement::BFloat16;
    case at::kHalf: return ShmElement::Float16;
    default: return std::nullopt;
  }
}

at::ScalarType scalar_type(ShmElement element) {
  switch (element) {
    case ShmElement::Float32: return at::kFloat;
    case ShmElement::Float64: return at::kDouble;
    case ShmElement::BFloat16: return at::kBFloat16;
    case ShmElement::Float16: return at::kHalf;
  }
  return at::kFloat;
}

// Runs the shared-memory all-reduces in the order they were started, on a thread of its own: the rank's
// own thread goes on with backward while a bucket waits for the other ranks (on a busy machine, a rank
// that waited at every bucket itself would lose a time slice at each).
class ShmThread {
 public:
  struct Job {
    at::Tensor tensor;  // contiguous: what goes through the segment
    at::Tensor target;  // the caller's tensor, when it is not `tensor`
    // Set when `tensor` lives in a resident segment, at this offset of the rank's slot: reduced in place.
    SharedMemoryAllreduce* resident = nullptr;
    size_t offset = 0;
    std::optional<PrivateAverage> average;  // resident only: allreduce_average_async's
    ShmElement element = ShmElement::Float32;
    ReduceKind kind = ReduceKind::Sum;
    std::function<void()> on_complete;
    std::promise<void> done;
  };

  // cancel_waits makes a wait in any segment this thread reduces in give up (SharedMemoryAllreduce::cancel).
  ShmThread(SharedMemoryAllreduce& shm, std::function<void()> cancel_waits)
      : shm_(shm), cancel_waits_(std::move(cancel_waits)), thread_([this] { run(); }) {}
  ~ShmThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_.notify_all();
    // Nobody waits for what is left (a broken group): it must not wait out the timeout either.
    cancel_waits_();
    thread_.join();
  }
  ShmThread(const ShmThread&) = delete;
  ShmThread& operator=(const ShmThread&) = delete;

  std::shared_future<void> submit(std::unique_ptr<Job> job) {
    auto done = job->done.get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    work_.notify_one();
    return done;
  }

  // The thread's CPU clock, read from outside; 0 if it cannot be read.
  double cpu_seconds() {
    clockid_t clock = 0;
    timespec time{};
    if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0 || clock_gettime(clock, &time) != 0) return 0;
    return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_nsec) * 1e-9;
  }

  // Returns once every submitted all-reduce is over: the segment may then be replaced.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
  }

 private:
  void run() {
    for (;;) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        busy_ = true;
      }
      execute(*job);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
      }
      idle_.notify_all();
    }
  }

  void execute(Job& job) {
    if (failure_) {
      job.done.set_exception(failure_);
      return;
    }
    try {
      if (job.resident != nullptr) {
        job.resident->allreduce_resident(job.offset, job.tensor.numel(), job.element, job.kind,
                                         job.average ? &*job.average : nullptr);
      } else {
        shm_.allreduce(job.tensor.data_ptr(), job.tensor.numel(), job.element, job.kind);
      }
      if (job.target.defined()) job.target.copy_(job.tensor);
      if (job.on_complete) job.on_complete();
      job.done.set_value();
    } catch (const Error& error) {
      // Different element counts leave the segment as usable as before; after anything else, no later
      // all-reduce can succeed.
      if (error.code() != Code::ShapeMismatch) failure_ = std::current_exception();
      job.done.set_exception(std::current_exception());
    } catch (...) {
      failure_ = std::current_exception();
      job.done.set_exception(failure_);
    }
  }

  SharedMemoryAllreduce& shm_;
  std::function<void()> cancel_waits_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<Job>> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;  // the worker's own
  std::thread thread_;          // last: starts once the rest is ready
};

}  // namespace

struct ProcessGroup::Impl {
  GroupConfig config;
  // Rank 0's: the job's store, listening only on MASTER_ADDR's address. First, so that it goes last.
  std::unique_ptr<StoreServer> server;
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<RecordPublisher> publisher;  // declared after the store, so that it stops first
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // On a node's leader, with shared memory across nodes: the leaders' own Gloo group, which all-reduces
  // the nodes' sums (Gloo itself: its Backend in 2.x has the same allreduce).
  c10::intrusive_ptr<c10d::ProcessGroupGloo> leaders;
  // With shared memory: who shares a node with whom, and across nodes the leaders' step (every segment's).
  NodeLayout layout;
  LeaderStep leader_step;
  std::unique_ptr<SharedMemoryAllreduce> shm;
  // Segments holding tensors of the callers' (shared_empty); a tensor keeps its segment mapped.
  // Weak: the tensors keep them, so that a model's buckets go away with the model.
  std::vector<std::weak_ptr<SharedMemoryAllreduce>> residents;
  int resident_segments_made = 0;  // numbers the next one's store keys
  bool resident_refusal_said = false;
  std::unique_ptr<ShmThread> shm_thread;  // after shm and residents: stops before the segments go
  std::string first_failure;
  int64_t started = 0;
  std::string announced;  // announce()'s operation, for the next collective's record
  // A backend operation given up for good (the ranks out of step): no rank will ever join it.
  bool abandoned = false;

  // ProcessGroupGloo's destructor waits for its operations, and an abandoned one ends only at the timeout
  // (30 minutes by default), or when every other rank's process is gone, which may itself be waiting here:
  // the group is left to the end of the process instead.
  ~Impl() {
    if (abandoned) (void)group.release();
  }

  void check_usable(const char* what) const {
    if (!first_failure.empty()) {
      fail(Code::InvalidState, std::string(what) + ": the process group is unusable since an earlier failure: " +
                                   first_failure);
    }
  }

  // Records reach the store within a quarter of the timeout (at most a second), long before anyone reads
  // them: a reader has waited a whole timeout first.
  void start_publishing() {
    const auto period = std::clamp(config.timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
    publisher = std::make_unique<RecordPublisher>(
        [this](const std::string& encoded) { set_text(record_key(config.rank), encoded); }, period);
  }

  // The record of the collective this rank starts. Named after the announced operation, if any, and then
  // sent at once, so that a rank in anything else at this point finds the two out of step without waiting
  // for the publisher's period.
  CollectiveRecord open_record(const char* what, const char* kind) {
    CollectiveRecord record{++started, wall_clock_ms(), false, what, kind};
    if (!announced.empty()) {
      record.what = record.kind = std::exchange(announced, {});
      publisher->update(record);
      try {
        publisher->flush();
      } catch (const std::exception&) {
        // The store is gone with rank 0: the collective fails for that itself.
      }
      return record;
    }
    publisher->update(record);
    return record;
  }

  // Waits in slices (watched_wait.hpp): nullopt once done, or the proof that the ranks are out of step.
  std::optional<std::string> watch(const CollectiveRecord& record, const WaitSlice& wait_slice) {
    return wait_in_step(config.rank, record, wait_slice, [this] { return read_records(); });
  }

  // Breaks the group as a timeout does, and says so in this rank's record at once: the other ranks,
  // wherever they wait, give up on seeing it.
  [[noreturn]] void out_of_step(const CollectiveRecord& record, const std::string& proof) {
    CollectiveRecord mine = record;
    mine.gave_up = mine.out_of_step = true;
    try {
      publisher->update(mine);
      publisher->flush();
      wait_for_peers_to_give_up(config.rank, [this] { return read_records(); });
    } catch (const std::exception&) {
      // Nobody left to tell.
    }
    const std::string text = record.what + " on rank " + std::to_string(config.rank) + ": " + proof;
    if (first_failure.empty()) first_failure = text;
    fail(Code::InvalidState, text);
  }

  // Every rank's latest record; throws what the store throws.
  std::vector<std::optional<CollectiveRecord>> read_records() {
    std::vector<std::optional<CollectiveRecord>> records;
    for (int32_t r = 0; r < config.world_size; ++r) {
      const std::string key = record_key(r);
      if (!store->check({key})) {
        records.emplace_back();
        continue;
      }
      const auto bytes = store->get(key);
      records.push_back(decode_record(std::string(bytes.begin(), bytes.end())));
    }
    return records;
  }

  // Marks `record` given up, so that the ranks still waiting see it, and says where every rank is.
  std::string stall_report_for(CollectiveRecord record) {
    try {
      record.gave_up = true;
      publisher->update(record);
      publisher->flush();
      return stall_report(record, read_records(), wall_clock_ms());
    } catch (const std::exception& error) {
      return "the other ranks' progress could not be read from the store: " + message_of(error);
    }
  }

  std::string rendezvous_name() const {
    return "rendezvous of rank " + std::to_string(config.rank) + " of " + std::to_string(config.world_size) + " at " +
           config.master_addr + ":" + std::to_string(config.master_port);
  }

  [[noreturn]] void rendezvous_timed_out(const std::string& why) const {
    fail(Code::Timeout, rendezvous_name() + " did not complete within " + seconds(config.timeout) + ": " + why);
  }

  void set_text(const std::string& key, const std::string& text) {
    store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
  }

  // A rendezvous before the backend's own, so that a timeout names the ranks that never came: rank 0
  // waits for every rank's arrival record, then publishes its verdict; the others wait for the verdict.
  // Every rank that came thus fails at the same moment with the same list.
  void await_every_rank() {
    if (config.rank == 0) {
      judge_arrivals();
    } else {
      await_verdict();
    }
  }

  void judge_arrivals() {
    std::vector<std::string> arrivals;
    for (int32_t r = 0; r < config.world_size; ++r) arrivals.push_back(record_key(r));
    try {
      store->wait(arrivals, config.timeout);
      set_text(kVerdictKey, kEveryRankArrived);
      return;
    } catch (const std::exception& error) {
      if (classify(message_of(error)) != Code::Timeout) throw;
    }
    const auto records = read_records();
    const std::string verdict = rendezvous_report(records);
    set_text(kVerdictKey, verdict);
    // The store goes away with this rank: the ranks that came read the verdict first. One that came and
    // went since is not waited for beyond the grace.
    std::vector<std::string> readers;
    for (int32_t r = 1; r < config.world_size; ++r) {
      if (records[static_cast<size_t>(r)]) readers.push_back(verdict_read_key(r));
    }
    try {
      if (!readers.empty()) store->wait(readers, std::min(config.timeout, kVerdictGrace));
    } catch (const std::exception&) {
    }
    rendezvous_timed_out(verdict);
  }

  void await_verdict() {
    // Rank 0 started waiting about when this rank could connect, so its verdict comes within the timeout
    // and the grace; only a rank 0 that hangs leaves this wait to time out.
    store->wait({kVerdictKey}, config.timeout + std::min(config.timeout, kVerdictGrace));
    const auto bytes = store->get(kVerdictKey);
    const std::string verdict(bytes.begin(), bytes.end());
    if (verdict == kEveryRankArrived) return;
    set_text(verdict_read_key(config.rank), "read");
    rendezvous_timed_out(verdict);
  }

  // For a rendezvous that timed out: which ranks never published their arrival.
  std::string missing_ranks() {
    if (!store) return "the store that rank 0 serves could not be reached";
    try {
      return rendezvous_report(read_records());
    } catch (const std::exception& error) {
      return "the store could not be read: " + message_of(error);
    }
  }

  // Waits for one collective; any failure breaks the group and becomes an accel::Error naming `what`.
  void finish(const CollectiveRecord& record, const c10::intrusive_ptr<c10d::Work>& work) {
    std::optional<std::string> proof;
    try {
      // NCCL's wait only orders streams (or, under NCCL_BLOCKING_WAIT, treats a timeout as fatal): no slices.
      if (config.backend == "nccl") {
        work->wait();
      } else {
        proof = watch(record, [&](std::chrono::milliseconds slice) { return work_done(*work, slice); });
      }
    } catch (const std::exception& error) {
      const std::string message = message_of(error);
      broke(record, message, classify(message));
    }
    if (proof) {
      abandoned = true;
      out_of_step(record, *proof);
    }
  }

  [[noreturn]] void broke(const CollectiveRecord& record, const std::string& message, Code code) {
    std::string text = record.what + " on rank " + std::to_string(config.rank) + ": ";
    text += code == Code::Timeout ? "timed out after " + seconds(config.timeout) + " waiting for the other ranks (" +
                                        message + "); " + stall_report_for(record)
                                  : who_left() + " (" + message + ")";
    if (first_failure.empty()) first_failure = text;
    fail(code, text);
  }

  // Published once every rank arrived: what departed_ranks needs to name a rank whose process is gone.
  void publish_identity() { set_text(identity_key(config.rank), process_identity()); }

  static std::string identity_key(int32_t rank) { return "accel/process/" + std::to_string(rank); }

  // For a failure that is not a timeout: the ranks of this host whose process exited, or, when rank 0's
  // store cannot be read any more, rank 0; else the backend's own words will have to do.
  std::string who_left() {
    std::vector<std::optional<std::string>> identities;
    try {
      for (int32_t r = 0; r < config.world_size; ++r) {
        const std::string key = identity_key(r);
        if (!store->check({key})) {
          identities.emplace_back();
          continue;
        }
        const auto bytes = store->get(key);
        identities.emplace_back(std::string(bytes.begin(), bytes.end()));
      }
    } catch (const std::exception&) {
      if (config.rank != 0) return "rank 0, which serves the rendezvous store, exited or cannot be reached";
    }
    const std::string gone = departed_ranks(config.rank, identities, kExitGrace);
    return gone.empty() ? "another rank failed or exited" : gone;
  }

  ShmExchange shm_exchange() {
    return {[this](const std::string& key, const std::string& value) { set_text(key, value); },
            [this](const std::string& key) {
              store->wait({key}, config.timeout);
              const auto bytes = store->get(key);
              return std::string(bytes.begin(), bytes.end());
            }};
  }

  void set_up_shared_memory() {
    layout = discover_nodes(config.rank, config.world_size, config.group_rank, shm_exchange());
    if (layout.largest_node == 1) {
      give_up_shared_memory("every node has a single rank");
      return;
    }
    if (layout.nodes() > 1) {
      // A failure names the leaders: with two nodes, the one that went away.
      std::string named = "the all-reduce between the nodes' leaders (ranks";
      for (size_t n = 0; n < layout.leaders.size(); ++n) {
        named += (n == 0 ? " " : ", ") + std::to_string(layout.leaders[n]);
      }
      named += ") failed";
      leader_step = [this, named](void* data, int64_t numel, ShmElement type, ReduceKind kind) {
        allreduce_between_leaders(data, numel, type, kind, named);
      };
    }
    std::string why_not;
    shm = SharedMemoryAllreduce::create(layout, config.master_port, config.timeout, shm_exchange(), kInitialSlotBytes,
                                        leader_step, &why_not);
    if (!shm) {
      give_up_shared_memory(why_not);
      return;
    }
    if (layout.nodes() > 1 && layout.leader()) {
      auto options = c10d::ProcessGroupGloo::Options::create(config.timeout);
      options->devices.push_back(gloo_device(config));
      options->threads = 2;
      auto leaders_store = c10::make_intrusive<c10d::PrefixStore>("accel_leaders", store);
      leaders = c10::make_intrusive<c10d::ProcessGroupGloo>(leaders_store, layout.node, layout.nodes(), options);
    }
    shm_thread = std::make_unique<ShmThread>(*shm, [this] { cancel_shared_memory_waits(); });
  }

  // The leader step (shm_allreduce.hpp), on the shared-memory thread: the node's sum, in place in the segment.
  void allreduce_between_leaders(void* data, int64_t numel, ShmElement type, ReduceKind kind, const std::string& what) {
    std::vector<at::Tensor> tensors{at::from_blob(data, {numel}, at::TensorOptions().dtype(scalar_type(type)))};
    c10d::AllreduceOptions options;
    options.reduceOp = kind == ReduceKind::Max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    try {
      leaders->allreduce(tensors, options)->wait();
    } catch (const std::exception& error) {
      const std::string message = message_of(error);
      fail(classify(message), what + " (" + message + ")");
    }
  }

  // Every rank comes here together: the segment's negotiation told them all the same.
  void give_up_shared_memory(const std::string& why) {
    shm_thread.reset();
    shm.reset();
    if (config.shared_memory_required) {
      fail(Code::Io, "intra_node_transport 'shm': the shared-memory segment could not be set up: " + why);
    }
    if (config.rank == 0) {
      std::fprintf(stderr, "accel: all-reduces go through Gloo instead of shared memory: %s\n", why.c_str());
    }
  }

  struct SharedStarted {
    CollectiveRecord record;
    std::shared_future<void> done;
  };

  // Hands the all-reduce to the shared-memory thread; nullopt when the tensor is not for shared memory
  // (not on the CPU, not a float type, no segment), or shared memory was just given up: the backend's then.
  std::optional<SharedStarted> start_shared(at::Tensor& tensor, ReduceKind kind, const char* what,
                                            std::function<void()>& on_complete,
                                            std::optional<PrivateAverage> average = std::nullopt) {
    const auto element = shm ? shm_element(tensor) : std::nullopt;
    if (!element) return std::nullopt;
    check_usable(what);
    CollectiveRecord record = open_record(what, kShmAllReduce);
    auto job = std::make_unique<ShmThread::Job>();
    job->tensor = tensor.contiguous();
    if (!job->tensor.is_same(tensor)) job->target = tensor;
    job->element = *element;
    job->kind = kind;
    const auto bytes = static_cast<size_t>(job->tensor.nbytes());
    std::tie(job->resident, job->offset) = resident_of(job->tensor);
    if (average && (job->resident == nullptr || !job->resident->averages_privately(*element))) {
      fail(Code::Internal, std::string(what) + ": an average with a private share of a tensor outside a resident segment");
    }
    if (job->resident == nullptr && !shm->fits(bytes)) {
      shm_thread->drain();
      std::string why_not;
      bool reserved = false;
      try {
        reserved = shm->reserve(bytes, &why_not);
      } catch (const std::exception& error) {
        const std::string message = message_of(error);
        broke(record, message, classify(message));
      }
      if (!reserved) {
        give_up_shared_memory(why_not);
        return std::nullopt;
      }
    }
    job->average = std::move(average);
    job->on_complete = std::move(on_complete);
    return SharedStarted{std::move(record), shm_thread->submit(std::move(job))};
  }

  // Frees the shared-memory thread from a wait in whichever segment it is.
  void cancel_shared_memory_waits() {
    if (shm) shm->cancel();
    for (const auto& weak : residents) {
      if (const auto resident = weak.lock()) resident->cancel();
    }
  }

  std::optional<std::pair<int64_t, int64_t>> private_share_of(const at::Tensor& tensor) const {
    const auto element = shm && tensor.is_contiguous() ? shm_element(tensor) : std::nullopt;
    if (!element) return std::nullopt;
    const auto resident = resident_of(tensor).first;
    if (resident == nullptr || !resident->averages_privately(*element)) return std::nullopt;
    return resident->share_of(tensor.numel(), *element);
  }

  // The shared-memory all-reduce of `tensor` as a PendingCollective: nullptr when it does not go through
  // shared memory (start_shared), a FailedCollective when it could not start.
  std::unique_ptr<PendingCollective> pending_shared(at::Tensor& tensor, const char* what,
                                                    std::function<void()>& on_complete,
                                                    std::optional<PrivateAverage> average = std::nullopt);

  // The resident segment that holds `tensor` and its offset there; nullptr when none does.
  std::pair<SharedMemoryAllreduce*, size_t> resident_of(const at::Tensor& tensor) const {
    const char* data = static_cast<const char*>(tensor.data_ptr());
    for (const auto& weak : residents) {
      const auto resident = weak.lock();
      if (!resident) continue;
      const char* slot = resident->resident_data();
      if (data >= slot && resident->fits(static_cast<size_t>(data - slot) + static_cast<size_t>(tensor.nbytes()))) {
        return {resident.get(), static_cast<size_t>(data - slot)};
      }
    }
    return {nullptr, 0};
  }

  at::Tensor shared_empty(int64_t numel, const at::Tensor& like) {
    const auto element = shm ? shm_element(like) : std::nullopt;
    if (!element) return {};
    const size_t bytes = static_cast<size_t>(numel) * shm_element_size(*element);
    std::string why_not;
    const SharedMemoryAllreduce::Resident resident{resident_segments_made++};
    std::shared_ptr<SharedMemoryAllreduce> segment;
    try {
      segment = SharedMemoryAllreduce::create(layout, config.master_port, config.timeout, shm_exchange(), bytes,
                                              leader_step, &why_not, &resident);
    } catch (const std::exception& error) {
      fail(classify(message_of(error)), "setting up shared memory for gradient buckets: " + message_of(error));
    }
    if (!segment) {
      // Every rank learnt the same; the tensors then go through the shared segment with copies, as others do.
      if (config.rank == 0 && !resident_refusal_said) {
        resident_refusal_said = true;
        std::fprintf(stderr, "accel: gradient buckets are copied through shared memory: %s\n", why_not.c_str());
      }
      return {};
    }
    residents.erase(std::remove_if(residents.begin(), residents.end(),
                                   [](const std::weak_ptr<SharedMemoryAllreduce>& weak) { return weak.expired(); }),
                    residents.end());
    residents.push_back(segment);
    return at::from_blob(
        segment->resident_data(), {numel}, [segment](void*) {}, like.options().requires_grad(false));
  }

  void finish_shared(const SharedStarted& work) {
    std::optional<std::string> proof;
    try {
      proof = watch(work.record, [&](std::chrono::milliseconds slice) {
        if (work.done.wait_for(slice) != std::future_status::ready) return false;
        work.done.get();
        return true;
      });
    } catch (const Error& error) {
      if (error.code() == Code::ShapeMismatch) fail(Code::ShapeMismatch, work.record.what + ": " + error.what());
      broke(work.record, error.what(), error.code());
    } catch (const std::exception& error) {
      const std::string message = message_of(error);
      broke(work.record, message, classify(message));
    }
    if (proof) {
      cancel_shared_memory_waits();  // a barrier that no rank will ever reach
      out_of_step(work.record, *proof);
    }
  }

  struct Started {
    CollectiveRecord record;
    c10::intrusive_ptr<c10d::Work> work;
  };

  Started begin(const char* what, const char* kind, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    check_usable(what);
    CollectiveRecord record = open_record(what, kind);
    try {
      return {std::move(record), start()};
    } catch (const std::exception& error) {
      first_failure = std::string(what) + " on rank " + std::to_string(config.rank) + " could not start: " + message_of(error);
      fail(Code::PeerFailed, first_failure);
    }
  }

  void run(const char* what, const char* kind, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    const timeline::Span span(what);
    const Started started_work = begin(what, kind, start);
    finish(started_work.record, started_work.work);
  }
};

namespace {

class PendingShared final : public PendingCollective {
 public:
  PendingShared(ProcessGroup::Impl* group, ProcessGroup::Impl::SharedStarted started)
      : group_(group), started_(std::move(started)) {}
  void wait() override { group_->finish_shared(started_); }

 private:
  ProcessGroup::Impl* group_;
  ProcessGroup::Impl::SharedStarted started_;
};

// A collective that could not start; wait() reports why, as the backend's report their failures.
class FailedCollective final : public PendingCollective {
 public:
  explicit FailedCollective(std::exception_ptr error) : error_(std::move(error)) {}
  void wait() override { std::rethrow_exception(error_); }

 private:
  std::exception_ptr error_;
};

class PendingWork final : public PendingCollective {
 public:
  PendingWork(ProcessGroup::Impl* group, ProcessGroup::Impl::Started started)
      : group_(group), started_(std::move(started)) {}
  void wait() override { group_->finish(started_.record, started_.work); }

 private:
  ProcessGroup::Impl* group_;
  ProcessGroup::Impl::Started started_;
};

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

std::unique_ptr<ProcessGroup> ProcessGroup::create(const GroupConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  require_resolvable(config.master_addr);
  try {
    const int64_t generation = begin_rendezvous_generation();
    if (config.rank == 0) {
      impl->server = std::make_unique<StoreServer>(config.master_addr, config.master_port, config.job_key, generation);
    }
    auto tcp = c10::make_intrusive<JobStore>(config.master_addr, config.master_port, config.job_key, generation,
                                             config.timeout);
    impl->store = c10::make_intrusive<c10d::PrefixStore>("accel_default_pg", tcp);
    impl->start_publishing();
    // Collective 0: the record that says this rank arrived.
    impl->publisher->update(CollectiveRecord{0, wall_clock_ms(), false, "rendezvous", "rendezvous"});
    impl->publisher->flush();
    impl->await_every_rank();
    impl->publish_identity();
    if (config.backend == "nccl") {
#ifdef ACCEL_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = config.timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, config.rank, config.world_size, options);
      impl->group = as_process_group(impl->store, config, nccl, /*cuda=*/true);
#else
      fail(Code::Unsupported, "backend 'nccl' is not built into this libaccel (LibTorch without CUDA)");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(config.timeout);
      options->devices.push_back(gloo_device(config));
      options->threads = 2;
      auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, config.rank, config.world_size, options);
      impl->group = as_process_group(impl->store, config, gloo, /*cuda=*/false);
      if (config.shared_memory) impl->set_up_shared_memory();
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    const std::string message = message_of(error);
    const Code code = classify(message);
    if (code != Code::Timeout) fail(code, impl->rendezvous_name() + " failed: " + message);
    impl->rendezvous_timed_out(impl->missing_ranks() + " (" + message + ")");
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

int32_t ProcessGroup::rank() const { return impl_->config.rank; }
int32_t ProcessGroup::world_size() const { return impl_->config.world_size; }
bool ProcessGroup::broken() const { return !impl_->first_failure.empty(); }
bool ProcessGroup::uses_shared_memory() const { return impl_->shm != nullptr; }
bool ProcessGroup::shared_memory_spans_nodes() const { return impl_->shm && impl_->shm->nodes() > 1; }
bool ProcessGroup::allreduces_bfloat16() const {
  // Across nodes the leaders' step goes through Gloo as well.
  return (impl_->shm != nullptr && impl_->shm->nodes() == 1) || impl_->config.backend == "nccl" ||
         ACCEL_TORCH_VERSION >= 200;
}
const std::string& ProcessGroup::first_failure() const { return impl_->first_failure; }

void ProcessGroup::allreduce(at::Tensor& tensor, ReduceKind kind, const char* what) {
  if (impl_->shm && shm_element(tensor)) {
    const timeline::Span span(what);
    std::function<void()> no_callback;
    if (const auto started = impl_->start_shared(tensor, kind, what, no_callback)) {
      impl_->finish_shared(*started);
      return;
    }
  }
  impl_->run(what, kAllReduce, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = kind == ReduceKind::Max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    return impl_->group->allreduce(tensors, options);
  });
}

std::unique_ptr<PendingCollective> ProcessGroup::Impl::pending_shared(at::Tensor& tensor, const char* what,
                                                                      std::function<void()>& on_complete,
                                                                      std::optional<PrivateAverage> average) {
  try {
    if (auto started = start_shared(tensor, ReduceKind::Sum, what, on_complete, std::move(average))) {
      return std::make_unique<PendingShared>(this, std::move(*started));
    }
  } catch (const std::exception&) {
    return std::make_unique<FailedCollective>(std::current_exception());
  }
  return nullptr;
}

std::unique_ptr<PendingCollective> ProcessGroup::allreduce_async(at::Tensor& tensor, const char* what,
                                                                 std::function<void()> on_complete) {
  if (auto pending = impl_->pending_shared(tensor, what, on_complete)) return pending;
  auto started = impl_->begin(what, kAllReduce, [&] {
    std::vector<at::Tensor> tensors{tensor};
    return impl_->group->allreduce(tensors);
  });
  if (on_complete) {
    // Runs on the backend's thread when the data has arrived, which is what a timeline wants to show (the
    // caller's wait may come much later).
    started.work->getFuture()->addCallback([on_complete](c10::ivalue::Future&) { on_complete(); });
  }
  return std::make_unique<PendingWork>(impl_.get(), std::move(started));
}

std::optional<std::pair<int64_t, int64_t>> ProcessGroup::private_share(const at::Tensor& tensor) const {
  return impl_->private_share_of(tensor);
}

std::unique_ptr<PendingCollective> ProcessGroup::allreduce_average_async(at::Tensor& tensor, PrivateAverage average,
                                                                         const char* what,
                                                                         std::function<void()> on_complete) {
  if (auto pending = impl_->pending_shared(tensor, what, on_complete, std::move(average))) return pending;
  return std::make_unique<FailedCollective>(std::make_exception_ptr(
      Error(Code::Internal, std::string(what) + ": an average with a private share needs the shared-memory transport")));
}

int64_t ProcessGroup::collectives_started() const { return impl_->started; }

void ProcessGroup::announce(const char* operation) { impl_->announced = operation; }
double ProcessGroup::helper_cpu_seconds() const {
  return impl_->shm_thread ? impl_->shm_thread->cpu_seconds() : 0.0;
}
at::Tensor ProcessGroup::shared_empty(int64_t numel, const at::Tensor& like) { return impl_->shared_empty(numel, like); }

void ProcessGroup::allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what) {
  impl_->run(what, kAllGather, [&] {
    std::vector<std::vector<at::Tensor>> out{outputs};
    std::vector<at::Tensor> in{input};
    return impl_->group->allgather(out, in);
  });
}

void ProcessGroup::broadcast(at::Tensor& tensor, int32_t root, const char* what) {
  impl_->run(what, kBroadcast, [&] {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return impl_->group->broadcast(tensors, options);
  });
}

void ProcessGroup::barrier(const char* what) {
  impl_->run(what, kBarrier, [&] { return impl_->group->barrier(); });
}

}  // namespace accel::distributed
