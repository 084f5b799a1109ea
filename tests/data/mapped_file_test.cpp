#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace {

namespace fs = std::filesystem;
using accel::Code;
using accel::Error;
using accel::data::ArrayView;
using accel::data::MappedFile;
using accel::data::NpyFile;
using accel::data::row_slice;
using accel::data::SafetensorsFile;

// ---- byte builders -------------------------------------------------------------------------------

std::string le_bytes(uint64_t value, size_t width) {
  std::string out;
  for (size_t i = 0; i < width; ++i) out += static_cast<char>(value >> (8 * i) & 0xFF);
  return out;
}

// Distinct-looking bytes, so a view that points at the wrong offset fails the comparison.
std::string pattern(size_t n, unsigned seed = 0) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((i * 7 + 3 + seed * 31) & 0xFF);
  return out;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string npy_dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
         ", }";
}

// A .npy file laid out as numpy writes it: magic, version, header length, then the dict padded with
// spaces and a newline so that the payload starts on a 64-byte boundary.
std::string npy_bytes(const std::string& dict, const std::string& payload, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  return out + le_bytes(header.size(), major == 1 ? 2 : 4) + header + payload;
}

std::string safetensors_bytes(const std::string& json, const std::string& payload) {
  return le_bytes(json.size(), 8) + json + payload;
}

// Runs `body` and expects an accel::Error with `code` whose message contains each of `parts`.
template <typename Body>
void expect_error(Body body, Code code, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), code) << message;
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "message '" << message << "' lacks '" << part << "'";
    }
    return;
  }
  ADD_FAILURE() << "no accel::Error was thrown";
}

bool inside(const ArrayView& view, const MappedFile& file) {
  const auto* begin = static_cast<const unsigned char*>(view.data);
  return begin >= file.data() && begin + view.nbytes <= file.data() + file.size();
}

std::string bytes_of(const ArrayView& view) {
  return std::string(static_cast<const char*>(view.data), view.nbytes);
}

// Peak resident set size of this process so far, in bytes (Linux reports KiB).
long max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

// Each test gets a fresh directory, removed afterwards.
class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (fs::temp_directory_path() / "accel_mapped_file_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(name.data()), nullptr) << std::strerror(errno);
    dir_ = name;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good());
    return path(name);
  }

  // A copy of the file at `from` without its last `cut` bytes.
  std::string truncated_copy(const std::string& from, size_t cut) const {
    std::ifstream in(from, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return write("truncated_" + fs::path(from).filename().string(), bytes.substr(0, bytes.size() - cut));
  }

  fs::path dir_;
};

struct DtypeCase {
  const char* npy;
  const char* safetensors;
  const char* name;
  size_t size;
};

const std::vector<DtypeCase> kDtypeCases = {
    {"<f4", "F32", "float32", 4}, {"<f8", "F64", "float64", 8}, {"<f2", "F16", "float16", 2},
    {nullptr, "BF16", "bfloat16", 2}, {"|i1", "I8", "int8", 1}, {"<i2", "I16", "int16", 2},
    {"<i4", "I32", "int32", 4},   {"<i8", "I64", "int64", 8},   {"|u1", "U8", "uint8", 1},
    {"|b1", "BOOL", "bool", 1},
};

// ---- MappedFile ----------------------------------------------------------------------------------

TEST_F(MappedFileTest, MapsTheWholeFileAndMovesOwnership) {
  const std::string file = write("bytes.bin", pattern(5000));
  MappedFile mapped(file);
  ASSERT_EQ(mapped.size(), 5000u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.data()), mapped.size()), pattern(5000));
  EXPECT_EQ(mapped.path(), file);

  const unsigned char* base = mapped.data();
  MappedFile moved(std::move(mapped));
  EXPECT_EQ(moved.data(), base);
  EXPECT_EQ(mapped.data(), nullptr);  // the moved-from state is part of the contract
  EXPECT_EQ(mapped.size(), 0u);

  MappedFile other(write("other.bin", "x"));
  other = std::move(moved);
  EXPECT_EQ(other.data(), base);
  EXPECT_EQ(other.size(), 5000u);
}

