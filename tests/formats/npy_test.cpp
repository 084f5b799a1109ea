// .npy files: every dtype and format version, the header grammar, and files numpy itself wrote.
#include "formats/npy.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "format_files.hpp"

namespace {

using namespace accel::formats;
using namespace accel::formats::testing;
using accel::Code;

class NpyTest : public FormatFileTest {};

TEST_F(NpyTest, RoundTripsEveryDtype) {
  for (const DtypeCase& dtype : dtype_cases()) {
    if (dtype.npy == nullptr) continue;  // numpy has no bfloat16
    SCOPED_TRACE(dtype.npy);
    const std::string payload = pattern(6 * dtype.size);
    NpyFile npy(write(std::string(dtype.safetensors) + ".npy", npy_bytes(npy_dict(dtype.npy, "(2, 3)"), payload)));
    const ArrayView& view = npy.array();
    EXPECT_EQ(view.dtype, dtype.type);
    EXPECT_EQ(view.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(view.nbytes, payload.size());
    EXPECT_EQ(bytes_of(view), payload);
    EXPECT_EQ(view.name, npy.file().path());
  }
}

TEST_F(NpyTest, ValuesReadBackThroughMemcpy) {
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

TEST_F(NpyTest, ZeroDimAndEmptyShapes) {
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

TEST_F(NpyTest, ReadsFormatVersionsTwoAndThree) {
  for (int major : {2, 3}) {
    SCOPED_TRACE(major);
    const std::string payload = pattern(4 * 4);
    NpyFile npy(write("v" + std::to_string(major) + ".npy", npy_bytes(npy_dict("<i4", "(4,)"), payload, major)));
    EXPECT_EQ(npy.array().shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(bytes_of(npy.array()), payload);
  }
}

TEST_F(NpyTest, ViewPointsIntoTheMapping) {
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

TEST_F(NpyTest, RefusesFortranOrderNamingTheFile) {
  const std::string file = write("fortran.npy", npy_bytes(npy_dict("<f4", "(2, 2)", true), pattern(16)));
  expect_error([&] { NpyFile f(file); }, Code::InvalidArgument, {file, "fortran_order"});
}

TEST_F(NpyTest, RefusesBigEndianAndUnknownDtypes) {
  const std::string big = write("big.npy", npy_bytes(npy_dict(">f4", "(2,)"), pattern(8)));
  expect_error([&] { NpyFile f(big); }, Code::Dtype, {big, "big-endian", ">f4"});
  const std::string complex = write("complex.npy", npy_bytes(npy_dict("<c8", "(2,)"), pattern(16)));
  expect_error([&] { NpyFile f(complex); }, Code::Dtype, {complex, "<c8"});
  const std::string record =
      write("record.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", pattern(4)));
  expect_error([&] { NpyFile f(record); }, Code::Dtype, {record, "structured"});
}

TEST_F(NpyTest, RefusesTruncatedPayload) {
  const std::string good = write("good.npy", npy_bytes(npy_dict("<f4", "(10, 4)"), pattern(160)));
  EXPECT_NO_THROW(NpyFile f(good));
  const std::string cut = truncated_copy(good, 3);
  expect_error([&] { NpyFile f(cut); }, Code::InvalidArgument, {cut, "truncated", "160", "157"});
}

TEST_F(NpyTest, RefusesBadPreambleAndHeaderLength) {
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

TEST_F(NpyTest, RefusesMalformedHeaders) {
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

// ---- interoperability with numpy -----------------------------------------------------------------

TEST_F(NpyTest, ReadsFilesWrittenByNumpy) {
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
  ASSERT_EQ(std::system(("/usr/bin/python3 '" + script + "' '" + dir_ + "'").c_str()), 0);

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
  EXPECT_EQ(flags.array().dtype, at::kBool);
  EXPECT_EQ(bytes_of(flags.array()), std::string("\x01\x00\x01", 3));

  NpyFile half(path("half.npy"));
  EXPECT_EQ(half.array().dtype, at::kHalf);
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
