#include "services/agent/output_window.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace berth::agent {
namespace {

// Reads everything from `offset` to the end of the window, frame by frame.
std::string ReadAll(const OutputWindow& window, uint64_t offset) {
  std::string out;
  while (true) {
    std::string frame;
    const size_t n = window.CopyFrom(offset, kMaxOutputFrameBytes, &frame);
    if (n == 0) break;
    EXPECT_EQ(n, frame.size());
    EXPECT_LE(n, kMaxOutputFrameBytes);
    out += frame;
    offset += n;
  }
  return out;
}

std::string Pattern(size_t size, size_t seed = 0) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i)
    s[i] = static_cast<char>('a' + (i + seed) % 26);
  return s;
}

TEST(OutputWindowTest, OffsetsStartAtZeroAndGrow) {
  OutputWindow window("stdout", 1000);
  EXPECT_EQ(window.start_offset(), 0u);
  EXPECT_EQ(window.end_offset(), 0u);
  EXPECT_EQ(window.room(), 1000u);
  window.Append("hello ");
  window.Append("world");
  EXPECT_EQ(window.end_offset(), 11u);
  EXPECT_EQ(window.room(), 989u);
  EXPECT_EQ(ReadAll(window, 0), "hello world");
  EXPECT_EQ(ReadAll(window, 6), "world");
  EXPECT_EQ(ReadAll(window, 11), "");
}

TEST(OutputWindowTest, FramesAreAtMostTheFrameSize) {
  OutputWindow window("stdout", 1 << 20);
  const std::string data = Pattern(3 * kMaxOutputFrameBytes + 7);
  window.Append(data);
  std::string frame;
  EXPECT_EQ(window.CopyFrom(0, 1 << 20, &frame), kMaxOutputFrameBytes);
  EXPECT_EQ(ReadAll(window, 0), data);
}

TEST(OutputWindowTest, AckDropsAndMakesRoom) {
  OutputWindow window("stdout", 100);
  window.Append(Pattern(100));
  EXPECT_EQ(window.room(), 0u);  // full: the reader must stop
  ASSERT_TRUE(window.Ack(40).ok());
  EXPECT_EQ(window.start_offset(), 40u);
  EXPECT_EQ(window.room(), 40u);
  EXPECT_EQ(ReadAll(window, 40), Pattern(100).substr(40));
  // An older acknowledgement changes nothing.
  ASSERT_TRUE(window.Ack(10).ok());
  EXPECT_EQ(window.start_offset(), 40u);
  window.Append(Pattern(40, 100));
  EXPECT_EQ(window.end_offset(), 140u);
  EXPECT_EQ(ReadAll(window, 40), Pattern(100).substr(40) + Pattern(40, 100));
  ASSERT_TRUE(window.Ack(140).ok());
  EXPECT_EQ(window.buffered(), 0u);
  EXPECT_EQ(window.room(), 100u);
}

TEST(OutputWindowTest, AckBeyondWhatWasReadIsOutOfRange) {
  OutputWindow window("stderr", 100);
  window.Append("abc");
  const absl::Status status = window.Ack(4);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("stderr"), std::string::npos);
  EXPECT_EQ(window.start_offset(), 0u);
}

TEST(OutputWindowTest, ResumeWithinTheWindowOnly) {
  OutputWindow window("stdout", 1000);
  window.Append(Pattern(500));
  ASSERT_TRUE(window.Ack(200).ok());
  EXPECT_TRUE(window.CheckResume(200).ok());
  EXPECT_TRUE(window.CheckResume(350).ok());
  EXPECT_TRUE(window.CheckResume(500).ok());  // all sent: nothing to resend
  const absl::Status dropped = window.CheckResume(199);
  EXPECT_EQ(dropped.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(dropped.message().find("[200, 500)"), std::string::npos) << dropped;
  EXPECT_EQ(window.CheckResume(501).code(), absl::StatusCode::kOutOfRange);
  // Resuming mid-chunk gives exactly the rest.
  EXPECT_EQ(ReadAll(window, 350), Pattern(500).substr(350));
  std::string nothing;
  EXPECT_EQ(window.CopyFrom(100, 10, &nothing), 0u);  // dropped
}

TEST(OutputWindowTest, ManySmallPiecesStayFewChunksAndExact) {
  OutputWindow window("stdout", 1 << 20);
  std::string all;
  for (int i = 0; i < 5000; ++i) {
    const std::string piece = Pattern(1 + i % 50, i);
    all += piece;
    window.Append(piece);
  }
  EXPECT_EQ(window.end_offset(), all.size());
  EXPECT_EQ(ReadAll(window, 0), all);
  ASSERT_TRUE(window.Ack(12345).ok());
  EXPECT_EQ(ReadAll(window, 12345), all.substr(12345));
}

TEST(OutputWindowTest, ResumeAfterPartialReadGivesTheRestExactlyOnce) {
  OutputWindow window("stdout", 64 * 1024);
  const std::string data = Pattern(64 * 1024, 3);
  window.Append(data);
  // A client got 10000 bytes and acknowledged 6000 before it went away.
  ASSERT_TRUE(window.Ack(6000).ok());
  ASSERT_TRUE(window.CheckResume(10000).ok());
  const std::string rest = ReadAll(window, 10000);
  EXPECT_EQ(data.substr(0, 10000) + rest, data);
}

TEST(OutputWindowTest, CloseMarksTheEnd) {
  OutputWindow window("stdout", 10);
  EXPECT_FALSE(window.closed());
  window.Close();
  EXPECT_TRUE(window.closed());
}

}  // namespace
}  // namespace berth::agent
