#include "services/node/log_reader.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::ShortTempDir;

void Append(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << data;
}

struct Collected {
  std::string out;
  std::string err;
};

Collected Read(LogReadOptions options) {
  Collected collected;
  absl::Status status =
      ReadTaskLogs(options, [&](v1::LogStream stream, absl::string_view data) {
        (stream == v1::LOG_STREAM_STDERR ? collected.err : collected.out)
            .append(data.data(), data.size());
        return true;
      });
  EXPECT_TRUE(status.ok()) << status;
  return collected;
}

TEST(LogReaderTest, ReadsRotatedFilesOldestFirst) {
  ShortTempDir dir;
  Append(dir.Join("stdout.log.2"), "one\n");
  Append(dir.Join("stdout.log.1"), "two\n");
  Append(dir.Join("stdout.log"), "three\n");
  Append(dir.Join("stderr.log"), "oops\n");
  LogReadOptions options;
  options.log_dir = dir.path();
  Collected all = Read(options);
  EXPECT_EQ(all.out, "one\ntwo\nthree\n");
  EXPECT_EQ(all.err, "oops\n");

  options.streams = {v1::LOG_STREAM_STDERR};
  Collected err_only = Read(options);
  EXPECT_EQ(err_only.out, "");
  EXPECT_EQ(err_only.err, "oops\n");
}

TEST(LogReaderTest, TailTakesTheLastLinesAcrossRotations) {
  ShortTempDir dir;
  Append(dir.Join("stdout.log.1"), "a\nb\nc\n");
  Append(dir.Join("stdout.log"), "d\ne\n");
  LogReadOptions options;
  options.log_dir = dir.path();
  options.streams = {v1::LOG_STREAM_STDOUT};
  options.tail_lines = 1;
  EXPECT_EQ(Read(options).out, "e\n");
  options.tail_lines = 3;
  EXPECT_EQ(Read(options).out, "c\nd\ne\n");
  options.tail_lines = 100;
  EXPECT_EQ(Read(options).out, "a\nb\nc\nd\ne\n");
}

TEST(LogReaderTest, EarlierRunsComeFirstAndTailReachesIntoThem) {
  ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join("run-0").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("run-1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("live").c_str(), 0755), 0);
  Append(dir.Join("run-0/stdout.log.1"), "r0 a\n");
  Append(dir.Join("run-0/stdout.log"), "r0 b\n");
  Append(dir.Join("run-1/stdout.log"), "r1\n");
  Append(dir.Join("live/stdout.log"), "now\n");
  LogReadOptions options;
  options.log_dir = dir.Join("live");
  options.earlier_log_dirs = {dir.Join("run-0"), dir.Join("run-1")};
  options.streams = {v1::LOG_STREAM_STDOUT};
  EXPECT_EQ(Read(options).out, "r0 a\nr0 b\nr1\nnow\n");
  options.tail_lines = 3;
  EXPECT_EQ(Read(options).out, "r0 b\nr1\nnow\n");
}

TEST(LogReaderTest, TailCountsAnUnfinishedLastLine) {
  ShortTempDir dir;
  Append(dir.Join("stdout.log"), "a\nb\nprompt> ");
  LogReadOptions options;
  options.log_dir = dir.path();
  options.streams = {v1::LOG_STREAM_STDOUT};
  options.tail_lines = 2;
  EXPECT_EQ(Read(options).out, "b\nprompt> ");
}

TEST(LogReaderTest, MissingFilesAreEmptyOutput) {
  ShortTempDir dir;
  LogReadOptions options;
  options.log_dir = dir.path();
  Collected none = Read(options);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "");
}

