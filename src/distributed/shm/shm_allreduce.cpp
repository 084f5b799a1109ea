#include "distributed/shm/shm_allreduce.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>

#include "core/error.hpp"
#include "core/options.hpp"
#include "distributed/shm/shm_kernels.hpp"
#include "distributed/shm/shm_names.hpp"

namespace accel::distributed {

namespace {

// memcpy's pointers must be valid even for 0 bytes, and an empty tensor's data pointer is null.
void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

constexpr size_t kPage = 4096;
// Pauses between two looks at the clock while a waiter spins (barrier_spin): under a microsecond.
constexpr int kPausesPerClockRead = 64;
// How often a sleeping waiter looks at the clock and at whether its peers still live.
constexpr std::chrono::milliseconds kSleepSlice(20);
using shm_kernels::kChunk;
// How much longer than the timeout a node's ranks wait for their leader's step, which may itself take the
// whole timeout before it fails and says why.
constexpr std::chrono::milliseconds kLeaderGrace(5000);
constexpr size_t kFailureText = 512;

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the barrier's atomics live in memory shared between processes");

struct Control {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;  // the futex word
  std::atomic<uint32_t> sleepers;
  // The leader step's failure: its Code once failure_text is written (0 while none).
  std::atomic<int32_t> failure_code;
  char failure_text[kFailureText];
};

size_t round_up(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }

std::string errno_text(int error) { return std::strerror(error); }

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds slice) {
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(slice.count() / 1000);
  timeout.tv_nsec = static_cast<long>((slice.count() % 1000) * 1000000);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string random_hex() {
  std::random_device device;
  const uint64_t value = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::chrono::microseconds barrier_spin(int32_t node_ranks, long cpus) {
  return cpus > 0 && node_ranks <= cpus ? kLongBarrierSpin : kShortBarrierSpin;
}

// The mapping: the control block, each rank's pid, each rank's element count per half, then two halves
// of one slot per rank (consecutive all-reduces alternate halves, so that a rank may start the next one
// while a slower one still copies the last result out). A resident segment has one half: its slots are
// the callers' tensors themselves, and every rank receives the result in its own slot.
struct SharedMemoryAllreduce::Segment {
  char* base = nullptr;
  size_t bytes = 0;
  size_t slot_bytes = 0;
  int32_t world = 1;
  int32_t halves = 2;

  ~Segment() {
    if (base != nullptr) munmap(base, bytes);
  }
  static size_t header_bytes(int32_t world) {
    return round_up(sizeof(Control) + static_cast<size_t>(world) * (sizeof(int32_t) + 2 * sizeof(int64_t)), kPage);
  }
  static size_t total_bytes(int32_t world, int32_t halves, size_t slot_bytes) {
    return header_bytes(world) + static_cast<size_t>(halves) * static_cast<size_t>(world) * slot_bytes;
  }
  Control* control() const { return reinterpret_cast<Control*>(base); }
  std::atomic<int32_t>* pids() const { return reinterpret_cast<std::atomic<int32_t>*>(base + sizeof(Control)); }
  std::atomic<int64_t>* numels(uint64_t half) const {
    auto* first = reinterpret_cast<std::atomic<int64_t>*>(
        base + round_up(sizeof(Control) + static_cast<size_t>(world) * sizeof(int32_t), sizeof(int64_t)));
    return first + half * static_cast<uint64_t>(world);
  }
  char* slot(uint64_t half, int32_t rank) const {
    return base + header_bytes(world) + (half * static_cast<uint64_t>(world) + static_cast<uint64_t>(rank)) * slot_bytes;
  }
};

std::unique_ptr<SharedMemoryAllreduce> SharedMemoryAllreduce::create(const NodeLayout& layout, uint16_t master_port,
                                                                     std::chrono::milliseconds timeout,
                                                                     ShmExchange exchange, size_t slot_bytes,
                                                                     LeaderStep leader_step, std::string* why_not,
                                                                     const Resident* resident) {
  std::unique_ptr<SharedMemoryAllreduce> shm(new SharedMemoryAllreduce());
  shm->resident_ = resident != nullptr;
  shm->store_prefix_ = resident != nullptr ? "accel/shm-resident" + std::to_string(resident->index) + "/" : "accel/shm/";
  shm->rank_ = layout.local_rank;
  shm->world_ = layout.local_size();
  shm->spin_ = barrier_spin(shm->world_, sysconf(_SC_NPROCESSORS_ONLN));
  shm->ranks_ = layout.members;
  shm->node_ = layout.node;
  shm->nodes_ = layout.nodes();
  if (layout.leader()) shm->leader_step_ = std::move(leader_step);
  shm->timeout_ = timeout;
  shm->exchange_ = std::move(exchange);
  shm->name_prefix_ = "/" + shm_segment_prefix(master_port, layout.node) + random_hex();
  if (!shm->map(slot_bytes, why_not)) return nullptr;
  shm->barrier();
  // A peer whose pid this process cannot see (another pid namespace) cannot be watched.
  shm->check_peers_ = true;
  for (int32_t r = 0; r < shm->world_; ++r) {
    const pid_t pid = shm->segment_->pids()[r].load();
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) shm->check_peers_ = false;
  }
  return shm;
}

SharedMemoryAllreduce::~SharedMemoryAllreduce() = default;

std::string SharedMemoryAllreduce::rank_name(int32_t local) const {
  return "rank " + std::to_string(ranks_[static_cast<size_t>(local)]);
}

bool SharedMemoryAllreduce::map(size_t slot_bytes, std::string* why_not) {
  slot_bytes = round_up(std::max<size_t>(slot_bytes, 1), kPage);
  const int32_t halves = resident_ ? 1 : 2;
  const size_t total = Segment::total_bytes(world_, halves, slot_bytes);
  // Keys per node, and a segment's number (the same on every node: every rank reserves alike) in them.
  const std::string epoch = std::to_string(epoch_++);
  const std::string key = store_prefix_ + "n" + std::to_string(node_) + "/" + epoch;
  std::string name, error;
  int fd = -1;
  if (rank_ == 0) {
    name = name_prefix_ + "-" + epoch;
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      error = "shm_open(" + name + ") failed: " + errno_text(errno);
    } else if (const int status = posix_fallocate(fd, 0, static_cast<off_t>(total)); status != 0) {
      // tmpfs gives pages on first touch: without reserving them, a full /dev/shm would be a SIGBUS later.
      error = "/dev/shm has no room for " + format_number(static_cast<double>(total) / (1 << 20)) + " MiB (" +
              errno_text(status) + ")";
    }
    exchange_.set(key, error.empty() ? name : "!" + error);
  } else {
    name = exchange_.wait_get(key);
    if (!name.empty() && name[0] == '!') {
      error = rank_name(0) + ": " + name.substr(1);
      name.clear();
    } else if (fd = shm_open(name.c_str(), O_RDWR, 0); fd < 0) {
      error = "shm_open(" + name + ") failed: " + errno_text(errno) + " (is " + rank_name(0) + " on another host?)";
    }
  }
  // Whatever happens from here on, the name goes: every rank that will map it has done so once all have
  // reported below, and a rank that throws leaves nothing behind either.
  struct Unlink {
    const std::string& name;
    bool owner;
    ~Unlink() {
      if (owner && !name.empty()) shm_unlink(name.c_str());
    }
  } unlink{name, rank_ == 0 && fd >= 0};
  auto segment = std::make_unique<Segment>();
  segment->world = world_;
  segment->halves = halves;
  segment->slot_bytes = slot_bytes;
  if (fd >= 0) {
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    struct stat st {};
    if (base == MAP_FAILED) {
      error = "mmap of " + name + " failed: " + errno_text(errno);
    } else {
      segment->base = static_cast<char*>(base);
      segment->bytes = total;
      if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < total) error = name + " is smaller than expected";
    }
    close(fd);
  }
  exchange_.set(key + "/" + std::to_string(rank_), error.empty() ? "mapped" : error);
  std::string first_error;
  for (int32_t r = 0; r < world_; ++r) {
    const std::string status = r == rank_ ? (error.empty() ? "mapped" : error) : exchange_.wait_get(key + "/" + std::to_string(r));
    if (status != "mapped" && first_error.empty()) first_error = r == rank_ ? status : rank_name(r) + ": " + status;
  }
  // Every node must go on alike (all through shared memory, or all through Gloo): the nodes' leaders say
  // how their node fared, and every rank reads every node's word.
  if (nodes_ > 1) {
    const std::string verdicts = store_prefix_ + epoch + "/node/";
    if (rank_ == 0) exchange_.set(verdicts + std::to_string(node_), first_error.empty() ? "mapped" : first_error);
    for (int32_t n = 0; n < nodes_ && first_error.empty(); ++n) {
      if (n == node_) continue;
      const std::string verdict = exchange_.wait_get(verdicts + std::to_string(n));
      if (verdict != "mapped") first_error = "node " + std::to_string(n) + ": " + verdict;
    }
  }
  if (!first_error.empty()) {
    *why_not = first_error;
    return false;
  }
  segment->pids()[rank_].store(static_cast<int32_t>(getpid()));
  segment_ = std::move(segment);
  return true;
}

