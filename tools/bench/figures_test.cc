#include "tools/bench/figures.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace berth::bench {
namespace {

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3}), 3);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(FigureTest, MedianLine) {
  Figure figure("driver_start", "ms");
  EXPECT_EQ(figure.MedianLine(), "");
  figure.Add(2);
  figure.Add(1);
  figure.Add(4.5);
  EXPECT_EQ(figure.samples().size(), 3);
  EXPECT_EQ(figure.Median(), 2);
  EXPECT_EQ(figure.MedianLine(),
            "median driver_start 2.0000 ms n=3 min=1.0000 max=4.5000");
}

TEST(StreamPatternTest, FillThenMatchAcrossThePeriod) {
  const StreamPattern pattern;
  // Chunks of odd sizes that cross the period's end.
  const uint64_t start = StreamPattern::kPeriod - 1000;
  std::string chunk(5000, '\0');
  pattern.Fill(start, chunk.data(), chunk.size());
  EXPECT_TRUE(pattern.Matches(start, chunk));
  EXPECT_TRUE(pattern.Matches(start + 10, absl::string_view(chunk).substr(10)));
  // Byte i equals byte i + period.
  std::string again(chunk.size(), '\0');
  pattern.Fill(start + StreamPattern::kPeriod, again.data(), again.size());
  EXPECT_EQ(again, chunk);
}

TEST(StreamPatternTest, DetectsLossAndCorruption) {
  const StreamPattern pattern;
  std::string stream(3 * 32 * 1024, '\0');
  pattern.Fill(0, stream.data(), stream.size());
  // A lost 32 KiB frame: what follows arrives at the wrong offset.
  EXPECT_FALSE(
      pattern.Matches(32 * 1024, absl::string_view(stream).substr(64 * 1024)));
  std::string flipped = stream;
  flipped[12345] ^= 1;
  EXPECT_FALSE(pattern.Matches(0, flipped));
  EXPECT_TRUE(pattern.Matches(0, stream));
}

TEST(FormatBytesTest, Units) {
  EXPECT_EQ(FormatBytes(uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(FormatBytes(uint64_t{4} << 20), "4 MiB");
  EXPECT_EQ(FormatBytes(32 * 1024), "32 KiB");
  EXPECT_EQ(FormatBytes(1000), "1000 B");
}

}  // namespace
}  // namespace berth::bench
