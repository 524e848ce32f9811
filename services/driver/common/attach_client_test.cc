#include "services/driver/common/attach_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/driver/common/attach_hub.h"
#include "services/driver/common/attach_test_util.h"

namespace berth::driver_common {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;

void Pump(AttachHub& hub) {
  std::vector<struct pollfd> fds;
  const size_t n = hub.AddPollFds(&fds);
  poll(fds.data(), fds.size(), 10);
  hub.HandlePoll(fds.data(), n);
}

dv1::AttachSetup AttachSetupFor(bool want_stdin) {
  dv1::AttachSetup setup;
  setup.set_task_id("web-1");
  setup.set_stdin(want_stdin);
  return setup;
}

TEST(AttachClient, RelaysOutputAndStdinUntilTheOutputEnds) {
  ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join(".berth").c_str(), 0700), 0);
  const std::string path = AttachSocketPath(dir.path());
  EXPECT_EQ(path, dir.Join(".berth/attach.sock"));
  absl::StatusOr<base::UniqueFd> listening = ListenAttachSocket(path);
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_EQ(testing::FileMode(path), 0600);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
  AttachHub::Options options;
  options.listen_fd = listening->release();
  options.stdin_fd = pipe_fds[1];
  AttachHub hub(options);
  hub.Output(AttachStream::kStdout, "prompt> ", 8);

  FakeAttachStream stream(AttachSetupFor(true));
  absl::Status relayed = absl::UnknownError("not returned");
  std::thread relay([&] {
    relayed = RelayAttach({"web-1", path, /*stdin_open=*/true}, &stream);
  });
  dv1::AttachTaskRequest request;
  request.set_stdin("ls\n");
  stream.Push(request);
  std::string stdin_read;
  ASSERT_TRUE(WaitFor([&] {
    Pump(hub);
    char buffer[64];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) stdin_read.append(buffer, static_cast<size_t>(n));
    return stdin_read == "ls\n" && stream.Stdout() == "prompt> ";
  }));
  hub.Output(AttachStream::kStdout, "a b c\n", 6);
  hub.Output(AttachStream::kStderr, "oops\n", 5);
  ASSERT_TRUE(WaitFor([&] {
    Pump(hub);
    return stream.responses().size() >= 3;
  }));
  hub.Exit(0, 0);
  hub.Flush(5000);
  relay.join();
  EXPECT_TRUE(relayed.ok()) << relayed;
  const std::vector<dv1::AttachTaskResponse> responses = stream.responses();
  ASSERT_EQ(responses.size(), 3u);  // no exit frame: the node adds it
  EXPECT_EQ(responses[0].stdout(), "prompt> ");
  EXPECT_EQ(responses[1].stdout(), "a b c\n");
  EXPECT_EQ(responses[2].stderr(), "oops\n");
  close(pipe_fds[0]);
}

TEST(AttachClient, StdinOfATaskWithoutStdinOpenIsRefused) {
  FakeAttachStream stream(AttachSetupFor(true));
  const absl::Status status =
      RelayAttach({"web-1", "/nonexistent/attach.sock", false}, &stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "task web-1")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "stdin_open")) << status;
}

TEST(AttachClient, NothingListeningIsFailedPrecondition) {
  ShortTempDir dir;
  FakeAttachStream stream(AttachSetupFor(false));
  const absl::Status status =
      RelayAttach({"web-1", dir.Join("attach.sock"), false}, &stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "task web-1")) << status;
}

