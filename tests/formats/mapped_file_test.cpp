// MappedFile: the whole file mapped, moves that keep the mapping, errors, and lazy paging.
#include "formats/mapped_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "format_files.hpp"
#include "formats/npy.hpp"
#include "formats/safetensors.hpp"

namespace {

using namespace accel::formats;
using namespace accel::formats::testing;
using accel::Code;

class MappedFileTest : public FormatFileTest {};

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
  expect_error([&] { MappedFile f(dir_); }, Code::Io, {dir_, "not a regular file"});
  const std::string empty = write("empty.npy", "");
  expect_error([&] { NpyFile f(empty); }, Code::InvalidArgument, {empty, "empty"});
}

// ---- larger than memory --------------------------------------------------------------------------

// Peak resident set size of this process so far, in bytes (Linux reports KiB).
long max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;
}

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

}  // namespace