TEST_F(MappedFileTest, RefusesMissingDirectoryAndEmptyFiles) {
  const std::string missing = path("missing.npy");
  expect_error([&] { MappedFile f(missing); }, Code::Io, {missing, "No such file or directory"});
  expect_error([&] { NpyFile f(missing); }, Code::Io, {missing});
  expect_error([&] { SafetensorsFile f(missing); }, Code::Io, {missing});
  expect_error([&] { MappedFile f(dir_.string()); }, Code::Io, {dir_.string(), "not a regular file"});
  const std::string empty = write("empty.npy", "");
  expect_error([&] { NpyFile f(empty); }, Code::InvalidArgument, {empty, "empty"});
}

// ---- .npy ----------------------------------------------------------------------------------------

TEST_F(MappedFileTest, NpyRoundTripsEveryDtype) {
  for (const DtypeCase& dtype : kDtypeCases) {
    if (dtype.npy == nullptr) continue;  // numpy has no bfloat16
    SCOPED_TRACE(dtype.name);
    const std::string payload = pattern(6 * dtype.size);
    NpyFile npy(write(std::string(dtype.name) + ".npy", npy_bytes(npy_dict(dtype.npy, "(2, 3)"), payload)));
    const ArrayView& view = npy.array();
    EXPECT_EQ(view.dtype, dtype.name);
    EXPECT_EQ(view.element_size, dtype.size);
    EXPECT_EQ(view.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(view.nbytes, payload.size());
    EXPECT_EQ(bytes_of(view), payload);
    EXPECT_EQ(view.name, npy.file().path());
  }
}

TEST_F(MappedFileTest, NpyValuesReadBackThroughMemcpy) {
  const std::vector<float> floats{1.5f, -2.0f, 3.25f};
  NpyFile f32(write("f.npy", npy_bytes(npy_dict("<f4", "(3,)"), raw(floats))));
  std::vector<float> got(3);
  std::memcpy(got.data(), f32.array().data, f32.array().nbytes);
  EXPECT_EQ(got, floats);

  const std::vector<int64_t> ints{-1, 1LL << 40, 7};
  NpyFile i64(write("i.npy", npy_bytes(npy_dict("<i8", "(3,)"), raw(ints))));
  std::vector<int64_t> got_ints(3);
  std::memcpy(got_ints.data(), i64.array().data, i64.array().nbytes);
  EXPECT_EQ(got_ints, ints);
}

TEST_F(MappedFileTest, NpyZeroDimAndEmptyShapes) {
  const std::vector<double> scalar{2.5};
  NpyFile zero_d(write("scalar.npy", npy_bytes(npy_dict("<f8", "()"), raw(scalar))));
  EXPECT_TRUE(zero_d.array().shape.empty());
  EXPECT_EQ(zero_d.array().nbytes, 8u);
  double value = 0;
  std::memcpy(&value, zero_d.array().data, sizeof value);
  EXPECT_EQ(value, 2.5);

  NpyFile empty(write("empty_rows.npy", npy_bytes(npy_dict("<i4", "(0, 3)"), "")));
  EXPECT_EQ(empty.array().shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(empty.array().nbytes, 0u);
  EXPECT_EQ(row_slice(empty.array(), 0, 0).nbytes, 0u);
}

TEST_F(MappedFileTest, NpyReadsFormatVersionsTwoAndThree) {
  for (int major : {2, 3}) {
    SCOPED_TRACE(major);
    const std::string payload = pattern(4 * 4);
    NpyFile npy(write("v" + std::to_string(major) + ".npy", npy_bytes(npy_dict("<i4", "(4,)"), payload, major)));
    EXPECT_EQ(npy.array().shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(bytes_of(npy.array()), payload);
  }
}

TEST_F(MappedFileTest, NpyViewPointsIntoTheMapping) {
  NpyFile npy(write("a.npy", npy_bytes(npy_dict("<f4", "(4, 4)"), pattern(64))));
  EXPECT_TRUE(inside(npy.array(), npy.file()));
  // numpy's layout puts the payload right after the header, padded to a multiple of 64 bytes.
  const std::string bytes = npy_bytes(npy_dict("<f4", "(4, 4)"), "");
  EXPECT_EQ(static_cast<const unsigned char*>(npy.array().data), npy.file().data() + bytes.size());
  EXPECT_EQ(bytes.size() % 64, 0u);
  const void* data = npy.array().data;
  NpyFile moved(std::move(npy));
  EXPECT_EQ(moved.array().data, data);  // a move keeps the mapping, so views stay valid
}

TEST_F(MappedFileTest, NpyRefusesFortranOrderNamingTheFile) {
  const std::string file = write("fortran.npy", npy_bytes(npy_dict("<f4", "(2, 2)", true), pattern(16)));
  expect_error([&] { NpyFile f(file); }, Code::InvalidArgument, {file, "fortran_order"});
}

TEST_F(MappedFileTest, NpyRefusesBigEndianAndUnknownDtypes) {
  const std::string big = write("big.npy", npy_bytes(npy_dict(">f4", "(2,)"), pattern(8)));
  expect_error([&] { NpyFile f(big); }, Code::Dtype, {big, "big-endian", ">f4"});
  const std::string complex = write("complex.npy", npy_bytes(npy_dict("<c8", "(2,)"), pattern(16)));
  expect_error([&] { NpyFile f(complex); }, Code::Dtype, {complex, "<c8"});
  const std::string record =
      write("record.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", pattern(4)));
  expect_error([&] { NpyFile f(record); }, Code::Dtype, {record, "structured"});
}

TEST_F(MappedFileTest, NpyRefusesTruncatedPayload) {
  const std::string good = write("good.npy", npy_bytes(npy_dict("<f4", "(10, 4)"), pattern(160)));
  EXPECT_NO_THROW(NpyFile f(good));
  const std::string cut = truncated_copy(good, 3);
  expect_error([&] { NpyFile f(cut); }, Code::InvalidArgument, {cut, "truncated", "160", "157"});
}

TEST_F(MappedFileTest, NpyRefusesBadPreambleAndHeaderLength) {
  const std::string magic = write("magic.npy", "\x93NUMPX" + std::string(100, ' '));
  expect_error([&] { NpyFile f(magic); }, Code::InvalidArgument, {magic, "magic"});
  std::string v4 = npy_bytes(npy_dict("<f4", "(1,)"), pattern(4));
  v4[6] = 4;
  const std::string version = write("v4.npy", v4);
  expect_error([&] { NpyFile f(version); }, Code::InvalidArgument, {version, "version 4.0"});
  const std::string tiny = write("tiny.npy", std::string("\x93NUMPY\x02\x00\x10", 9));
  expect_error([&] { NpyFile f(tiny); }, Code::InvalidArgument, {tiny, "preamble"});
  // A 1.0 header that claims 1000 bytes in a file of a few dozen.
  const std::string long_header = write("long.npy", std::string("\x93NUMPY\x01\x00", 8) + le_bytes(1000, 2) + "{}\n");
  expect_error([&] { NpyFile f(long_header); }, Code::InvalidArgument, {long_header, "shorter than its header"});
  // A 2.0 header that claims 4 GiB.
  const std::string absurd = write("absurd.npy", std::string("\x93NUMPY\x02\x00", 8) + le_bytes(0xFFFFFFFF, 4) + "{}\n");
  expect_error([&] { NpyFile f(absurd); }, Code::InvalidArgument, {absurd, "exceeds"});
}

TEST_F(MappedFileTest, NpyRefusesMalformedHeaders) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '<f4', 'fortran_order': False, }", "missing key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "expected True or False"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", "malformed"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", "only integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", "expected '('"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,) 'x'}", "expected '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } trailing", "after the dictionary"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "out of range"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }", "negative"},
      {"", "expected '{'"},
  };
  for (const auto& [dict, problem] : cases) {
    SCOPED_TRACE(dict);
    const std::string file = write("bad.npy", npy_bytes(dict, pattern(8)));
    expect_error([&] { NpyFile f(file); }, Code::InvalidArgument, {file, problem});
  }
}

