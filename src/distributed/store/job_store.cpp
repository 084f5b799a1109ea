#include "distributed/store/job_store.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>

#include "distributed/store/store_wire.hpp"

namespace accel::distributed {

namespace {

using wire::Op;
using Clock = std::chrono::steady_clock;

// How long past an operation's own timeout a reply may take before the server counts as gone.
constexpr std::chrono::seconds kReplyGrace(30);

// One connection attempt to every address host resolves to; -1 when none answered.
int try_connect(const std::string& host, uint16_t port, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); status != 0) {
    why = std::string("cannot resolve: ") + ::gai_strerror(status);
    return -1;
  }
  int fd = -1;
  for (addrinfo* candidate = found; candidate != nullptr && fd < 0; candidate = candidate->ai_next) {
    fd = ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, candidate->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, candidate->ai_addr, candidate->ai_addrlen) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> bytes_of(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

std::string request(Op op) {
  std::string out;
  wire::put_u8(out, static_cast<uint8_t>(op));
  return out;
}

std::optional<Clock::time_point> reply_deadline(std::chrono::milliseconds wait) {
  if (wait.count() == 0) return std::nullopt;  // waiting without a timeout
  return Clock::now() + wait + kReplyGrace;
}

}  // namespace

JobStore::JobStore(const std::string& host, uint16_t port, const std::string& job_key, int64_t generation,
                   std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      host_(host),
      port_(port),
      job_key_(job_key),
      generation_(generation),
      where_("the rendezvous store at " + host + ":" + std::to_string(port)) {
  const auto deadline = Clock::now() + timeout;
  std::string why;
  for (auto pause = std::chrono::milliseconds(5);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    fd_ = try_connect(host, port, why);
    if (fd_ >= 0) {
      const Greeting greeting = greet(deadline + kReplyGrace);
      if (greeting == Greeting::Accepted) return;
      ::close(fd_);
      fd_ = -1;
      if (greeting == Greeting::Refused) {
        throw std::runtime_error(where_ + " refused this process: its job key (ACCEL_JOB_KEY) differs, or it " +
                                 "serves another job or version");
      }
      why = greeting == Greeting::OtherGeneration
                ? "it still serves the job's previous rendezvous (generation " + std::to_string(generation) + " wanted)"
                : "the connection ended before its greeting was answered";
    }
    if (Clock::now() >= deadline) throw std::runtime_error("timed out connecting to " + where_ + " (" + why + ")");
    std::this_thread::sleep_for(pause);
  }
}

JobStore::Greeting JobStore::greet(Clock::time_point deadline) {
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  std::string hello = request(Op::Hello);
  wire::put_u32(hello, wire::kVersion);
  wire::put_string(hello, job_key_);
  wire::put_i64(hello, generation_);
  try {
    wire::send_all(fd_, hello, where_);
    switch (wire::Reader(fd_, where_).u8(deadline)) {
      case 1:
        return Greeting::Accepted;
      case 2:
        return Greeting::OtherGeneration;
      default:
        return Greeting::Refused;
    }
  } catch (const std::runtime_error&) {
    return Greeting::Closed;  // a server that stops resets the connections it had not accepted yet
  }
}

#if TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR >= 206
c10::intrusive_ptr<c10d::Store> JobStore::clone() {
  return c10::make_intrusive<JobStore>(host_, port_, job_key_, generation_, std::chrono::milliseconds(timeout_));
}
#endif

JobStore::~JobStore() { ::close(fd_); }

void JobStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::string out = request(Op::Set);
  wire::put_string(out, key);
  wire::put_string(out, text_of(value));
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  wire::Reader(fd_, where_).u8(reply_deadline(timeout_));
}

std::vector<uint8_t> JobStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                          const std::vector<uint8_t>& desired) {
  std::string out = request(Op::CompareSet);
  wire::put_string(out, key);
  wire::put_string(out, text_of(expected));
  wire::put_string(out, text_of(desired));
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  return bytes_of(wire::Reader(fd_, where_).string());
}

std::vector<uint8_t> JobStore::get(const std::string& key) {
  std::string out = request(Op::Get);
  wire::put_string(out, key);
  wire::put_i64(out, wire::encode_timeout(timeout_));
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  wire::Reader in(fd_, where_);
  if (in.u8(reply_deadline(timeout_)) != 0) {
    throw std::runtime_error(where_ + ": timed out after " + std::to_string(timeout_.count()) + " ms waiting for key '" +
                             key + "'");
  }
  return bytes_of(in.string());
}

int64_t JobStore::add(const std::string& key, int64_t value) {
  std::string out = request(Op::Add);
  wire::put_string(out, key);
  wire::put_i64(out, value);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  return wire::Reader(fd_, where_).i64();
}

bool JobStore::deleteKey(const std::string& key) {
  std::string out = request(Op::Delete);
  wire::put_string(out, key);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  return wire::Reader(fd_, where_).u8(reply_deadline(timeout_)) == 1;
}

bool JobStore::check(const std::vector<std::string>& keys) {
  std::string out = request(Op::Check);
  wire::put_i64(out, static_cast<int64_t>(keys.size()));
  for (const std::string& key : keys) wire::put_string(out, key);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  return wire::Reader(fd_, where_).u8(reply_deadline(timeout_)) == 1;
}

int64_t JobStore::getNumKeys() {
  const std::string out = request(Op::NumKeys);
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  return wire::Reader(fd_, where_).i64();
}

void JobStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void JobStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::string out = request(Op::Wait);
  wire::put_i64(out, static_cast<int64_t>(keys.size()));
  for (const std::string& key : keys) wire::put_string(out, key);
  wire::put_i64(out, wire::encode_timeout(timeout));
  std::lock_guard<std::mutex> lock(mutex_);
  wire::send_all(fd_, out, where_);
  if (wire::Reader(fd_, where_).u8(reply_deadline(timeout)) != 0) {
    std::string names;
    for (const std::string& key : keys) names += (names.empty() ? "" : ", ") + key;
    throw std::runtime_error(where_ + ": wait timed out after " + std::to_string(timeout.count()) + " ms for " + names);
  }
}

}  // namespace accel::distributed