TEST(AttachClient, CancelEndsTheRelayAndLeavesTheHubServing) {
  ShortTempDir dir;
  const std::string path = dir.Join("attach.sock");
  absl::StatusOr<base::UniqueFd> listening = ListenAttachSocket(path);
  ASSERT_TRUE(listening.ok()) << listening.status();
  AttachHub::Options options;
  options.listen_fd = listening->release();
  AttachHub hub(options);
  FakeAttachStream stream(AttachSetupFor(false));
  absl::Status relayed;
  std::thread relay([&] {
    relayed = RelayAttach({"web-1", path, false}, &stream);
  });
  ASSERT_TRUE(WaitFor([&] {
    Pump(hub);
    return hub.client_count() == 1;
  }));
  stream.Cancel();
  relay.join();
  EXPECT_EQ(relayed.code(), absl::StatusCode::kCancelled) << relayed;
  ASSERT_TRUE(WaitFor([&] {
    Pump(hub);
    return hub.client_count() == 0;
  }));
  // The output goes on without anyone attached.
  hub.Output(AttachStream::kStdout, "x", 1);
}

TEST(AttachClient, LongSocketPathsWork) {
  ShortTempDir dir;
  std::string deep = dir.path();
  while (deep.size() < 140) {
    deep += "/a-rather-long-directory-name";
    ASSERT_EQ(mkdir(deep.c_str(), 0700), 0);
  }
  const std::string path = absl::StrCat(deep, "/attach.sock");
  absl::StatusOr<base::UniqueFd> listening = ListenAttachSocket(path);
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_TRUE(testing::PathExists(path));
  AttachHub::Options options;
  options.listen_fd = listening->release();
  AttachHub hub(options);
  hub.Output(AttachStream::kStdout, "deep", 4);
  FakeAttachStream stream(AttachSetupFor(false));
  absl::Status relayed;
  std::thread relay([&] {
    relayed = RelayAttach({"web-1", path, false}, &stream);
  });
  ASSERT_TRUE(WaitFor([&] {
    Pump(hub);
    return stream.Stdout() == "deep";
  }));
  hub.Exit(0, 0);
  hub.Flush(5000);
  relay.join();
  EXPECT_TRUE(relayed.ok()) << relayed;
  RemoveAttachSocket(path);
  EXPECT_FALSE(testing::PathExists(path));
}

// The driver is root: a link planted at the socket's place (or .berth
// swapped for one) never has it connect to another socket, nor unlink
// elsewhere.
TEST(AttachClient, LinksAtTheSocketsPlaceAreNotFollowed) {
  ShortTempDir dir;
  ASSERT_EQ(mkdir(dir.Join("task").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.Join("task/.berth").c_str(), 0700), 0);
  ASSERT_EQ(mkdir(dir.Join("elsewhere").c_str(), 0700), 0);
  const std::string other = dir.Join("elsewhere/attach.sock");
  absl::StatusOr<base::UniqueFd> listening = ListenAttachSocket(other);
  ASSERT_TRUE(listening.ok()) << listening.status();
  fcntl(listening->get(), F_SETFL, O_NONBLOCK);
  const std::string path = AttachSocketPath(dir.Join("task"));
  ASSERT_EQ(symlink(other.c_str(), path.c_str()), 0);
  FakeAttachStream stream(AttachSetupFor(false));
  absl::Status relayed = RelayAttach({"web-1", path, false}, &stream);
  EXPECT_EQ(relayed.code(), absl::StatusCode::kFailedPrecondition) << relayed;
  EXPECT_TRUE(absl::StrContains(relayed.message(), "task web-1")) << relayed;
  // .berth itself a link to the other directory.
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(rmdir(dir.Join("task/.berth").c_str()), 0);
  ASSERT_EQ(
      symlink(dir.Join("elsewhere").c_str(), dir.Join("task/.berth").c_str()),
      0);
  relayed = RelayAttach({"web-1", path, false}, &stream);
  EXPECT_EQ(relayed.code(), absl::StatusCode::kFailedPrecondition) << relayed;
  // Nothing connected to the other socket.
  EXPECT_LT(accept(listening->get(), nullptr, nullptr), 0);
  EXPECT_EQ(errno, EAGAIN);
  RemoveAttachSocket(path);
  EXPECT_TRUE(testing::PathExists(other));
}

}  // namespace
}  // namespace berth::driver_common