// ---- .safetensors --------------------------------------------------------------------------------

TEST_F(MappedFileTest, SafetensorsRoundTripsEveryDtypeSortedByName) {
  // Written in reverse name order ("t9" ... "t0") to show that arrays() sorts by name.
  std::string json = "{";
  std::string payload;
  for (size_t i = kDtypeCases.size(); i-- > 0;) {
    const DtypeCase& dtype = kDtypeCases[i];
    const std::string bytes = pattern(6 * dtype.size, static_cast<unsigned>(i));
    json += (payload.empty() ? "" : ",") + std::string("\"t") + std::to_string(i) + "\": {\"dtype\": \"" +
            dtype.safetensors + "\", \"shape\": [3, 2], \"data_offsets\": [" + std::to_string(payload.size()) +
            ", " + std::to_string(payload.size() + bytes.size()) + "]}";
    payload += bytes;
  }
  json += "}";
  SafetensorsFile st(write("all.safetensors", safetensors_bytes(json, payload)));
  ASSERT_EQ(st.arrays().size(), kDtypeCases.size());
  for (size_t i = 0; i < kDtypeCases.size(); ++i) {
    SCOPED_TRACE(kDtypeCases[i].name);
    const ArrayView& view = st.arrays()[i];
    EXPECT_EQ(view.name, "t" + std::to_string(i));
    EXPECT_EQ(view.dtype, kDtypeCases[i].name);
    EXPECT_EQ(view.element_size, kDtypeCases[i].size);
    EXPECT_EQ(view.shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(bytes_of(view), pattern(6 * kDtypeCases[i].size, static_cast<unsigned>(i)));
    EXPECT_TRUE(inside(view, st.file()));
    EXPECT_EQ(&st.array(view.name), &view);
  }
  EXPECT_TRUE(st.metadata().empty());
}

TEST_F(MappedFileTest, SafetensorsViewsPointIntoTheMapping) {
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  SafetensorsFile st(write("w.safetensors", safetensors_bytes(json, pattern(8))));
  EXPECT_TRUE(inside(st.array("w"), st.file()));
  EXPECT_EQ(static_cast<const unsigned char*>(st.array("w").data), st.file().data() + 8 + json.size());
}

TEST_F(MappedFileTest, SafetensorsZeroDimEmptyMetadataAndPadding) {
  const std::string json = R"( {"__metadata__": {"format": "pt", "note": "a\nb"},
      "scalar": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]},
      "none": {"shape": [0, 4], "data_offsets": [8, 8], "dtype": "F16"}}    )";
  const std::vector<int64_t> scalar{-42};
  SafetensorsFile st(write("misc.safetensors", safetensors_bytes(json, raw(scalar))));
  EXPECT_EQ(st.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "a\nb"}}));
  const ArrayView& s = st.array("scalar");
  EXPECT_TRUE(s.shape.empty());
  int64_t value = 0;
  std::memcpy(&value, s.data, sizeof value);
  EXPECT_EQ(value, -42);
  EXPECT_EQ(st.array("none").nbytes, 0u);
  EXPECT_EQ(st.array("none").shape, (std::vector<int64_t>{0, 4}));
}

