#include "ckpt/safetensors_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/error.hpp"

namespace accel::ckpt {

namespace {

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kChar: return "I8";
    case at::kShort: return "I16";
    case at::kInt: return "I32";
    case at::kLong: return "I64";
    case at::kByte: return "U8";
    case at::kBool: return "BOOL";
    default: fail(Code::Dtype, std::string("safetensors cannot hold dtype ") + c10::toString(type));
  }
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(Code::Io, "cannot write '" + path + "': " + std::strerror(errno));
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::map<std::string, at::Tensor> sorted;
  for (const auto& [name, tensor] : tensors) {
    if (!sorted.emplace(name, tensor.detach().cpu().contiguous()).second) {
      fail(Code::InvalidArgument, "tensor name '" + name + "' appears twice");
    }
  }
  std::map<std::string, std::string> all_metadata = metadata;
  all_metadata.emplace("format", "pt");
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : all_metadata) {
    header += (first ? "" : ",") + json_string(key) + ":" + json_string(value);
    first = false;
  }
  header += "}";
  size_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    header += "," + json_string(name) + ":{\"dtype\":\"" + dtype_name(tensor.scalar_type()) + "\",\"shape\":[";
    for (int64_t d = 0; d < tensor.dim(); ++d) header += (d ? "," : "") + std::to_string(tensor.size(d));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  // The payload starts 8-byte aligned, as the reference writer pads it.
  while ((8 + header.size()) % 8 != 0) header += ' ';
  const uint64_t header_size = header.size();

  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Code::Io, "cannot create '" + temporary + "': " + std::strerror(errno));
  try {
    write_all(fd, reinterpret_cast<const char*>(&header_size), sizeof header_size, temporary);
    write_all(fd, header.data(), header.size(), temporary);
    for (const auto& [name, tensor] : sorted) {
      write_all(fd, static_cast<const char*>(tensor.data_ptr()), static_cast<size_t>(tensor.numel()) * tensor.element_size(),
                temporary);
    }
    if (::fsync(fd) != 0) fail(Code::Io, "cannot flush '" + temporary + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    fail(Code::Io, "cannot move '" + temporary + "' to '" + path + "': " + reason);
  }
}

}  // namespace accel::ckpt
