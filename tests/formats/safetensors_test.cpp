// .safetensors files: reading every dtype, the JSON header grammar and consistency checks, and writing.
#include "formats/safetensors.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "format_files.hpp"

namespace {

using namespace accel::formats;
using namespace accel::formats::testing;
using accel::Code;

class SafetensorsTest : public FormatFileTest {};

uint64_t read_le_header_length(const std::string& bytes) {
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  return length;
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeSortedByName) {
  // Written in reverse name order ("t9" ... "t0") to show that arrays() sorts by name.
  std::string json = "{";
  std::string payload;
  for (size_t i = dtype_cases().size(); i-- > 0;) {
    const DtypeCase& dtype = dtype_cases()[i];
    const std::string bytes = pattern(6 * dtype.size, static_cast<unsigned>(i));
    json += (payload.empty() ? "" : ",") + std::string("\"t") + std::to_string(i) + "\": {\"dtype\": \"" +
            dtype.safetensors + "\", \"shape\": [3, 2], \"data_offsets\": [" + std::to_string(payload.size()) +
            ", " + std::to_string(payload.size() + bytes.size()) + "]}";
    payload += bytes;
  }
  json += "}";
  SafetensorsFile st(write("all.safetensors", safetensors_bytes(json, payload)));
  ASSERT_EQ(st.arrays().size(), dtype_cases().size());
  for (size_t i = 0; i < dtype_cases().size(); ++i) {
    SCOPED_TRACE(dtype_cases()[i].safetensors);
    const ArrayView& view = st.arrays()[i];
    EXPECT_EQ(view.name, "t" + std::to_string(i));
    EXPECT_EQ(view.dtype, dtype_cases()[i].type);
    EXPECT_EQ(view.shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(bytes_of(view), pattern(6 * dtype_cases()[i].size, static_cast<unsigned>(i)));
    EXPECT_TRUE(inside(view, st.file()));
    EXPECT_EQ(&st.array(view.name), &view);
  }
  EXPECT_TRUE(st.metadata().empty());
}

TEST_F(SafetensorsTest, ViewsPointIntoTheMapping) {
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  SafetensorsFile st(write("w.safetensors", safetensors_bytes(json, pattern(8))));
  EXPECT_TRUE(inside(st.array("w"), st.file()));
  EXPECT_EQ(static_cast<const unsigned char*>(st.array("w").data), st.file().data() + 8 + json.size());
}

TEST_F(SafetensorsTest, ZeroDimEmptyMetadataAndPadding) {
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

TEST_F(SafetensorsTest, DecodesStringEscapes) {
  const std::string json =
      R"({"caf\u00e9 \"q\" \\ \/ \ud83d\ude00\t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})";
  SafetensorsFile st(write("escapes.safetensors", safetensors_bytes(json, "z")));
  ASSERT_EQ(st.arrays().size(), 1u);
  EXPECT_EQ(st.arrays()[0].name, "caf\xc3\xa9 \"q\" \\ / \xf0\x9f\x98\x80\t");
}

TEST_F(SafetensorsTest, MissingNameListsTheAvailableOnes) {
  const std::string json = R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  const std::string file = write("names.safetensors", safetensors_bytes(json, "xy"));
  SafetensorsFile st(file);
  expect_error([&] { st.array("c"); }, Code::InvalidArgument, {file, "'c'", "available: a, b"});
}

TEST_F(SafetensorsTest, RefusesBadHeaderLengths) {
  const std::string tiny = write("tiny.safetensors", "\x02\x00\x00");
  expect_error([&] { SafetensorsFile f(tiny); }, Code::InvalidArgument, {tiny, "too short"});
  const std::string longer = write("longer.safetensors", le_bytes(500, 8) + "{}");
  expect_error([&] { SafetensorsFile f(longer); }, Code::InvalidArgument, {longer, "shorter than its header"});
  const std::string absurd = write("absurd.safetensors", le_bytes(200'000'000, 8) + "{}");
  expect_error([&] { SafetensorsFile f(absurd); }, Code::InvalidArgument, {absurd, "exceeds"});
  const std::string huge = write("huge.safetensors", le_bytes(~0ULL, 8) + "{}");
  expect_error([&] { SafetensorsFile f(huge); }, Code::InvalidArgument, {huge, "exceeds"});
}

TEST_F(SafetensorsTest, RefusesMalformedJson) {
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
      // JSON text is UTF-8: raw bytes that are not (which the writer refuses to quote) are refused too.
      {"{\"__metadata__\": {\"fo\x8e\x94" "at\": \"pt\"}}", "'fo\\x8e\\x94at' is not UTF-8"},
      {"{\"a\xff\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", "is not UTF-8"},
  };
  for (const auto& [json, problem] : cases) {
    SCOPED_TRACE(json);
    const std::string file = write("bad.safetensors", safetensors_bytes(json, "z"));
    expect_error([&] { SafetensorsFile f(file); }, Code::InvalidArgument, {file, problem});
  }
}

TEST_F(SafetensorsTest, RefusesUnknownDtypes) {
  for (const char* dtype : {"F8_E4M3", "C64", "U16", "f32", ""}) {
    SCOPED_TRACE(dtype);
    const std::string json = std::string(R"({"a": {"dtype": ")") + dtype + R"(", "shape": [1], "data_offsets": [0, 1]}})";
    const std::string file = write("dtype.safetensors", safetensors_bytes(json, "z"));
    expect_error([&] { SafetensorsFile f(file); }, Code::Dtype, {file, "'a'", std::string("'") + dtype + "'"});
  }
}

TEST_F(SafetensorsTest, RefusesInconsistentShapesAndOffsets) {
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

TEST_F(SafetensorsTest, AllowsAdjacentEmptyAndGappedTensors) {
  const std::string json = R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
                           R"( "e": {"dtype": "U8", "shape": [0], "data_offsets": [1, 1]},)"
                           R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},)"
                           R"( "c": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}})";
  SafetensorsFile st(write("ok.safetensors", safetensors_bytes(json, pattern(8))));
  EXPECT_EQ(st.arrays().size(), 4u);
  EXPECT_EQ(bytes_of(st.array("c")), pattern(8).substr(6));
}

// Tensors with no bytes (zero rows, zero width, or zero rows of enormous ones) copy out as empty tensors:
// the copy of their nothing into a tensor without data was memcpy to NULL (UBSan: undefined behaviour).
TEST_F(SafetensorsTest, EmptyTensorsCopyOutEmpty) {
  const std::string json = R"({"rows": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]},)"
                           R"( "width": {"dtype": "F32", "shape": [3, 0], "data_offsets": [0, 0]},)"
                           R"( "huge": {"dtype": "U8", "shape": [0, 9223372036854775807], "data_offsets": [0, 0]}})";
  SafetensorsFile st(write("empty.safetensors", safetensors_bytes(json, "")));
  for (const char* name : {"rows", "width", "huge"}) {
    SCOPED_TRACE(name);
    const at::Tensor tensor = copy_to_tensor(st.array(name));
    EXPECT_EQ(tensor.numel(), 0);
    EXPECT_EQ(tensor.sizes().vec(), st.array(name).shape);
  }
}

TEST_F(SafetensorsTest, RefusesTruncatedFile) {
  const std::string json = R"({"w": {"dtype": "F64", "shape": [3, 2], "data_offsets": [0, 48]}})";
  const std::string good = write("good.safetensors", safetensors_bytes(json, pattern(48)));
  EXPECT_NO_THROW(SafetensorsFile f(good));
  const std::string cut = truncated_copy(good, 3);
  expect_error([&] { SafetensorsFile f(cut); }, Code::InvalidArgument, {cut, "'w'", "truncated", "45"});
}

// ---- writing -------------------------------------------------------------------------------------

TEST_F(SafetensorsTest, WrittenFilesReadBackWithEveryDtypeNameAndMetadata) {
  accel::NamedTensors tensors;
  for (const DtypeCase& dtype : dtype_cases()) {
    tensors.emplace_back(std::string("t_") + dtype.safetensors, at::arange(6).reshape({2, 3}).to(dtype.type));
  }
  // Names and metadata that need the JSON layer's escapes, and UTF-8 that must pass through as it is.
  const std::string odd_name = "quote\" \\ back\ttab\x01 caf\xc3\xa9";
  tensors.emplace_back(odd_name, at::full({}, 2.5, at::kDouble));
  tensors.emplace_back("empty", at::empty({0, 4}, at::kFloat));
  tensors.emplace_back("transposed", at::arange(6, at::kInt).reshape({2, 3}).t());
  const std::map<std::string, std::string> metadata{{"note", "line\nbreak \"quoted\""}};
  const std::string file = path("model.safetensors");
  write_safetensors(file, tensors, metadata);

  SafetensorsFile st(file);
  EXPECT_EQ(st.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "line\nbreak \"quoted\""}}));
  ASSERT_EQ(st.arrays().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    const ArrayView& view = st.array(name);
    const at::Tensor expected = tensor.contiguous();
    EXPECT_EQ(view.dtype, expected.scalar_type());
    EXPECT_EQ(view.shape, expected.sizes().vec());
    EXPECT_EQ(bytes_of(view), std::string(static_cast<const char*>(expected.data_ptr()),
                                          static_cast<size_t>(expected.numel()) * expected.element_size()));
  }
  // The payload starts 8-byte aligned, as the reference writer pads it.
  EXPECT_EQ((8 + read_le_header_length(read(file))) % 8, 0u);
  EXPECT_EQ(accel::list_directory(dir_).size(), 1u)
      << "the temporary file was left behind";
}

TEST_F(SafetensorsTest, WriterRefusesUnsupportedDtypesAndRepeatedNamesLeavingTheOldFile) {
  const std::string file = write("model.safetensors", "old contents");
  expect_error([&] { write_safetensors(file, {{"z", at::zeros({2}, at::kComplexFloat)}}); }, Code::Dtype,
               {"ComplexFloat"});
  expect_error([&] { write_safetensors(file, {{"a", at::zeros({1})}, {"a", at::ones({1})}}); },
               Code::InvalidArgument, {"'a' appears twice"});
  EXPECT_EQ(read(file), "old contents");
  expect_error([&] { write_safetensors(path("missing/model.safetensors"), {{"a", at::zeros({1})}}); }, Code::Io,
               {"missing"});
}

}  // namespace