TEST_F(MappedFileTest, SafetensorsDecodesStringEscapes) {
  const std::string json =
      R"({"caf\u00e9 \"q\" \\ \/ \ud83d\ude00\t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})";
  SafetensorsFile st(write("escapes.safetensors", safetensors_bytes(json, "z")));
  ASSERT_EQ(st.arrays().size(), 1u);
  EXPECT_EQ(st.arrays()[0].name, "caf\xc3\xa9 \"q\" \\ / \xf0\x9f\x98\x80\t");
}

TEST_F(MappedFileTest, SafetensorsMissingNameListsTheAvailableOnes) {
  const std::string json = R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  const std::string file = write("names.safetensors", safetensors_bytes(json, "xy"));
  SafetensorsFile st(file);
  expect_error([&] { st.array("c"); }, Code::InvalidArgument, {file, "'c'", "available: a, b"});
}

TEST_F(MappedFileTest, SafetensorsRefusesBadHeaderLengths) {
  const std::string tiny = write("tiny.safetensors", "\x02\x00\x00");
  expect_error([&] { SafetensorsFile f(tiny); }, Code::InvalidArgument, {tiny, "too short"});
  const std::string longer = write("longer.safetensors", le_bytes(500, 8) + "{}");
  expect_error([&] { SafetensorsFile f(longer); }, Code::InvalidArgument, {longer, "shorter than its header"});
  const std::string absurd = write("absurd.safetensors", le_bytes(200'000'000, 8) + "{}");
  expect_error([&] { SafetensorsFile f(absurd); }, Code::InvalidArgument, {absurd, "exceeds"});
  const std::string huge = write("huge.safetensors", le_bytes(~0ULL, 8) + "{}");
  expect_error([&] { SafetensorsFile f(huge); }, Code::InvalidArgument, {huge, "exceeds"});
}