TEST(LogReaderTest, FollowReadsNewOutputAcrossARotationUntilTheTaskEnds) {
  ShortTempDir dir;
  const std::string live = dir.Join("stdout.log");
  Append(live, "before\n");
  bool running = true;
  std::string out;
  int waits = 0;
  LogReadOptions options;
  options.log_dir = dir.path();
  options.streams = {v1::LOG_STREAM_STDOUT};
  options.follow = true;
  options.running = [&] { return running; };
  // The task writes in the waits between reads, one step in each, so that
  // each read sees exactly one step: new output, then a rotation, then the
  // task's last output and its end.
  options.wait = [&](absl::Duration) {
    switch (++waits) {
      case 1:
        EXPECT_EQ(out, "before\n");
        Append(live, "during\n");
        break;
      case 2:
        EXPECT_EQ(out, "before\nduring\n");
        // Rotate as the task's init does: write the tail of the old file,
        // then move it aside and start a new one.
        Append(live, "last-of-old\n");
        ASSERT_EQ(std::rename(live.c_str(), dir.Join("stdout.log.1").c_str()),
                  0);
        Append(live, "first-of-new\n");
        break;
      case 3:
        // One read took the rest of the old file and the new one.
        EXPECT_EQ(out, "before\nduring\nlast-of-old\nfirst-of-new\n");
        Append(live, "end\n");
        running = false;
        break;
      default:
        ADD_FAILURE() << "read on after the task ended";
        running = false;
    }
  };
  absl::Status status =
      ReadTaskLogs(options, [&](v1::LogStream, absl::string_view data) {
        out.append(data.data(), data.size());
        return true;
      });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(waits, 3);
  EXPECT_EQ(out, "before\nduring\nlast-of-old\nfirst-of-new\nend\n");
}

TEST(LogReaderTest, FollowEndsWhenCancelled) {
  ShortTempDir dir;
  Append(dir.Join("stdout.log"), "x\n");
  LogReadOptions options;
  options.log_dir = dir.path();
  options.follow = true;
  options.running = [] { return true; };
  options.wait = [](absl::Duration) {};
  int polls = 0;
  options.cancelled = [&] { return ++polls > 3; };
  std::string out;
  absl::Status status =
      ReadTaskLogs(options, [&](v1::LogStream, absl::string_view data) {
        out.append(data.data(), data.size());
        return true;
      });
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(out, "x\n");
}

}  // namespace
}  // namespace berth::node

namespace berth::node {
namespace {

absl::Status ReadInto(const LogReadOptions& options, std::string* out) {
  return ReadTaskLogs(options, [&](v1::LogStream, absl::string_view data) {
    out->append(data.data(), data.size());
    return true;
  });
}

// A task that can write in its directory plants links where the node reads
// its output, to make root read a file it may not (say /etc/shadow): no
// link is followed, at a file, a rotated file, or a log directory.
TEST(LogReaderTest, FollowsNoLinkThatATaskPlanted) {
  ShortTempDir temp;
  const std::string secret = temp.Join("secret");
  Append(secret, "SECRET\n");
  const std::string logs = temp.Join("logs");
  ASSERT_EQ(mkdir(logs.c_str(), 0755), 0);
  Append(logs + "/stdout.log", "mine\n");
  ASSERT_EQ(symlink(secret.c_str(), (logs + "/stdout.log.1").c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), (logs + "/stderr.log").c_str()), 0);
  LogReadOptions options;
  options.log_dir = logs;
  std::string read;
  const absl::Status status = ReadInto(options, &read);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(read.find("SECRET"), std::string::npos) << read;

  // The log directory of an earlier run (or the current one) is a link to
  // a directory holding the secret as stdout.log.
  const std::string elsewhere = temp.Join("elsewhere");
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0755), 0);
  Append(elsewhere + "/stdout.log", "SECRET\n");
  const std::string linked = temp.Join("linked");
  ASSERT_EQ(symlink(elsewhere.c_str(), linked.c_str()), 0);
  for (bool earlier : {true, false}) {
    LogReadOptions via_link;
    via_link.log_dir = earlier ? temp.Join("missing") : linked;
    if (earlier) via_link.earlier_log_dirs = {linked};
    via_link.streams = {v1::LOG_STREAM_STDOUT};
    std::string got;
    EXPECT_FALSE(ReadInto(via_link, &got).ok()) << earlier;
    EXPECT_EQ(got.find("SECRET"), std::string::npos) << got;
  }
}

// A FIFO planted as a log file neither blocks the reader nor is read.
TEST(LogReaderTest, AFifoIsNotRead) {
  ShortTempDir temp;
  ASSERT_EQ(mkfifo(temp.Join("stdout.log").c_str(), 0644), 0);
  LogReadOptions options;
  options.log_dir = temp.path();
  std::string read;
  EXPECT_FALSE(ReadInto(options, &read).ok());
  EXPECT_EQ(read, "");
}

}  // namespace
}  // namespace berth::node