bool SharedMemoryAllreduce::fits(size_t bytes) const { return bytes <= segment_->slot_bytes; }

char* SharedMemoryAllreduce::resident_data() const { return segment_->slot(0, rank_); }

bool SharedMemoryAllreduce::reserve(size_t bytes, std::string* why_not) {
  if (fits(bytes)) return true;
  // A little headroom, so that a slightly larger tensor later does not make another segment.
  return map(bytes + bytes / 4, why_not);
}

void SharedMemoryAllreduce::barrier(std::chrono::milliseconds grace) {
  Control* control = segment_->control();
  const uint32_t generation = control->generation.load(std::memory_order_acquire);
  if (control->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(world_)) {
    control->arrived.store(0, std::memory_order_relaxed);
    control->generation.fetch_add(1);
    if (control->sleepers.load() > 0) futex_wake_all(&control->generation);
    return;
  }
  const auto spin_until = std::chrono::steady_clock::now() + spin_;
  do {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (control->generation.load(std::memory_order_acquire) != generation) return;
      cpu_pause();
    }
  } while (std::chrono::steady_clock::now() < spin_until);
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + grace;
  for (;;) {
    // The last arriver bumps the generation, then wakes if it sees a sleeper; a sleeper announces itself,
    // then sleeps only on the old generation: one of the two sees the other.
    control->sleepers.fetch_add(1);
    if (control->generation.load() == generation) futex_wait(&control->generation, generation, kSleepSlice);
    control->sleepers.fetch_sub(1);
    if (control->generation.load(std::memory_order_acquire) != generation) return;
    if (cancelled_) fail(Code::PeerFailed, "the process group was destroyed during a shared-memory collective");
    if (const int32_t code = control->failure_code.load(std::memory_order_acquire); code != 0) {
      fail(static_cast<Code>(code), "this node's leader, " + rank_name(0) +
                                        ", failed to all-reduce with the other nodes: " + control->failure_text);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      fail(Code::Timeout, "timed out in the shared-memory segment's barrier");
    }
    if (!check_peers_) continue;
    for (int32_t r = 0; r < world_; ++r) {
      const pid_t pid = segment_->pids()[r].load();
      if (r != rank_ && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
        fail(Code::PeerFailed, rank_name(r) + " (process " + std::to_string(pid) +
                                   ") exited during a shared-memory collective");
      }
    }
  }
}