TEST_F(MappedFileTest, SafetensorsRefusesMalformedJson) {
  const std::string tensor = R"("a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + tensor, "expected '}'"},
      {"{" + tensor + ",}", "expected '\"'"},
      {"{'a': 1}", "expected '\"'"},
      {"[]", "expected '{'"},
      {"", "expected '{'"},
      {"{" + tensor + "} x", "after the JSON object"},
      {R"({"a": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", "only integers"},
      {R"({"a": {"dtype": "U8", "shape": [01], "data_offsets": [0, 1]}})", "leading zeros"},
      {R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})", "expected '}'"},
      {R"({"a": {"dtype": "U8, "shape": [1], "data_offsets": [0, 1]}})", "expected '}'"},
      {R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1)", "expected ']'"},
      {R"({"a\q": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "unknown escape"},
      {R"({"a\udc00": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "lone low surrogate"},
      {R"({"a\ud83d": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "without its low half"},
      {R"({"a\u12": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "hex digit"},
      {"{\"a\tb\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", "control character"},
      {R"({"a": {"dtype": "U8", "shape": true, "data_offsets": [0, 1]}})", "expected '['"},
      {R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})", "unexpected key 'x'"},
      {R"({"a": {"dtype": "U8", "shape": [1], "shape": [1], "data_offsets": [0, 1]}})", "twice"},
      {R"({"a": {"dtype": "U8", "shape": [1]}})", "lacks 'data_offsets'"},
      {R"({"__metadata__": {"k": 1}})", "must be strings"},
      {R"({"__metadata__": {}, "__metadata__": {}})", "twice"},
      {"{" + tensor + "," + tensor + "}", "'a' appears twice"},
  };
  for (const auto& [json, problem] : cases) {
    SCOPED_TRACE(json);
    const std::string file = write("bad.safetensors", safetensors_bytes(json, "z"));
    expect_error([&] { SafetensorsFile f(file); }, Code::InvalidArgument, {file, problem});
  }
}

TEST_F(MappedFileTest, SafetensorsRefusesUnknownDtypes) {
  for (const char* dtype : {"F8_E4M3", "C64", "U16", "f32", ""}) {
    SCOPED_TRACE(dtype);
    const std::string json = std::string(R"({"a": {"dtype": ")") + dtype + R"(", "shape": [1], "data_offsets": [0, 1]}})";
    const std::string file = write("dtype.safetensors", safetensors_bytes(json, "z"));
    expect_error([&] { SafetensorsFile f(file); }, Code::Dtype, {file, "'a'", std::string("'") + dtype + "'"});
  }
}

TEST_F(MappedFileTest, SafetensorsRefusesInconsistentShapesAndOffsets) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "negative"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}})", "span 8 bytes"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "data_offsets [0]"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", "begin <= end"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", "begin <= end"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", "truncated"},
      {R"({"a": {"dtype": "U8", "shape": [9223372036854775807], "data_offsets": [0, 9223372036854775807]}})",
       "truncated"},
      {R"({"a": {"dtype": "U8", "shape": [6], "data_offsets": [0, 6]},)"
       R"( "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
       "'a' and 'b' overlap"},
      {R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},)"
       R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [5, 7]}})",
       "'a' and 'b' overlap"},
  };
  for (const auto& [json, problem] : cases) {
    SCOPED_TRACE(json);
    const std::string file = write("bad.safetensors", safetensors_bytes(json, pattern(8)));
    expect_error([&] { SafetensorsFile f(file); }, Code::InvalidArgument, {file, problem});
  }
}

