#include "formats/npy.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "formats/header.hpp"

namespace accel::formats {

namespace {

// ---- the header: a Python dict literal -----------------------------------------------------------

// Python repr of a plain string: numpy writes keys and descr this way and never needs escapes.
std::string read_python_string(HeaderReader& in) {
  const char quote = in.peek();
  if (quote != '\'' && quote != '"') in.error("expected a quoted string" + in.found());
  in.expect(quote);
  std::string out;
  while (true) {
    const auto c = in.next_char();
    if (!c) in.error("unterminated string");
    if (*c == quote) return out;
    if (*c == '\\') in.error("escapes are not supported in a .npy header");
    out += *c;
  }
}

bool read_python_bool(HeaderReader& in) {
  if (in.consume_word("True")) return true;
  if (in.consume_word("False")) return false;
  in.error("expected True or False" + in.found());
}

// (), (3,), (2, 3) and (2, 3,) are all tuples of ints.
std::vector<int64_t> read_python_tuple(HeaderReader& in) {
  in.expect('(');
  std::vector<int64_t> items;
  while (!in.consume(')')) {
    items.push_back(in.read_int());
    if (!in.consume(',')) {
      in.expect(')');
      break;
    }
  }
  return items;
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Exactly the keys 'descr', 'fortran_order' and 'shape', then space padding and a newline.
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
    const std::string key = read_python_string(in);
    in.expect(':');
    if (key == "descr") {
      first_time(seen_descr, key);
      if (in.peek() == '[') fail_in_file(Code::Dtype, path, "structured (record) dtypes are not supported");
      header.descr = read_python_string(in);
    } else if (key == "fortran_order") {
      first_time(seen_fortran, key);
      header.fortran_order = read_python_bool(in);
    } else if (key == "shape") {
      first_time(seen_shape, key);
      header.shape = read_python_tuple(in);
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
  if (const DtypeInfo* info = dtype_from_npy_descr(descr)) return *info;
  if (!descr.empty() && descr[0] == '>' && dtype_from_npy_descr("<" + descr.substr(1)) != nullptr) {
    fail_in_file(Code::Dtype, path,
                 "big-endian dtype '" + descr + "' is not supported; save it as little-endian (arr.astype('<" +
                     descr.substr(1) + "'))");
  }
  fail_in_file(Code::Dtype, path, "unsupported dtype '" + descr + "'; supported: " + npy_descrs());
}

}  // namespace

// Magic "\x93NUMPY", major and minor version, then the header length: 2 bytes in version 1.0, 4 bytes
// in 2.0 and 3.0 (3.0 only changes the header's text encoding, irrelevant to the ASCII we accept).
ArrayView parse_npy(const unsigned char* bytes, size_t size, const std::string& path) {
  static constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 8 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes)) {
    fail_in_file(Code::InvalidArgument, path, "not a .npy file (no \\x93NUMPY magic at the start)");
  }
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    fail_in_file(Code::InvalidArgument, path,
                 "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                     " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t length_width = major == 1 ? 2 : 4;
  const size_t prefix = 8 + length_width;
  if (size < prefix) fail_in_file(Code::InvalidArgument, path, "the file ends inside the .npy preamble");
  const uint64_t header_len = read_le(bytes + 8, length_width);
  check_header_length(path, size, prefix, header_len);

  const std::string_view text(reinterpret_cast<const char*>(bytes + prefix), header_len);
  const NpyHeader header = parse_npy_dict(text, path);
  if (header.fortran_order) {
    fail_in_file(Code::InvalidArgument, path,
                 "fortran_order True (column-major) arrays are not supported; save np.ascontiguousarray(arr)");
  }
  const DtypeInfo& dtype = npy_dtype(header.descr, path);
  const size_t nbytes = checked_nbytes(path, "the array", header.shape, dtype.size);
  const size_t payload = prefix + header_len;
  if (nbytes > size - payload) {
    fail_in_file(Code::InvalidArgument, path,
                 "the payload is truncated: shape " + shape_string(header.shape) + " of " + dtype.name + " needs " +
                     std::to_string(nbytes) + " bytes but only " + std::to_string(size - payload) +
                     " follow the header");
  }
  return ArrayView{path, dtype.type, header.shape, bytes + payload, nbytes};
}

NpyFile::NpyFile(const std::string& path) : file_(path), array_(parse_npy(file_.data(), file_.size(), path)) {}

}  // namespace accel::formats