void SharedMemoryAllreduce::run_leader_step(char* data, int64_t numel, ShmElement type, ReduceKind kind) {
  try {
    leader_step_(data, numel, type, kind);
  } catch (const std::exception& error) {
    // The message first, then the code that publishes it: a waiter that sees the code reads it whole.
    Control* control = segment_->control();
    const std::string text = message_of(error);
    const size_t length = std::min(text.size(), kFailureText - 1);
    std::memcpy(control->failure_text, text.data(), length);
    control->failure_text[length] = '\0';
    control->failure_code.store(static_cast<int32_t>(code_of(error, Code::PeerFailed)), std::memory_order_release);
    futex_wake_all(&control->generation);
    throw;
  }
}

uint64_t SharedMemoryAllreduce::copy_in(const void* data, int64_t numel, ShmElement type) {
  const uint64_t half = operations_++ % 2;
  copy_bytes(segment_->slot(half, rank_), data, static_cast<size_t>(numel) * shm_element_size(type));
  return half;
}

void SharedMemoryAllreduce::allreduce(void* data, int64_t numel, ShmElement type, ReduceKind kind) {
  const uint64_t half = copy_in(data, numel, type);
  reduce(half, 0, numel, type, kind);
  copy_bytes(data, segment_->slot(half, 0), static_cast<size_t>(numel) * shm_element_size(type));
}

