#include "distributed/store/store_wire.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

// Integers go on the wire in host order, which is little-endian on every host accel builds for.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store's wire format assumes a little-endian host");

namespace accel::distributed::wire {

namespace {

// Keys and values are short (addresses, records, verdicts); a length beyond this is a stranger's bytes.
constexpr uint64_t kMaxString = uint64_t{64} << 20;

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

void put_u8(std::string& out, uint8_t value) { put(out, value); }
void put_u32(std::string& out, uint32_t value) { put(out, value); }
void put_i64(std::string& out, int64_t value) { put(out, value); }
void put_string(std::string& out, const std::string& value) {
  put<uint64_t>(out, value.size());
  out += value;
}

void Reader::exact(void* data, size_t size, std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      pollfd ready{fd_, POLLIN, 0};
      const int polled = ::poll(&ready, 1, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30))));
      if (polled < 0 && errno == EINTR) continue;
      if (polled == 0) throw std::runtime_error("timed out waiting for an answer from " + peer_);
    }
    const ssize_t got = ::recv(fd_, at, size, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw std::runtime_error("the connection to " + peer_ + " failed: " + std::strerror(errno));
    if (got == 0) throw std::runtime_error(peer_ + " closed the connection");
    at += got;
    size -= static_cast<size_t>(got);
  }
}

uint8_t Reader::u8(std::optional<std::chrono::steady_clock::time_point> deadline) {
  uint8_t value = 0;
  exact(&value, sizeof value, deadline);
  return value;
}

uint32_t Reader::u32() {
  uint32_t value = 0;
  exact(&value, sizeof value, std::nullopt);
  return value;
}

int64_t Reader::i64() {
  int64_t value = 0;
  exact(&value, sizeof value, std::nullopt);
  return value;
}

std::string Reader::string() {
  uint64_t size = 0;
  exact(&size, sizeof size, std::nullopt);
  if (size > kMaxString) throw std::runtime_error(peer_ + " sent a string of " + std::to_string(size) + " bytes");
  std::string value(size, '\0');
  exact(value.data(), size, std::nullopt);
  return value;
}

void send_all(int fd, const std::string& data, const std::string& peer) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t wrote = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw std::runtime_error("the connection to " + peer + " failed: " + std::strerror(errno));
    sent += static_cast<size_t>(wrote);
  }
}

}  // namespace accel::distributed::wire