TEST_F(MappedFileTest, SafetensorsAllowsAdjacentEmptyAndGappedTensors) {
  const std::string json = R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
                           R"( "e": {"dtype": "U8", "shape": [0], "data_offsets": [1, 1]},)"
                           R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},)"
                           R"( "c": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}})";
  SafetensorsFile st(write("ok.safetensors", safetensors_bytes(json, pattern(8))));
  EXPECT_EQ(st.arrays().size(), 4u);
  EXPECT_EQ(bytes_of(st.array("c")), pattern(8).substr(6));
}

TEST_F(MappedFileTest, SafetensorsRefusesTruncatedFile) {
  const std::string json = R"({"w": {"dtype": "F64", "shape": [3, 2], "data_offsets": [0, 48]}})";
  const std::string good = write("good.safetensors", safetensors_bytes(json, pattern(48)));
  EXPECT_NO_THROW(SafetensorsFile f(good));
  const std::string cut = truncated_copy(good, 3);
  expect_error([&] { SafetensorsFile f(cut); }, Code::InvalidArgument, {cut, "'w'", "truncated", "45"});
}

// ---- row_slice -----------------------------------------------------------------------------------

TEST_F(MappedFileTest, RowSliceViewsTheRequestedRows) {
  std::vector<int32_t> values(15);
  for (int32_t i = 0; i < 15; ++i) values[static_cast<size_t>(i)] = i;
  NpyFile npy(write("rows.npy", npy_bytes(npy_dict("<i4", "(5, 3)"), raw(values))));
  const ArrayView& all = npy.array();

  const ArrayView rows = row_slice(all, 2, 2);
  EXPECT_EQ(rows.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(rows.nbytes, 24u);
  EXPECT_EQ(rows.dtype, "int32");
  EXPECT_EQ(rows.data, static_cast<const unsigned char*>(all.data) + 2 * 12);
  std::vector<int32_t> got(6);
  std::memcpy(got.data(), rows.data, rows.nbytes);
  EXPECT_EQ(got, (std::vector<int32_t>{6, 7, 8, 9, 10, 11}));

  EXPECT_EQ(row_slice(all, 0, 5).nbytes, all.nbytes);
  EXPECT_EQ(row_slice(all, 5, 0).nbytes, 0u);
  const ArrayView last = row_slice(row_slice(all, 4, 1), 0, 1);  // slices of slices work too
  std::memcpy(got.data(), last.data, last.nbytes);
  EXPECT_EQ(got[0], 12);
}

TEST_F(MappedFileTest, RowSliceRefusesRowsOutsideTheArray) {
  NpyFile npy(write("rows.npy", npy_bytes(npy_dict("<i4", "(5, 3)"), pattern(60))));
  const ArrayView& all = npy.array();
  for (auto [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
           {-1, 1}, {0, -1}, {4, 2}, {6, 0}, {1, INT64_MAX}, {INT64_MAX, 1}}) {
    SCOPED_TRACE(std::to_string(begin) + "," + std::to_string(count));
    expect_error([&] { row_slice(all, begin, count); }, Code::OutOfRange, {all.name, "dim 0 of size 5"});
  }

  const std::vector<float> scalar{1.0f};
  NpyFile zero_d(write("scalar.npy", npy_bytes(npy_dict("<f4", "()"), raw(scalar))));
  expect_error([&] { row_slice(zero_d.array(), 0, 1); }, Code::InvalidArgument, {"0-d"});

  ArrayView lying = all;
  lying.nbytes = 1;
  expect_error([&] { row_slice(lying, 0, 1); }, Code::InvalidArgument, {"does not match"});
}

// ---- larger than memory --------------------------------------------------------------------------

// A sparse file whose header declares a 3 GiB float32 array: opening it and reading rows at the end
// must touch only those pages, so the peak RSS barely moves.
TEST_F(MappedFileTest, SparseThreeGibFileIsReadLazily) {
  constexpr int64_t kCols = 256;
  constexpr int64_t kRows = (3LL << 30) / (kCols * 4);
  const std::string header = npy_bytes(npy_dict("<f4", "(" + std::to_string(kRows) + ", " + std::to_string(kCols) + ")"), "");
  const std::string file = write("big.npy", header);
  const int fd = ::open(file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(header.size()) + kRows * kCols * 4), 0) << std::strerror(errno);
  auto row_values = [](int64_t row) { return std::vector<float>(kCols, static_cast<float>(row) + 0.5f); };
  for (int64_t row : {int64_t{0}, kRows / 2, kRows - 2, kRows - 1}) {
    const std::string bytes = raw(row_values(row));
    const off_t at = static_cast<off_t>(header.size()) + row * kCols * 4;
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), at), static_cast<ssize_t>(bytes.size()));
  }
  ::close(fd);

  const long rss_before = max_rss_bytes();
  NpyFile npy(file);
  EXPECT_EQ(npy.array().nbytes, size_t{3} << 30);
  const ArrayView tail = row_slice(npy.array(), kRows - 2, 2);
  std::vector<float> got(2 * kCols);
  std::memcpy(got.data(), tail.data, tail.nbytes);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + kCols), row_values(kRows - 2));
  EXPECT_EQ(std::vector<float>(got.begin() + kCols, got.end()), row_values(kRows - 1));
  const ArrayView middle = row_slice(npy.array(), kRows / 2, 1);
  std::memcpy(got.data(), middle.data, middle.nbytes);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + kCols), row_values(kRows / 2));

  EXPECT_LT(max_rss_bytes() - rss_before, 64L << 20) << "peak RSS grew as if the payload had been read";
}

