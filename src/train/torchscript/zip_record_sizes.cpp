#include "train/torchscript/zip_record_sizes.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace accel::train {

namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;
constexpr uint16_t kStored = 0, kDeflated = 8, kZip64Extra = 0x0001;
// Deflate emits at least one bit for every 258 bytes: at most 1032 bytes out per byte in.
constexpr uint64_t kDeflateExpansion = 1032;
constexpr size_t kEndRecordSize = 22, kLongestComment = 0xffff;

uint64_t little_endian(const std::vector<char>& bytes, size_t at, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

std::optional<std::vector<char>> read_at(const caffe2::serialize::ReadAdapterInterface& archive, uint64_t at, uint64_t n) {
  if (at > archive.size() || n > archive.size() - at) return std::nullopt;
  std::vector<char> bytes(static_cast<size_t>(n));
  if (n > 0 && archive.read(at, bytes.data(), bytes.size(), "zip directory") != bytes.size()) return std::nullopt;
  return bytes;
}

struct Directory {
  uint64_t offset;
  uint64_t size;
};

// Where the central directory may be: the end-of-directory record's, and, where a zip64 locator precedes that
// record, the zip64 end record's. Both: LibTorch's zip reader (miniz) takes the zip64 record's whenever it is
// there, whatever the other says, and another reader may not, so a record is checked in either.
std::vector<Directory> find_directories(const caffe2::serialize::ReadAdapterInterface& archive) {
  const uint64_t size = archive.size();
  if (size < kEndRecordSize) return {};
  const uint64_t tail_size = std::min<uint64_t>(size, kEndRecordSize + kLongestComment);
  const auto tail = read_at(archive, size - tail_size, tail_size);
  if (!tail) return {};
  for (size_t at = tail->size() - kEndRecordSize + 1; at-- > 0;) {
    if (little_endian(*tail, at, 4) != kEndOfDirectory) continue;
    std::vector<Directory> found;
    const Directory plain{little_endian(*tail, at + 16, 4), little_endian(*tail, at + 12, 4)};
    if (plain.offset != 0xffffffff && plain.size != 0xffffffff) found.push_back(plain);
    // zip64: the locator just before says where the zip64 end record is.
    if (at >= 20 && little_endian(*tail, at - 20, 4) == kZip64Locator) {
      const auto end = read_at(archive, little_endian(*tail, at - 20 + 8, 8), 56);
      if (end && little_endian(*end, 0, 4) == kZip64End) {
        const Directory zip64{little_endian(*end, 48, 8), little_endian(*end, 40, 8)};
        // Usually the end record's directory too (as LibTorch writes archives): read once.
        if (found.empty() || found.front().offset != zip64.offset || found.front().size != zip64.size) {
          found.push_back(zip64);
        }
      }
    }
    return found;
  }
  return {};
}

struct Entry {
  std::string name;
  uint64_t name_offset;  // in the archive
  uint16_t method;
  uint64_t compressed;
  uint64_t uncompressed;
};

// Appends to `found` the entries of the central directory at `directory`, up to the first that cannot be read.
void add_entries(const caffe2::serialize::ReadAdapterInterface& archive, const Directory& directory,
                 std::vector<Entry>& found) {
  const auto entries = read_at(archive, directory.offset, directory.size);
  if (!entries) return;
  const std::vector<char>& d = *entries;
  for (size_t at = 0; at + 46 <= d.size() && little_endian(d, at, 4) == kDirectoryEntry;) {
    const auto method = static_cast<uint16_t>(little_endian(d, at + 10, 2));
    uint64_t compressed = little_endian(d, at + 20, 4), uncompressed = little_endian(d, at + 24, 4);
    const size_t name_size = little_endian(d, at + 28, 2), extra_size = little_endian(d, at + 30, 2),
                 comment_size = little_endian(d, at + 32, 2);
    const size_t name_at = at + 46, extra_at = name_at + name_size, next = extra_at + extra_size + comment_size;
    if (next > d.size()) break;
    // zip64 sizes, in the extra field: the uncompressed one first, each only when its 32-bit field is full.
    for (size_t field = extra_at; field + 4 <= extra_at + extra_size;) {
      const auto id = static_cast<uint16_t>(little_endian(d, field, 2));
      const size_t length = little_endian(d, field + 2, 2), data = field + 4;
      if (data + length > extra_at + extra_size) break;
      if (id == kZip64Extra) {
        size_t value = data;
        if (uncompressed == 0xffffffff && value + 8 <= data + length) uncompressed = little_endian(d, (value += 8) - 8, 8);
        if (compressed == 0xffffffff && value + 8 <= data + length) compressed = little_endian(d, value, 8);
      }
      field = data + length;
    }
    found.push_back({std::string(d.data() + name_at, name_size), directory.offset + name_at, method, compressed,
                     uncompressed});
    at = next;
  }
}

// The entries of each central directory the archive may have (find_directories), each up to its first that
// cannot be read; none without a readable directory.
std::vector<Entry> directory_entries(const caffe2::serialize::ReadAdapterInterface& archive) {
  std::vector<Entry> found;
  for (const Directory& directory : find_directories(archive)) add_entries(archive, directory, found);
  return found;
}

}  // namespace

std::optional<std::string> oversized_zip_record(const caffe2::serialize::ReadAdapterInterface& archive) {
  for (const Entry& entry : directory_entries(archive)) {
    // The compressed bytes lie in the archive: a claim beyond its end would let a deflated record claim its
    // 1032-fold expansion of bytes that do not exist.
    if (entry.compressed > archive.size()) {
      return "record '" + entry.name + "' claims " + std::to_string(entry.compressed) + " compressed bytes in an "
             "archive of " + std::to_string(archive.size());
    }
    // The reader allocates a record's uncompressed size before it finds that it cannot inflate its method.
    if (entry.method != kStored && entry.method != kDeflated) {
      return "record '" + entry.name + "' is compressed by method " + std::to_string(entry.method) +
             ", which the zip reader cannot inflate (stored 0 and deflated 8 only)";
    }
    const bool impossible = (entry.method == kStored && entry.uncompressed != entry.compressed) ||
                            (entry.method == kDeflated && entry.uncompressed / kDeflateExpansion > entry.compressed);
    if (impossible) {
      return "record '" + entry.name + "' claims " + std::to_string(entry.uncompressed) + " bytes from " +
             std::to_string(entry.compressed) + (entry.method == kStored ? " stored" : " deflated") + " bytes";
    }
  }
  return std::nullopt;
}

std::vector<uint64_t> directory_name_ends(const caffe2::serialize::ReadAdapterInterface& archive,
                                          const std::string& suffix) {
  std::vector<uint64_t> ends;
  for (const Entry& entry : directory_entries(archive)) {
    const std::string& name = entry.name;
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ends.push_back(entry.name_offset + name.size() - 1);
    }
  }
  return ends;
}

}  // namespace accel::train
