#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "core/error.hpp"

// Views hand out the files' little-endian bytes as they are; a big-endian host would misread them.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "accel::data assumes a little-endian host");

namespace accel::data {
namespace {

// Far above any real header; it bounds what a corrupt or hostile length field can make us parse
// (the same limit as the reference safetensors implementation).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void file_fail(Code code, const std::string& path, const std::string& problem) {
  fail(code, path + ": " + problem);
}

std::string os_error(int err) { return std::generic_category().message(err); }

struct DtypeInfo {
  const char* name;
  size_t size;
  const char* npy;          // descr without its byte-order mark; null where numpy has no such type
  const char* safetensors;  // the safetensors dtype string
};

constexpr DtypeInfo kDtypes[] = {
    {"float32", 4, "f4", "F32"}, {"float64", 8, "f8", "F64"},   {"float16", 2, "f2", "F16"},
    {"bfloat16", 2, nullptr, "BF16"}, {"int8", 1, "i1", "I8"},  {"int16", 2, "i2", "I16"},
    {"int32", 4, "i4", "I32"},   {"int64", 8, "i8", "I64"},     {"uint8", 1, "u1", "U8"},
    {"bool", 1, "b1", "BOOL"},
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Bytes an array of `shape` occupies; nullopt when a dim is negative or the product overflows.
std::optional<size_t> array_nbytes(const std::vector<int64_t>& shape, size_t element_size) {
  size_t total = element_size;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

// Shape checks shared by both formats: non-negative dims whose byte count fits in size_t.
size_t checked_nbytes(const std::string& path, const std::string& what, const std::vector<int64_t>& shape,
                      size_t element_size) {
  for (int64_t dim : shape) {
    if (dim < 0) file_fail(Code::InvalidArgument, path, what + " has a negative dim in shape " + shape_string(shape));
  }
  auto nbytes = array_nbytes(shape, element_size);
  if (!nbytes) file_fail(Code::InvalidArgument, path, what + " shape " + shape_string(shape) + " overflows the address space");
  return *nbytes;
}

uint64_t read_le(const unsigned char* bytes, size_t width) {
  uint64_t value = 0;
  for (size_t i = width; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

// The header after the fixed prefix must fit inside the file and stay below kMaxHeaderBytes.
void check_header_length(const MappedFile& file, uint64_t prefix, uint64_t header_len) {
  if (header_len > kMaxHeaderBytes) {
    file_fail(Code::InvalidArgument, file.path(),
              "header length " + std::to_string(header_len) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
                  "-byte limit; the file is corrupt or not in this format");
  }
  if (prefix + header_len > file.size()) {
    file_fail(Code::InvalidArgument, file.path(),
              "the file is " + std::to_string(file.size()) + " bytes, shorter than its header claims (" +
                  std::to_string(prefix + header_len) + " bytes); it is truncated or corrupt");
  }
}

// A cursor over header text, with the readers both formats need. Syntax errors name the file and the
// byte offset inside the header.
class HeaderReader {
 public:
  HeaderReader(std::string_view text, const std::string& path, std::string what)
      : text_(text), path_(path), what_(std::move(what)) {}

  [[noreturn]] void error(const std::string& problem) const {
    file_fail(Code::InvalidArgument, path_,
              "malformed " + what_ + " at header byte " + std::to_string(pos_) + ": " + problem);
  }

  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }
  bool consume(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) error(std::string("expected '") + c + "'" + found());
  }

  // JSON and Python integer syntax agree: optional '-', no leading zeros; fractions are refused here
  // rather than later so the message says why.
  int64_t read_int() {
    skip_space();
    const bool negative = pos_ < text_.size() && text_[pos_] == '-';
    if (negative) ++pos_;
    if (!digit_at(pos_)) error("expected an integer" + found());
    if (text_[pos_] == '0' && digit_at(pos_ + 1)) error("integers may not have leading zeros");
    int64_t value = 0;
    for (; digit_at(pos_); ++pos_) {
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        error("integer out of range");
      }
    }
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      error("only integers are allowed here");
    }
    return negative ? -value : value;
  }

  // Python repr of a plain string: numpy writes keys and descr this way and never needs escapes.
  std::string read_python_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string" + found());
    const size_t start = ++pos_;
    for (; pos_ < text_.size() && text_[pos_] != quote; ++pos_) {
      if (text_[pos_] == '\\') error("escapes are not supported in a .npy header");
    }
    if (pos_ == text_.size()) error("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool read_python_bool() {
    skip_space();
    for (bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error("expected True or False" + found());
  }

  // (), (3,), (2, 3) and (2, 3,) are all tuples of ints.
  std::vector<int64_t> read_python_tuple() {
    expect('(');
    std::vector<int64_t> items;
    while (!consume(')')) {
      items.push_back(read_int());
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return items;
  }

  std::string read_json_string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) error("raw control character in a string");
      if (c == '\\') {
        append_escape(out);
      } else {
        out += static_cast<char>(c);
      }
    }
  }

