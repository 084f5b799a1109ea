#include "distributed/store/store_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "distributed/store/store_wire.hpp"

namespace accel::distributed {

namespace {

using wire::Op;

// A stranger's connection that says nothing is dropped after this long.
constexpr std::chrono::seconds kHelloWait(10);

std::string describe(const sockaddr* address, socklen_t length) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  ::getnameinfo(address, length, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

int listen_on(const std::string& address, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = address + ":" + std::to_string(port);
  if (const int status = ::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found); status != 0) {
    fail(Code::Environment, "cannot resolve the master address '" + address + "': " + ::gai_strerror(status));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* candidate = found; candidate != nullptr && fd < 0; candidate = candidate->ai_next) {
    fd = ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, candidate->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a previous job's connections in TIME_WAIT
    if (::bind(fd, candidate->ai_addr, candidate->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = describe(candidate->ai_addr, candidate->ai_addrlen) + ": " + std::strerror(errno) +
            (errno == EADDRINUSE ? " (EADDRINUSE)" : errno == EADDRNOTAVAIL ? " (not an address of this host)" : "");
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) fail(Code::Io, "the rendezvous store failed to bind to " + where + ": " + why);
  return fd;
}

}  // namespace

StoreServer::StoreServer(const std::string& address, uint16_t port, std::string job_key, int64_t generation)
    : job_key_(std::move(job_key)), generation_(generation), listen_fd_(listen_on(address, port)) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

StoreServer::~StoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Connection& connection : connections_) ::shutdown(connection.fd, SHUT_RDWR);
  }
  changed_.notify_all();
  for (Connection& connection : connections_) {
    connection.thread.join();
    ::close(connection.fd);
  }
}

uint16_t StoreServer::port() const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(address).sin6_port
                                             : reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

void StoreServer::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
      return;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    reap_finished();
    Connection& connection = connections_.emplace_back();
    connection.fd = fd;
    connection.thread = std::thread([this, &connection] { serve(connection); });
  }
}

void StoreServer::reap_finished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    ::close(it->fd);
    it = connections_.erase(it);
  }
}

void StoreServer::serve(Connection& connection) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getpeername(connection.fd, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string peer = "the client at " + describe(reinterpret_cast<sockaddr*>(&address), length);
  try {
    wire::Reader in(connection.fd, peer);
    const bool hello = in.u8(std::chrono::steady_clock::now() + kHelloWait) == static_cast<uint8_t>(Op::Hello);
    const bool this_job = hello && in.u32() == wire::kVersion && in.string() == job_key_;
    const bool accepted = this_job && in.i64() == generation_;
    std::string reply;
    wire::put_u8(reply, accepted ? 1 : this_job ? 2 : 0);
    wire::send_all(connection.fd, reply, peer);
    while (accepted && handle(connection.fd, peer)) {
    }
  } catch (const std::exception&) {
    // The client went away, or sent what is not a request: its connection ends, nothing else does.
  }
  ::shutdown(connection.fd, SHUT_RDWR);
  std::lock_guard<std::mutex> lock(mutex_);
  connection.done = true;
}

bool StoreServer::wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, int64_t timeout_ms) {
  const auto all_set = [&] {
    return stopping_ || std::all_of(keys.begin(), keys.end(), [&](const std::string& key) { return values_.count(key) != 0; });
  };
  if (timeout_ms < 0) {
    changed_.wait(lock, all_set);
  } else if (!changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), all_set)) {
    return false;
  }
  return !stopping_;
}

bool StoreServer::handle(int fd, const std::string& peer) {
  wire::Reader in(fd, peer);
  const auto op = static_cast<Op>(in.u8());
  std::string reply;
  switch (op) {
    case Op::Set: {
      std::string key = in.string(), value = in.string();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        values_[std::move(key)] = std::move(value);
      }
      changed_.notify_all();
      wire::put_u8(reply, 0);
      break;
    }
    case Op::Get: {
      const std::string key = in.string();
      const int64_t timeout_ms = in.i64();
      std::unique_lock<std::mutex> lock(mutex_);
      if (wait_for(lock, {key}, timeout_ms)) {
        wire::put_u8(reply, 0);
        wire::put_string(reply, values_[key]);
      } else {
        wire::put_u8(reply, 1);
      }
      break;
    }
    case Op::Add: {
      const std::string key = in.string();
      const int64_t delta = in.i64();
      int64_t value = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string& text = values_[key];
        try {
          value = text.empty() ? 0 : std::stoll(text);
        } catch (const std::exception&) {
          value = 0;
        }
        value += delta;
        text = std::to_string(value);
      }
      changed_.notify_all();
      wire::put_i64(reply, value);
      break;
    }
    case Op::CompareSet: {
      const std::string key = in.string(), expected = in.string(), desired = in.string();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto found = values_.find(key);
        if (found == values_.end()) {
          // As c10d's TCPStore: a missing key is set only when the caller expected it missing (empty).
          if (expected.empty()) values_[key] = desired;
          wire::put_string(reply, expected.empty() ? desired : expected);
        } else {
          if (found->second == expected) found->second = desired;
          wire::put_string(reply, found->second);
        }
      }
      changed_.notify_all();
      break;
    }
    case Op::Check:
    case Op::Wait: {
      const uint64_t count = static_cast<uint64_t>(in.i64());
      if (count > (1u << 20)) return false;
      std::vector<std::string> keys;
      for (uint64_t i = 0; i < count; ++i) keys.push_back(in.string());
      const int64_t timeout_ms = op == Op::Wait ? in.i64() : 0;
      std::unique_lock<std::mutex> lock(mutex_);
      if (op == Op::Check) {
        const bool all = std::all_of(keys.begin(), keys.end(), [&](const std::string& key) { return values_.count(key) != 0; });
        wire::put_u8(reply, all ? 1 : 0);
      } else {
        wire::put_u8(reply, wait_for(lock, keys, timeout_ms) ? 0 : 1);
      }
      break;
    }
    case Op::Delete: {
      const std::string key = in.string();
      std::lock_guard<std::mutex> lock(mutex_);
      wire::put_u8(reply, values_.erase(key) != 0 ? 1 : 0);
      break;
    }
    case Op::NumKeys: {
      std::lock_guard<std::mutex> lock(mutex_);
      wire::put_i64(reply, static_cast<int64_t>(values_.size()));
      break;
    }
    default:
      return false;  // not a request this server knows: the connection ends
  }
  wire::send_all(fd, reply, peer);
  return true;
}

}  // namespace accel::distributed
