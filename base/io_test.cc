#include "base/io.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::base {
namespace {

using ::testing::HasSubstr;

TEST(IoTest, WriteAllThenReadAllThroughAPipe) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  // More than a pipe holds: the writer waits for the reader.
  const std::string data(1 << 20, 'x');
  std::thread writer([&] {
    EXPECT_TRUE(WriteAll(write_end.get(), data).ok());
    write_end.reset();
  });
  absl::StatusOr<std::string> read = ReadAll(read_end.get());
  writer.join();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, data);
}

TEST(IoTest, NonBlockingDescriptorsAreWaitedOn) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  ASSERT_TRUE(SetNonBlocking(write_end.get()).ok());
  ASSERT_TRUE(SetNonBlocking(read_end.get()).ok());
  EXPECT_NE(fcntl(write_end.get(), F_GETFL) & O_NONBLOCK, 0);
  const std::string data(1 << 20, 'y');
  std::thread writer([&] {
    EXPECT_TRUE(WriteAll(write_end.get(), data).ok());
    write_end.reset();
  });
  absl::StatusOr<std::string> read = ReadAll(read_end.get());
  writer.join();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), data.size());
}

TEST(IoTest, ErrorsNameWhat) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  UniqueFd write_end(fds[1]);
  signal(SIGPIPE, SIG_IGN);
  absl::Status written = WriteAll(write_end.get(), "x", "the test pipe");
  EXPECT_FALSE(written.ok());
  EXPECT_THAT(written.message(), HasSubstr("writing the test pipe"));
  EXPECT_EQ(ReadFile("/nonexistent/file").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(ReadFile("/nonexistent/file").status().message(),
              HasSubstr("/nonexistent/file"));
  EXPECT_THAT(SetNonBlocking(-1).message(),
              HasSubstr("setting O_NONBLOCK on descriptor -1"));
}

TEST(IoTest, ReadAllStopsAtItsBound) {
  absl::StatusOr<std::string> read = ReadFile("/proc/self/stat", 10);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(read.status().message(), HasSubstr("/proc/self/stat"));
}

}  // namespace
}  // namespace berth::base