  std::vector<int64_t> read_json_int_array() {
    expect('[');
    std::vector<int64_t> items;
    if (consume(']')) return items;
    do {
      items.push_back(read_int());
    } while (consume(','));
    expect(']');
    return items;
  }

  // Calls on_member(key) for each member, with the cursor on the member's value, which it must read.
  template <typename OnMember>
  void read_json_object(OnMember on_member) {
    expect('{');
    if (consume('}')) return;
    do {
      const std::string key = read_json_string();
      expect(':');
      on_member(key);
    } while (consume(','));
    expect('}');
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool digit_at(size_t at) const { return at < text_.size() && text_[at] >= '0' && text_[at] <= '9'; }

  std::string found() const {
    if (pos_ >= text_.size()) return " but the header ended";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string(" but found '") + static_cast<char>(c) + "'";
    return " but found byte " + std::to_string(c);
  }

  void append_escape(std::string& out) {
    if (pos_ >= text_.size()) error("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case '"': case '\\': case '/': out += e; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': append_utf8(out, read_code_point()); return;
      default: error(std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t read_hex4() {
    if (pos_ + 4 > text_.size()) error("truncated \\u escape");
    uint32_t value = 0;
    for (size_t end = pos_ + 4; pos_ < end; ++pos_) {
      const char c = text_[pos_];
      const int nibble = c >= '0' && c <= '9' ? c - '0'
                         : c >= 'a' && c <= 'f' ? c - 'a' + 10
                         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                : -1;
      if (nibble < 0) error("bad hex digit in \\u escape");
      value = value << 4 | static_cast<uint32_t>(nibble);
    }
    return value;
  }

  // Characters outside the BMP arrive as a UTF-16 surrogate pair of two \u escapes.
  uint32_t read_code_point() {
    const uint32_t unit = read_hex4();
    if (unit >= 0xDC00 && unit <= 0xDFFF) error("lone low surrogate in \\u escape");
    if (unit < 0xD800 || unit > 0xDBFF) return unit;
    if (text_.substr(pos_, 2) != "\\u") error("high surrogate without its low half");
    pos_ += 2;
    const uint32_t low = read_hex4();
    if (low < 0xDC00 || low > 0xDFFF) error("high surrogate without its low half");
    return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  const std::string& path_;
  std::string what_;
  size_t pos_ = 0;
};

// ---- .npy ----------------------------------------------------------------------------------------

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// The header is a Python dict literal with exactly the keys 'descr', 'fortran_order' and 'shape',
// followed by space padding and a newline.
NpyHeader parse_npy_dict(std::string_view text, const std::string& path) {
  HeaderReader in(text, path, ".npy header");
  NpyHeader header;
  bool seen_descr = false, seen_fortran = false, seen_shape = false;
  auto first_time = [&](bool& seen, const std::string& key) {
    if (seen) in.error("duplicate key '" + key + "'");
    seen = true;
  };
  in.expect('{');
  while (!in.consume('}')) {
    const std::string key = in.read_python_string();
    in.expect(':');
    if (key == "descr") {
      first_time(seen_descr, key);
      if (in.peek() == '[') file_fail(Code::Dtype, path, "structured (record) dtypes are not supported");
      header.descr = in.read_python_string();
    } else if (key == "fortran_order") {
      first_time(seen_fortran, key);
      header.fortran_order = in.read_python_bool();
    } else if (key == "shape") {
      first_time(seen_shape, key);
      header.shape = in.read_python_tuple();
    } else {
      in.error("unexpected key '" + key + "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
    }
    if (!in.consume(',')) {
      in.expect('}');
      break;
    }
  }
  if (!in.at_end()) in.error("unexpected text after the dictionary");
  if (!seen_descr || !seen_fortran || !seen_shape) {
    in.error(std::string("missing key '") + (!seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape") + "'");
  }
  return header;
}

const DtypeInfo& npy_dtype(const std::string& descr, const std::string& path) {
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string_view code = descr.empty() ? std::string_view() : std::string_view(descr).substr(1);
  for (const DtypeInfo& info : kDtypes) {
    if (info.npy == nullptr || code != info.npy) continue;
    // One-byte types have no byte order: numpy writes '|', but any mark describes the same bytes.
    if (order == '<' || (info.size == 1 && (order == '|' || order == '>'))) return info;
    if (order == '>') {
      file_fail(Code::Dtype, path,
                "big-endian dtype '" + descr + "' is not supported; save it as little-endian (arr.astype('<" +
                    std::string(code) + "'))");
    }
  }
  file_fail(Code::Dtype, path, "unsupported dtype '" + descr + "'; supported: <f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 |b1");
}

// Magic "\x93NUMPY", major and minor version, then the header length: 2 bytes in version 1.0, 4 bytes
// in 2.0 and 3.0 (3.0 only changes the header's text encoding, irrelevant to the ASCII we accept).
ArrayView parse_npy(const MappedFile& file) {
  const std::string& path = file.path();
  const unsigned char* bytes = file.data();
  static constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 8 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes)) {
    file_fail(Code::InvalidArgument, path, "not a .npy file (no \\x93NUMPY magic at the start)");
  }
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    file_fail(Code::InvalidArgument, path,
              "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                  " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t length_width = major == 1 ? 2 : 4;
  const size_t prefix = 8 + length_width;
  if (file.size() < prefix) file_fail(Code::InvalidArgument, path, "the file ends inside the .npy preamble");
  const uint64_t header_len = read_le(bytes + 8, length_width);
  check_header_length(file, prefix, header_len);

  const std::string_view text(reinterpret_cast<const char*>(bytes + prefix), header_len);
  const NpyHeader header = parse_npy_dict(text, path);
  if (header.fortran_order) {
    file_fail(Code::InvalidArgument, path,
              "fortran_order True (column-major) arrays are not supported; save np.ascontiguousarray(arr)");
  }
  const DtypeInfo& dtype = npy_dtype(header.descr, path);
  const size_t nbytes = checked_nbytes(path, "the array", header.shape, dtype.size);
  const size_t payload = prefix + header_len;
  if (nbytes > file.size() - payload) {
    file_fail(Code::InvalidArgument, path,
              "the payload is truncated: shape " + shape_string(header.shape) + " of " + dtype.name + " needs " +
                  std::to_string(nbytes) + " bytes but only " + std::to_string(file.size() - payload) +
                  " follow the header");
  }
  return ArrayView{path, dtype.name, header.shape, bytes + payload, nbytes, dtype.size};
}

// ---- .safetensors --------------------------------------------------------------------------------

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> offsets;
};

TensorEntry read_tensor_entry(HeaderReader& in, const std::string& name, const std::string& path) {
  TensorEntry entry;
  entry.name = name;
  bool seen_dtype = false, seen_shape = false, seen_offsets = false;
  auto first_time = [&](bool& seen, const std::string& key) {
    if (seen) in.error("tensor '" + name + "' has key '" + key + "' twice");
    seen = true;
  };
  in.read_json_object([&](const std::string& key) {
    if (key == "dtype") {
      first_time(seen_dtype, key);
      entry.dtype = in.read_json_string();
    } else if (key == "shape") {
      first_time(seen_shape, key);
      entry.shape = in.read_json_int_array();
    } else if (key == "data_offsets") {
      first_time(seen_offsets, key);
      entry.offsets = in.read_json_int_array();
    } else {
      in.error("tensor '" + name + "' has unexpected key '" + key + "'");
    }
  });
  if (!seen_dtype || !seen_shape || !seen_offsets) {
    file_fail(Code::InvalidArgument, path,
              "tensor '" + name + "' lacks '" + (!seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets") + "'");
  }
  return entry;
}

std::map<std::string, std::string> read_metadata(HeaderReader& in) {
  std::map<std::string, std::string> metadata;
  in.read_json_object([&](const std::string& key) {
    if (in.peek() != '"') in.error("__metadata__ values must be strings (key '" + key + "')");
    if (!metadata.emplace(key, in.read_json_string()).second) in.error("__metadata__ has key '" + key + "' twice");
  });
  return metadata;
}

const DtypeInfo& safetensors_dtype(const TensorEntry& entry, const std::string& path) {
  for (const DtypeInfo& info : kDtypes) {
    if (entry.dtype == info.safetensors) return info;
  }
  file_fail(Code::Dtype, path,
            "tensor '" + entry.name + "' has unsupported dtype '" + entry.dtype +
                "'; supported: F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL");
}

// Checks one entry against its shape and the file's extent, and points a view at its bytes.
ArrayView make_tensor_view(const TensorEntry& entry, const MappedFile& file, size_t data_start) {
  const std::string& path = file.path();
  const std::string what = "tensor '" + entry.name + "'";
  const DtypeInfo& dtype = safetensors_dtype(entry, path);
  const size_t nbytes = checked_nbytes(path, what, entry.shape, dtype.size);
  const std::vector<int64_t>& off = entry.offsets;
  if (off.size() != 2 || off[0] < 0 || off[1] < off[0]) {
    file_fail(Code::InvalidArgument, path,
              what + " has data_offsets " + shape_string(off) + "; expected [begin, end] with 0 <= begin <= end");
  }
  const uint64_t begin = static_cast<uint64_t>(off[0]), end = static_cast<uint64_t>(off[1]);
  if (end - begin != nbytes) {
    file_fail(Code::InvalidArgument, path,
              what + " data_offsets " + shape_string(off) + " span " + std::to_string(end - begin) +
                  " bytes but shape " + shape_string(entry.shape) + " of " + entry.dtype + " needs " +
                  std::to_string(nbytes));
  }
  const size_t available = file.size() - data_start;
  if (end > available) {
    file_fail(Code::InvalidArgument, path,
              what + " ends at data byte " + std::to_string(end) + " but only " + std::to_string(available) +
                  " bytes follow the header; the file is truncated");
  }
  return ArrayView{entry.name, dtype.name, entry.shape, file.data() + data_start + begin, nbytes, dtype.size};
}

const unsigned char* first_byte(const ArrayView& view) { return static_cast<const unsigned char*>(view.data); }

// Sorting by start address puts any overlap next to the furthest-reaching earlier tensor. Empty
// tensors occupy no bytes and overlap nothing.
void check_no_overlap(const std::vector<ArrayView>& arrays, const std::string& path) {
  std::vector<const ArrayView*> order;
  for (const ArrayView& view : arrays) {
    if (view.nbytes > 0) order.push_back(&view);
  }
  std::sort(order.begin(), order.end(),
            [](const ArrayView* a, const ArrayView* b) { return first_byte(*a) < first_byte(*b); });
  const ArrayView* furthest = nullptr;
  for (const ArrayView* view : order) {
    if (furthest && first_byte(*view) < first_byte(*furthest) + furthest->nbytes) {
      file_fail(Code::InvalidArgument, path, "tensors '" + furthest->name + "' and '" + view->name + "' overlap");
    }
    if (!furthest || first_byte(*view) + view->nbytes > first_byte(*furthest) + furthest->nbytes) furthest = view;
  }
}

std::string list_names(const std::vector<ArrayView>& arrays) {
  // A checkpoint may hold thousands of tensors; the first few are enough to spot a naming mismatch.
  constexpr size_t kShown = 20;
  if (arrays.empty()) return "(none)";
  std::string out;
  for (size_t i = 0; i < arrays.size() && i < kShown; ++i) out += (i ? ", " : "") + arrays[i].name;
  if (arrays.size() > kShown) out += ", ... (" + std::to_string(arrays.size() - kShown) + " more)";
  return out;
}

}  // namespace

// ---- MappedFile ----------------------------------------------------------------------------------

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) file_fail(Code::Io, path, "cannot open: " + os_error(errno));
  // The mapping outlives the descriptor, so it is closed on every way out of here.
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) file_fail(Code::Io, path, "cannot stat: " + os_error(errno));
  if (!S_ISREG(st.st_mode)) file_fail(Code::Io, path, "not a regular file");
  if (st.st_size == 0) file_fail(Code::InvalidArgument, path, "the file is empty");
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) file_fail(Code::Io, path, "cannot map " + std::to_string(size) + " bytes: " + os_error(errno));
  base_ = base;
  size_ = size;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

// ---- NpyFile / SafetensorsFile -------------------------------------------------------------------

NpyFile::NpyFile(const std::string& path) : file_(path), array_(parse_npy(file_)) {}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  if (file_.size() < 8) file_fail(Code::InvalidArgument, path, "too short for a .safetensors header length (8 bytes)");
  const uint64_t header_len = read_le(file_.data(), 8);
  check_header_length(file_, 8, header_len);

  HeaderReader in(std::string_view(reinterpret_cast<const char*>(file_.data() + 8), header_len), path,
                  ".safetensors JSON header");
  std::vector<TensorEntry> entries;
  bool seen_metadata = false;
  in.read_json_object([&](const std::string& key) {
    if (key != "__metadata__") {
      entries.push_back(read_tensor_entry(in, key, path));
      return;
    }
    if (seen_metadata) in.error("__metadata__ appears twice");
    seen_metadata = true;
    metadata_ = read_metadata(in);
  });
  if (!in.at_end()) in.error("unexpected text after the JSON object");

  const size_t data_start = 8 + header_len;
  for (const TensorEntry& entry : entries) arrays_.push_back(make_tensor_view(entry, file_, data_start));
  std::sort(arrays_.begin(), arrays_.end(), [](const ArrayView& a, const ArrayView& b) { return a.name < b.name; });
  auto twin = std::adjacent_find(arrays_.begin(), arrays_.end(),
                                 [](const ArrayView& a, const ArrayView& b) { return a.name == b.name; });
  if (twin != arrays_.end()) file_fail(Code::InvalidArgument, path, "tensor '" + twin->name + "' appears twice");
  check_no_overlap(arrays_, path);
}

const ArrayView& SafetensorsFile::array(const std::string& name) const {
  auto it = std::lower_bound(arrays_.begin(), arrays_.end(), name,
                             [](const ArrayView& view, const std::string& key) { return view.name < key; });
  if (it == arrays_.end() || it->name != name) {
    file_fail(Code::InvalidArgument, file_.path(), "no tensor named '" + name + "'; available: " + list_names(arrays_));
  }
  return *it;
}

// ---- row_slice -----------------------------------------------------------------------------------

ArrayView row_slice(const ArrayView& view, int64_t begin, int64_t count) {
  if (view.shape.empty()) fail(Code::InvalidArgument, view.name + ": row_slice needs a dim 0, but the array is 0-d");
  // Checking nbytes against the shape bounds every product below, even for a hand-built view.
  const auto nbytes = array_nbytes(view.shape, view.element_size);
  if (!nbytes || *nbytes != view.nbytes) {
    fail(Code::InvalidArgument, view.name + ": view's nbytes " + std::to_string(view.nbytes) +
                                    " does not match shape " + shape_string(view.shape));
  }
  const int64_t rows = view.shape[0];
  if (begin < 0 || count < 0 || begin > rows || count > rows - begin) {
    fail(Code::OutOfRange, view.name + ": rows begin=" + std::to_string(begin) + " count=" + std::to_string(count) +
                               " fall outside dim 0 of size " + std::to_string(rows));
  }
  const size_t row_bytes = rows == 0 ? 0 : view.nbytes / static_cast<size_t>(rows);
  ArrayView out = view;
  out.shape[0] = count;
  out.data = first_byte(view) + static_cast<size_t>(begin) * row_bytes;
  out.nbytes = static_cast<size_t>(count) * row_bytes;
  return out;
}

}  // namespace accel::data