// ---- interoperability with numpy -----------------------------------------------------------------

TEST_F(MappedFileTest, ReadsFilesWrittenByNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with numpy is not available";
  }
  const std::string script = write("make.py", R"(
import sys, numpy as np
d = sys.argv[1] + '/'
np.save(d + 'f32.npy', np.arange(12, dtype='<f4').reshape(3, 4))
np.save(d + 'scalar.npy', np.float64(2.5))
np.save(d + 'flags.npy', np.array([True, False, True]))
np.save(d + 'half.npy', np.array([1.0, -2.0], dtype='<f2'))
for v in (2, 3):
    with open(d + 'v%d.npy' % v, 'wb') as f:
        np.lib.format.write_array(f, np.arange(5, dtype='<i8'), version=(v, 0))
np.save(d + 'fortran.npy', np.asfortranarray(np.ones((2, 3), dtype='<f4')))
np.save(d + 'big.npy', np.arange(3, dtype='>i4'))
)");
  ASSERT_EQ(std::system(("/usr/bin/python3 '" + script + "' '" + dir_.string() + "'").c_str()), 0);

  NpyFile f32(path("f32.npy"));
  EXPECT_EQ(f32.array().shape, (std::vector<int64_t>{3, 4}));
  std::vector<float> row(4);
  const ArrayView second = row_slice(f32.array(), 1, 1);
  std::memcpy(row.data(), second.data, second.nbytes);
  EXPECT_EQ(row, (std::vector<float>{4, 5, 6, 7}));

  NpyFile scalar(path("scalar.npy"));
  double value = 0;
  std::memcpy(&value, scalar.array().data, sizeof value);
  EXPECT_TRUE(scalar.array().shape.empty());
  EXPECT_EQ(value, 2.5);

  NpyFile flags(path("flags.npy"));
  EXPECT_EQ(flags.array().dtype, "bool");
  EXPECT_EQ(bytes_of(flags.array()), std::string("\x01\x00\x01", 3));

  NpyFile half(path("half.npy"));
  EXPECT_EQ(half.array().dtype, "float16");
  EXPECT_EQ(bytes_of(half.array()), std::string("\x00\x3c\x00\xc0", 4));  // 1.0 and -2.0 in IEEE half

  for (const char* name : {"v2.npy", "v3.npy"}) {
    SCOPED_TRACE(name);
    NpyFile versioned(path(name));
    std::vector<int64_t> ints(5);
    std::memcpy(ints.data(), versioned.array().data, versioned.array().nbytes);
    EXPECT_EQ(ints, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  }

  expect_error([&] { NpyFile f(path("fortran.npy")); }, Code::InvalidArgument, {"fortran.npy", "fortran_order"});
  expect_error([&] { NpyFile f(path("big.npy")); }, Code::Dtype, {"big.npy", "big-endian"});
}

}  // namespace