// One barrier suffices on one node: a rank writes this half again two operations later, once every rank
// has arrived at the next operation's barrier, so done reading this one.
void SharedMemoryAllreduce::reduce_scatter(const void* data, int64_t numel, ShmElement type, ReduceKind kind,
                                           int64_t begin, int64_t count, void* out) {
  const uint64_t half = copy_in(data, numel, type);
  const size_t element = shm_element_size(type);
  if (nodes_ > 1) {
    reduce(half, 0, numel, type, kind);
    copy_bytes(out, segment_->slot(half, 0) + static_cast<size_t>(begin) * element, static_cast<size_t>(count) * element);
    return;
  }
  agree_on_numel(half, numel, "reduce-scatter");
  std::vector<char*>& slots = slots_;
  slots.resize(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) slots[static_cast<size_t>(r)] = segment_->slot(half, r);
  char* to = static_cast<char*>(out);
  const int64_t end = begin + count;
  switch (type) {
    case ShmElement::Float32: shm_kernels::reduce_native<float>(slots.data(), world_, begin, end, kind, to, begin); break;
    case ShmElement::Float64: shm_kernels::reduce_native<double>(slots.data(), world_, begin, end, kind, to, begin); break;
    case ShmElement::BFloat16:
      shm_kernels::reduce_widened<c10::BFloat16>(slots.data(), world_, begin, end, kind, to, begin);
      break;
    case ShmElement::Float16: shm_kernels::reduce_widened<c10::Half>(slots.data(), world_, begin, end, kind, to, begin); break;
  }
}

void SharedMemoryAllreduce::all_gather(const void* data, int64_t numel, ShmElement type, void* out) {
  if (nodes_ > 1) fail(Code::Internal, "the shared-memory all-gather joins the ranks of one node only");
  const uint64_t half = copy_in(data, numel, type);
  agree_on_numel(half, numel, "all-gather");
  const size_t bytes = static_cast<size_t>(numel) * shm_element_size(type);
  if (bytes == 0) return;
  for (int32_t r = 0; r < world_; ++r) {
    std::memcpy(static_cast<char*>(out) + static_cast<size_t>(r) * bytes, segment_->slot(half, r), bytes);
  }
}

bool SharedMemoryAllreduce::averages_privately(ShmElement type) const {
  return resident_ && nodes_ == 1 && (type == ShmElement::Float32 || type == ShmElement::Float64);
}

std::pair<int64_t, int64_t> SharedMemoryAllreduce::share_of(int64_t numel, ShmElement type) const {
  const int64_t line = static_cast<int64_t>(64 / shm_element_size(type));
  const int64_t share = (numel + world_ - 1) / world_;
  const int64_t per_rank = (share + line - 1) / line * line;
  const int64_t lo = std::min(numel, per_rank * rank_);
  return {lo, std::min(numel, lo + per_rank)};
}

