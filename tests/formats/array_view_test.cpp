// row_slice: views of rows into the same mapping, and the rows it refuses.
#include "formats/array_view.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "format_files.hpp"
#include "formats/npy.hpp"

namespace {

using namespace accel::formats;
using namespace accel::formats::testing;
using accel::Code;

class RowSliceTest : public FormatFileTest {};

TEST_F(RowSliceTest, ViewsTheRequestedRows) {
  std::vector<int32_t> values(15);
  for (int32_t i = 0; i < 15; ++i) values[static_cast<size_t>(i)] = i;
  NpyFile npy(write("rows.npy", npy_bytes(npy_dict("<i4", "(5, 3)"), raw(values))));
  const ArrayView& all = npy.array();

  const ArrayView rows = row_slice(all, 2, 2);
  EXPECT_EQ(rows.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(rows.nbytes, 24u);
  EXPECT_EQ(rows.dtype, at::kInt);
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

TEST_F(RowSliceTest, RefusesRowsOutsideTheArray) {
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

}  // namespace
