#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "tracking/progress.hpp"

namespace accel::tracking {
namespace {

// What a FILE* received, read back from its temporary file.
std::string written(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  return text;
}

size_t lines_in(const std::string& text) {
  size_t count = 0;
  for (const char c : text) count += c == '\n';
  return count;
}

TEST(Progress, RenderShowsStepsTimesRateAndLoss) {
  EXPECT_EQ(render_progress({"train", 420, 1000, 12.0, 0.43125}),
            "train  42% [########............] 420/1000 00:12<00:17 35.0 step/s loss 0.4313");
  EXPECT_EQ(render_progress({"", 0, 10, 0.0, std::nullopt}), "  0% [....................] 0/10 00:00<? 0.0 step/s");
  EXPECT_EQ(render_progress({"eval", 7, 0, 2.0, std::nullopt}), "eval 7 steps 00:02 3.5 step/s");
  EXPECT_NE(render_progress({"long", 1, 4, 3725.0, std::nullopt}).find(" 1:02:05<3:06:15 "), std::string::npos);
}

TEST(Progress, PlainOutputPrintsATenthAtATimeNotEveryStep) {
  std::FILE* out = std::tmpfile();
  double now = 0;
  {
    ProgressBar bar(true, 1000, "train", out, /*terminal=*/false, [&] { return now; });
    for (int step = 0; step < 1000; ++step) {
      now += 0.001;
      bar.advance(1, 0.5);
    }
  }
  const std::string text = written(out);
  // The opening line and one per tenth (10 .. 100%); the final line would repeat the 100% one.
  EXPECT_EQ(lines_in(text), 11u) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("100% [####################] 1000/1000"), std::string::npos) << text;
  std::fclose(out);
}

TEST(Progress, PlainOutputAlsoPrintsEveryHalfMinuteOfASlowTenth) {
  std::FILE* out = std::tmpfile();
  double now = 0;
  {
    ProgressBar bar(true, 1000, "", out, false, [&] { return now; });
    for (int step = 0; step < 50; ++step) {  // 5% of the run in 100 s: three half-minute lines
      now += 2;
      bar.advance(1, std::nullopt);
    }
  }
  EXPECT_EQ(lines_in(written(out)), 1u + 3u + 1u);
  std::fclose(out);
}

TEST(Progress, TerminalOutputRedrawsInPlaceAtMostTenTimesASecond) {
  std::FILE* out = std::tmpfile();
  double now = 0;
  {
    ProgressBar bar(true, 100, "t", out, /*terminal=*/true, [&] { return now; });
    for (int step = 0; step < 100; ++step) {
      now += 0.01;  // one second in all
      bar.advance(1, 1.0);
    }
  }
  const std::string text = written(out);
  size_t redraws = 0;
  for (size_t at = text.find('\r'); at != std::string::npos; at = text.find('\r', at + 1)) ++redraws;
  EXPECT_GE(redraws, 10u);
  EXPECT_LE(redraws, 12u);
  EXPECT_EQ(lines_in(text), 1u);  // only the final line ends with a line break
  std::fclose(out);
}

TEST(Progress, OtherRanksDrawNothingAndNegativeStepsAreRefused) {
  std::FILE* out = std::tmpfile();
  {
    ProgressBar bar(false, 10, "x", out, false, [] { return 0.0; });
    bar.advance(10, 1.0);
    EXPECT_THROW(bar.advance(-1, std::nullopt), std::exception);
  }
  EXPECT_EQ(written(out), "");
  std::fclose(out);
}

// A count that would pass INT64_MAX is refused and the bar keeps its count (it printed "-2 steps" after
// wrapping); a count near INT64_MAX still draws its tenths.
TEST(Progress, ACountPastInt64MaxIsRefused) {
  std::FILE* out = std::tmpfile();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  {
    ProgressBar bar(true, kMax, "big", out, false, [] { return 0.0; });
    bar.advance(kMax - 1, std::nullopt);
    EXPECT_THROW(bar.advance(2, std::nullopt), Error);
    bar.advance(1, std::nullopt);
  }
  const std::string text = written(out);
  EXPECT_NE(text.find("100% [####################] " + std::to_string(kMax) + "/" + std::to_string(kMax)),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('-'), std::string::npos) << text;
  std::fclose(out);
  ProgressBar unknown_total(false, 0, "", nullptr, false, [] { return 0.0; });
  unknown_total.advance(kMax, std::nullopt);
  EXPECT_THROW(unknown_total.advance(1, std::nullopt), Error);
}

}  // namespace
}  // namespace accel::tracking