void SharedMemoryAllreduce::allreduce_resident(size_t offset, int64_t numel, ShmElement type, ReduceKind kind,
                                               const PrivateAverage* average) {
  if (average != nullptr && (!averages_privately(type) || kind != ReduceKind::Sum)) {
    fail(Code::Internal, "an average with a private share needs a resident float segment on one node");
  }
  reduce(operations_++ % 2, offset, numel, type, kind, average);
  if (nodes_ == 1) return;
  // Across nodes the result is in the leader's slot only (the leader step worked there), which is the
  // leader's own tensor: it may change it only once every rank has copied the result out.
  if (rank_ != 0) {
    copy_bytes(resident_data() + offset, segment_->slot(0, 0) + offset, static_cast<size_t>(numel) * shm_element_size(type));
  }
  barrier();
}

void SharedMemoryAllreduce::agree_on_numel(uint64_t half, int64_t numel, const char* operation) {
  if (!unusable_.empty()) fail(Code::PeerFailed, unusable_);
  std::atomic<int64_t>* numels = segment_->numels(half);
  numels[rank_].store(numel, std::memory_order_relaxed);
  barrier();
  for (int32_t r = 0; r < world_; ++r) {
    if (numels[r].load(std::memory_order_relaxed) != numel) {
      std::string counts;
      for (int32_t q = 0; q < world_; ++q) {
        counts += (q == 0 ? "" : ", ") + rank_name(q) + ": " +
                  std::to_string(numels[q].load(std::memory_order_relaxed));
      }
      const std::string message = std::string(operation) + " of tensors with different element counts (" + counts + ")";
      // The other nodes' leaders wait for this node's sum, which will not come: nothing can follow.
      if (nodes_ > 1) unusable_ = "an earlier " + message + " left the nodes out of step";
      fail(Code::ShapeMismatch, message);
    }
  }
}

void SharedMemoryAllreduce::reduce(uint64_t half, size_t offset, int64_t numel, ShmElement type, ReduceKind kind,
                                   const PrivateAverage* average) {
  agree_on_numel(half, numel, "all-reduce");
  const size_t element = shm_element_size(type);
  const auto [lo, hi] = share_of(numel, type);
  std::vector<char*>& slots = slots_;
  slots.resize(static_cast<size_t>(world_));
  const uint64_t slot_half = resident_ ? 0 : half;
  for (int32_t r = 0; r < world_; ++r) slots[static_cast<size_t>(r)] = segment_->slot(slot_half, r) + offset;
  if (average != nullptr) {
    if (type == ShmElement::Float32) {
      shm_kernels::reduce_private_average<float>(slots.data(), world_, rank_, *average, lo, hi);
    } else {
      shm_kernels::reduce_private_average<double>(slots.data(), world_, rank_, *average, lo, hi);
    }
    barrier();
    return;
  }
  // On one node, a resident all-reduce hands each piece of the result to every rank while it is in cache.
  const bool to_every_slot = resident_ && nodes_ == 1;
  const int64_t piece = to_every_slot ? kChunk * 16 : std::max<int64_t>(hi - lo, 1);
  for (int64_t start = lo; start < hi; start += piece) {
    const int64_t end = std::min(hi, start + piece);
    switch (type) {
      case ShmElement::Float32: shm_kernels::reduce_native<float>(slots.data(), world_, start, end, kind, slots[0], 0); break;
      case ShmElement::Float64: shm_kernels::reduce_native<double>(slots.data(), world_, start, end, kind, slots[0], 0); break;
      case ShmElement::BFloat16:
        shm_kernels::reduce_widened<c10::BFloat16>(slots.data(), world_, start, end, kind, slots[0], 0);
        break;
      case ShmElement::Float16:
        shm_kernels::reduce_widened<c10::Half>(slots.data(), world_, start, end, kind, slots[0], 0);
        break;
    }
    if (!to_every_slot) continue;
    const size_t at = static_cast<size_t>(start) * element;
    const size_t length = static_cast<size_t>(end - start) * element;
    for (int32_t r = 1; r < world_; ++r) std::memcpy(slots[static_cast<size_t>(r)] + at, slots[0] + at, length);
  }
  barrier();
  if (nodes_ > 1) {
    if (leader_step_) run_leader_step(slots[0], numel, type, kind);
    barrier(kLeaderGrace);
  }
}

}  // namespace accel::distributed
