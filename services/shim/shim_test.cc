// Tests of berth-shim: the library's pieces directly, and the real binary as
// a subprocess (pipes for its stdio) against a fake berth-proxy served in
// this process on a Unix socket in a short temporary directory.

#include "services/shim/shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "berth/proxy/v1/proxy.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/driver/common/attach_hub.h"
#include "services/shim/shim_process.h"

namespace berth {
namespace shim {
namespace {

namespace pb = ::berth::proxy::v1;
using ::berth::shim::testing::Memory;
using ::berth::shim::testing::ShimProcess;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;
using ServerStream =
    grpc::ServerReaderWriter<pb::ConnectResponse, pb::ConnectRequest>;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

// ---------------------------------------------------------------------------
// The library.

std::string Pattern(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(random());
  return data;
}

TEST(OutputSinkTest, WritesByOffsetDroppingOverlap) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  OutputSink sink(fds[1], "stdout");
  ASSERT_TRUE(sink.Write(0, "hello ").ok());
  ASSERT_TRUE(sink.Write(3, "lo world").ok());  // "lo " was written
  ASSERT_TRUE(sink.Write(0, "hel").ok());       // all old
  EXPECT_EQ(sink.written(), 11u);
  close(fds[1]);
  char buffer[64];
  const ssize_t n = read(fds[0], buffer, sizeof(buffer));
  close(fds[0]);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "hello world");
}

TEST(OutputSinkTest, GapIsAnError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  OutputSink sink(fds[1], "stderr");
  ASSERT_TRUE(sink.Write(0, "abc").ok());
  const absl::Status gap = sink.Write(5, "x");
  EXPECT_EQ(gap.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(gap.message(), HasSubstr("stderr chunk at offset 5"));
  EXPECT_EQ(sink.written(), 3u);
  close(fds[0]);
  close(fds[1]);
}

TEST(OutputSinkTest, ClosedReaderIsDiscardedNotFatal) {
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  OutputSink sink(fds[1], "stdout");
  EXPECT_TRUE(sink.Write(0, "lost").ok());
  EXPECT_TRUE(sink.broken());
  EXPECT_TRUE(sink.Write(4, "more").ok());
  EXPECT_EQ(sink.written(), 8u);
  close(fds[1]);
}

TEST(OutputSinkTest, WritesToRotatedFilesByOffset) {
  ShortTempDir dir;
  OutputSink sink(-1, "stdout",
                  std::make_unique<plugin::RotatingLog>(dir.path(), "stdout",
                                                        /*max_bytes=*/4,
                                                        /*max_rotated=*/1));
  ASSERT_TRUE(sink.Write(0, "abcdef").ok());
  ASSERT_TRUE(sink.Write(3, "defghij").ok());  // "def" was written
  EXPECT_EQ(sink.written(), 10u);
  EXPECT_FALSE(sink.broken());
  // 4-byte files, one rotated kept: "abcd" was dropped.
  EXPECT_EQ(ReadFileOrEmpty(dir.Join("stdout.log.1")), "efgh");
  EXPECT_EQ(ReadFileOrEmpty(dir.Join("stdout.log")), "ij");
}

TEST(ExitCodeForTest, CodeOr128PlusSignal) {
  berth::agent::v1::ProcessExit exit;
  exit.set_exit_code(3);
  EXPECT_EQ(ExitCodeFor(exit), 3);
  exit.set_exit_code(0);
  exit.set_signal(SIGKILL);
  EXPECT_EQ(ExitCodeFor(exit), 137);
}

TEST(ForwardedSignalsTest, ForwardsTheUsualOnes) {
  const std::vector<int>& signals = ForwardedSignals();
  for (int wanted : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2}) {
    EXPECT_THAT(signals, ::testing::Contains(wanted)) << strsignal(wanted);
  }
  for (int never : {SIGKILL, SIGSTOP, SIGCHLD, SIGPIPE, SIGSEGV, SIGWINCH}) {
    EXPECT_THAT(signals, Not(::testing::Contains(never))) << strsignal(never);
  }
}

TEST(ReadTokenFromFdTest, ReadsToEofTrimsAndCloses) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "tok-123\n", 8), 8);
  close(fds[1]);
  absl::StatusOr<std::string> token = ReadTokenFromFd(fds[0]);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "tok-123");
  EXPECT_EQ(fcntl(fds[0], F_GETFD), -1);  // closed
}

TEST(ReadTokenFromFdTest, EmptyOrBadDescriptorNamesIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  absl::StatusOr<std::string> empty = ReadTokenFromFd(fds[0]);
  EXPECT_THAT(empty.status().message(), HasSubstr("empty token"));
  absl::StatusOr<std::string> bad = ReadTokenFromFd(987);
  EXPECT_THAT(bad.status().message(), HasSubstr("descriptor 987"));
}

TEST(TakeTokenFromEnvironmentTest, TakesAndUnsets) {
  setenv(kTokenEnvVar, "secret-value", 1);
  absl::StatusOr<std::string> token = TakeTokenFromEnvironment();
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret-value");
  EXPECT_EQ(getenv(kTokenEnvVar), nullptr);
  EXPECT_EQ(TakeTokenFromEnvironment().status().code(),
            absl::StatusCode::kNotFound);
}

// ---------------------------------------------------------------------------
// The fake proxy.

// What a shim sent on one Connect stream after its hello.
struct Upstream {
  std::string stdin_data;
  bool stdin_closed = false;
  std::vector<int> signals;
  std::vector<std::pair<uint32_t, uint32_t>> resizes;  // rows, columns
  uint64_t acked_stdout = 0;
  uint64_t acked_stderr = 0;
  int acks = 0;
};

class FakeProxy final : public pb::ProxyService::Service {
 public:
  using Handler = std::function<grpc::Status(
      grpc::ServerContext*, ServerStream*, const pb::ShimHello&)>;

  explicit FakeProxy(Handler handler) : handler_(std::move(handler)) {}

  grpc::Status Connect(grpc::ServerContext* context,
                       ServerStream* stream) override {
    pb::ConnectRequest first;
    if (!stream->Read(&first) || !first.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no hello");
    }
    {
      absl::MutexLock lock(&mu_);
      hellos_.push_back(first.hello());
    }
    return handler_(context, stream, first.hello());
  }

  std::vector<pb::ShimHello> hellos() const {
    absl::MutexLock lock(&mu_);
    return hellos_;
  }
  bool WaitForHellos(size_t n) const {
    return WaitFor([&] { return hellos().size() >= n; });
  }

 private:
  const Handler handler_;
  mutable absl::Mutex mu_;
  std::vector<pb::ShimHello> hellos_ ABSL_GUARDED_BY(mu_);
};

// Reads requests into `up` until `until` holds (true) or the stream ends.
bool ReadUntil(ServerStream* stream, Upstream* up,
               const std::function<bool(const Upstream&)>& until) {
  pb::ConnectRequest request;
  while (!until(*up)) {
    if (!stream->Read(&request)) return false;
    switch (request.frame_case()) {
      case pb::ConnectRequest::kStdin:
        up->stdin_data += request.stdin();
        break;
      case pb::ConnectRequest::kStdinClose:
        up->stdin_closed = true;
        break;
      case pb::ConnectRequest::kSignal:
        up->signals.push_back(request.signal());
        break;
      case pb::ConnectRequest::kResize:
        up->resizes.emplace_back(request.resize().rows(),
                                 request.resize().columns());
        break;
      case pb::ConnectRequest::kAck:
        up->acked_stdout = request.ack().stdout_offset();
        up->acked_stderr = request.ack().stderr_offset();
        ++up->acks;
        break;
      default:
        break;
    }
  }
  return true;
}

void SendConnected(ServerStream* stream) {
  pb::ConnectResponse response;
  response.mutable_connected()->set_process_id("p1");
  stream->Write(response);
}

bool SendChunk(ServerStream* stream, bool out, const std::string& data,
               uint64_t offset, size_t size) {
  pb::ConnectResponse response;
  pb::OutputChunk* chunk =
      out ? response.mutable_stdout() : response.mutable_stderr();
  chunk->set_offset(offset);
  chunk->set_data(data.substr(offset, size));
  return stream->Write(response);
}

// Sends data[from, to) of stdout and of stderr, interleaved, in chunks of
// varying sizes.
void SendOutput(ServerStream* stream, const std::string& out, size_t out_from,
                size_t out_to, const std::string& err, size_t err_from,
                size_t err_to) {
  std::mt19937 random(7);
  while (out_from < out_to || err_from < err_to) {
    if (out_from < out_to) {
      const size_t n =
          std::min<size_t>(out_to - out_from, 1 + random() % (64 * 1024));
      ASSERT_TRUE(SendChunk(stream, true, out, out_from, n));
      out_from += n;
    }
    if (err_from < err_to && random() % 4 == 0) {
      const size_t n =
          std::min<size_t>(err_to - err_from, 1 + random() % (16 * 1024));
      ASSERT_TRUE(SendChunk(stream, false, err, err_from, n));
      err_from += n;
    }
  }
}

void SendExit(ServerStream* stream, int code, int signal) {
  pb::ConnectResponse response;
  response.mutable_exit()->set_exit_code(code);
  response.mutable_exit()->set_signal(signal);
  stream->Write(response);
}

void WaitCancelled(grpc::ServerContext* context) {
  while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
}

// Stands at `socket` for a proxy that went away: waits (at most 30 s) until
// the shim tries to connect to it again, which it does only once it has seen
// its stream cut (and taken it out of use), then drops that connection, so
// that the shim goes on trying. False if no connection came.
bool AwaitReconnectAttempt(const std::string& socket_path) {
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return false;
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(),
               sizeof(address.sun_path) - 1);
  unlink(socket_path.c_str());
  bool came = false;
  if (bind(listener, reinterpret_cast<const sockaddr*>(&address),
           sizeof(address)) == 0 &&
      listen(listener, 1) == 0) {
    pollfd pfd = {listener, POLLIN, 0};
    came = poll(&pfd, 1, /*timeout_ms=*/30000) == 1;
    if (came) close(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  }
  close(listener);
  unlink(socket_path.c_str());
  return came;
}

class Server {
 public:
  Server(const std::string& socket, FakeProxy::Handler handler)
      : proxy_(std::move(handler)) {
    UnixGrpcServer::Options options;
    options.socket_path = socket;
    options.services = {&proxy_};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    CHECK(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  ~Server() { Stop(); }
  // Stops at once: calls in flight are cancelled (like a proxy that dies).
  void Stop() { server_->Shutdown(absl::ZeroDuration()); }
  FakeProxy& proxy() { return proxy_; }

 private:
  FakeProxy proxy_;
  std::unique_ptr<UnixGrpcServer> server_;
};

// ---------------------------------------------------------------------------
std::vector<std::string> ShimArgs(const std::string& socket,
                                  absl::string_view timeout = "5s") {
  return {absl::StrCat("--proxy_socket=", socket),
          absl::StrCat("--reconnect_timeout=", timeout)};
}

std::vector<std::string> TokenEnv() {
  return {absl::StrCat(kTokenEnvVar, "=", kToken)};
}

class ShimBinaryTest : public ::testing::Test {
 protected:
  ShortTempDir dir_;
  const std::string socket_ = dir_.Join("proxy.sock");
};

// Several MB of stdout and stderr reach fds 1 and 2 exactly, every byte is
// acknowledged, and the shim exits with the process's code.
TEST_F(ShimBinaryTest, OutputExactAckedAndExitCode) {
  const std::string out = Pattern(4 << 20, 1);
  const std::string err = Pattern(1 << 20, 2);
  Upstream up;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello& hello) {
    EXPECT_EQ(hello.token(), kToken);
    EXPECT_FALSE(hello.resume());
    SendConnected(stream);
    SendOutput(stream, out, 0, out.size(), err, 0, err.size());
    ReadUntil(stream, &up, [&](const Upstream& u) {
      return u.acked_stdout == out.size() && u.acked_stderr == err.size();
    });
    SendExit(stream, 3, 0);
    return grpc::Status::OK;
  });
  ShimProcess shim({ShimArgs(socket_), TokenEnv()});
  EXPECT_EQ(shim.Wait(), 3) << shim.err().substr(0, 2000);
  EXPECT_EQ(shim.out().size(), out.size());
  EXPECT_TRUE(shim.out() == out) << "stdout differs";
  EXPECT_EQ(shim.err().size(), err.size());
  EXPECT_TRUE(shim.err() == err) << "stderr differs";
  EXPECT_EQ(up.acked_stdout, out.size());
  EXPECT_EQ(up.acked_stderr, err.size());
  EXPECT_GT(up.acks, 0);
}

// Stdin goes up in frames of at most 32 KiB, then stdin_close at EOF.
TEST_F(ShimBinaryTest, StdinAndEofReachTheProxy) {
  const std::string input = Pattern(300 * 1024 + 17, 3);
  Upstream up;
  size_t largest_frame = 0;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    // Echoes stdin as stdout, like cat.
    uint64_t echoed = 0;
    while (!up.stdin_closed) {
      const size_t before = up.stdin_data.size();
      if (!ReadUntil(stream, &up, [&](const Upstream& u) {
            return u.stdin_closed || u.stdin_data.size() > before;
          })) {
        break;
      }
      largest_frame = std::max(largest_frame, up.stdin_data.size() - before);
      if (up.stdin_data.size() > echoed) {
        SendChunk(stream, true, up.stdin_data, echoed,
                  up.stdin_data.size() - echoed);
        echoed = up.stdin_data.size();
      }
    }
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  ShimProcess shim({ShimArgs(socket_), TokenEnv()});
  shim.WriteStdin(input);
  shim.CloseStdin();
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  EXPECT_TRUE(up.stdin_closed);
  EXPECT_TRUE(up.stdin_data == input) << "stdin differs";
  EXPECT_TRUE(shim.out() == input) << "echoed stdout differs";
  EXPECT_LE(largest_frame, kStdinFrameSize);
}

// Signals the shim gets are forwarded; a process killed by a signal makes
// the shim exit 128 + N.
TEST_F(ShimBinaryTest, SignalsForwardedAndExitBySignal) {
  Upstream up;
  absl::Notification got_usr1;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    ReadUntil(stream, &up,
              [](const Upstream& u) { return !u.signals.empty(); });
    got_usr1.Notify();
    ReadUntil(stream, &up, [](const Upstream& u) {
      return std::find(u.signals.begin(), u.signals.end(), SIGTERM) !=
             u.signals.end();
    });
    SendExit(stream, 0, SIGTERM);
    return grpc::Status::OK;
  });
  ShimProcess shim({ShimArgs(socket_), TokenEnv()});
  ASSERT_TRUE(server.proxy().WaitForHellos(1));
  kill(shim.pid(), SIGUSR1);
  // The second signal only once the first has reached the proxy.
  ASSERT_TRUE(got_usr1.WaitForNotificationWithTimeout(absl::Seconds(30)));
  kill(shim.pid(), SIGTERM);
  EXPECT_EQ(shim.Wait(), 128 + SIGTERM) << shim.err();
  EXPECT_EQ(up.signals, (std::vector<int>{SIGUSR1, SIGTERM}));
}

// With a terminal on stdin: its size goes up once connected, and again on
// SIGWINCH.
TEST_F(ShimBinaryTest, TerminalSizeAndSigwinchBecomeResizes) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(slave, 0);
  winsize size = {};
  size.ws_row = 24;
  size.ws_col = 80;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &size), 0);

  Upstream up;
  absl::Notification first_resize;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    ReadUntil(stream, &up,
              [](const Upstream& u) { return !u.resizes.empty(); });
    first_resize.Notify();
    ReadUntil(stream, &up,
              [](const Upstream& u) { return u.resizes.size() >= 2; });
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  ShimProcess::Options options{ShimArgs(socket_), TokenEnv()};
  options.stdin_fd = slave;
  ShimProcess shim(options);
  close(slave);
  ASSERT_TRUE(first_resize.WaitForNotificationWithTimeout(absl::Seconds(30)));
  size.ws_row = 50;
  size.ws_col = 132;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &size), 0);
  kill(shim.pid(), SIGWINCH);
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  close(master);
  ASSERT_EQ(up.resizes.size(), 2u);
  EXPECT_EQ(up.resizes[0], std::make_pair(24u, 80u));
  EXPECT_EQ(up.resizes[1], std::make_pair(50u, 132u));
}

// The token from the environment: sent in the hello, gone from the shim's
// environment as /proc shows it, never in its argv. Also measures the shim's
// memory while connected.
// ---------------------------------------------------------------------------
// The attach socket (--attach_fd): a caller of the protocol in
// services/driver/common/attach_hub.h.

using ::berth::driver_common::AttachFrameReader;
using ::berth::driver_common::AttachFrameType;

// A listening Unix socket at `path` (close-on-exec).
int ListenAt(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK_GE(fd, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  CHECK_EQ(
      bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
      0);
  CHECK_EQ(listen(fd, 8), 0);
  return fd;
}

class AttachCaller {
 public:
  explicit AttachCaller(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&address),
                         sizeof(address)) == 0;
  }
  ~AttachCaller() { close(fd_); }
  bool connected() const { return connected_; }

  void Send(const std::string& frames) {
    ASSERT_EQ(write(fd_, frames.data(), frames.size()),
              static_cast<ssize_t>(frames.size()));
  }
  void Stdin(const std::string& data) {
    std::string frames;
    driver_common::AppendAttachFrames(&frames, AttachFrameType::kStdin,
                                      data.data(), data.size());
    Send(frames);
  }
  void CloseStdin() {
    std::string frames;
    driver_common::AppendAttachFrames(&frames, AttachFrameType::kStdinClose,
                                      nullptr, 0);
    Send(frames);
  }

  // Reads frames until `stdout` holds `wanted` (true), the exit frame and
  // the end of the connection (wanted empty), or 30 s pass.
  bool ReadUntil(const std::string& wanted) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (!wanted.empty() && absl::StrContains(stdout, wanted)) return true;
      pollfd pfd = {fd_, POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(fd_, buffer, sizeof(buffer));
      if (n <= 0) return wanted.empty() && exited;
      reader_.Feed(buffer, static_cast<size_t>(n));
      AttachFrameType type;
      std::string payload;
      bool malformed = false;
      while (reader_.Next(&type, &payload, &malformed)) {
        if (type == AttachFrameType::kStdout) stdout += payload;
        if (type == AttachFrameType::kExit) {
          exited = driver_common::DecodeAttachExit(payload, &exit_code,
                                                   &exit_signal);
        }
      }
      if (malformed) return false;
    }
    return false;
  }

  std::string stdout;
  bool exited = false;
  int32_t exit_code = -1;
  int32_t exit_signal = -1;

 private:
  int fd_ = -1;
  bool connected_ = false;
  AttachFrameReader reader_;
};

// The first caller gets what the process wrote before it, later ones only
// what comes after; a caller's stdin goes up (the shim's own stdin unused),
// terminal sizes become resizes (the latest of those that come together), a
// stdin close becomes stdin_close, and the
// exit frame ends every caller's connection before the shim exits.
TEST_F(ShimBinaryTest, AttachedCallersGetOutputAndSendStdinAndSizes) {
  const std::string attach_path = dir_.Join("attach.sock");
  Upstream up;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    const std::string before = "before\n";
    SendChunk(stream, true, before, 0, before.size());
    // Both callers' hellos carry a size; the second's, the latest, shows
    // that the hub has taken it (sizes that come together go as one).
    ReadUntil(stream, &up, [](const Upstream& u) {
      return !u.resizes.empty() &&
             u.resizes.back() == std::make_pair(40u, 120u);
    });
    ReadUntil(stream, &up,
              [](const Upstream& u) { return u.stdin_data == "hello\n"; });
    const std::string all = before + up.stdin_data;
    SendChunk(stream, true, all, before.size(), up.stdin_data.size());
    ReadUntil(stream, &up, [](const Upstream& u) {
      return u.stdin_closed && u.resizes.back() == std::make_pair(50u, 132u);
    });
    SendExit(stream, 5, 0);
    return grpc::Status::OK;
  });
  const int listener = ListenAt(attach_path);
  ShimProcess::Options options{ShimArgs(socket_), TokenEnv()};
  options.args.push_back("--attach_fd=3");
  options.args.push_back("--attach_stdin");
  options.attach_fd = listener;
  ShimProcess shim(options);
  close(listener);
  ShimProcess* process = &shim;
  // The output was written before anyone attached.
  ASSERT_TRUE(WaitFor([&] { return process->out() == "before\n"; }))
      << shim.err();

  AttachCaller first(attach_path);
  ASSERT_TRUE(first.connected());
  first.Send(driver_common::EncodeAttachHello(true, 24, 80));
  ASSERT_TRUE(first.ReadUntil("before\n"));
  AttachCaller second(attach_path);
  ASSERT_TRUE(second.connected());
  second.Send(driver_common::EncodeAttachHello(false, 40, 120));
  first.Stdin("hello\n");
  ASSERT_TRUE(first.ReadUntil("before\nhello\n")) << first.stdout << shim.err();
  ASSERT_TRUE(second.ReadUntil("hello\n")) << second.stdout;
  first.Send(driver_common::EncodeAttachResize(50, 132));
  first.CloseStdin();
  EXPECT_TRUE(first.ReadUntil(""));
  EXPECT_TRUE(second.ReadUntil(""));
  EXPECT_EQ(shim.Wait(), 5) << shim.err();
  EXPECT_EQ(first.stdout, "before\nhello\n");
  EXPECT_EQ(second.stdout, "hello\n");  // nothing from before it came
  EXPECT_EQ(first.exit_code, 5);
  EXPECT_EQ(second.exit_code, 5);
  EXPECT_EQ(first.exit_signal, 0);
  EXPECT_EQ(shim.out(), "before\nhello\n");  // the log has all of it
  EXPECT_EQ(up.stdin_data, "hello\n");
  EXPECT_TRUE(up.stdin_closed);
  // 24x80 may have gone as one with 40x120, the latest then.
  ASSERT_GE(up.resizes.size(), 2u);
  EXPECT_LE(up.resizes.size(), 3u);
  EXPECT_EQ(up.resizes[up.resizes.size() - 2], std::make_pair(40u, 120u));
  EXPECT_EQ(up.resizes.back(), std::make_pair(50u, 132u));
}

// Without --attach_stdin the shim's own stdin is the process's; callers
// still get the output.
TEST_F(ShimBinaryTest, AttachWithoutStdinKeepsTheShimsStdin) {
  const std::string attach_path = dir_.Join("attach.sock");
  Upstream up;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    // The caller's hello (its size) shows it was accepted.
    ReadUntil(stream, &up, [](const Upstream& u) {
      return u.stdin_closed && !u.resizes.empty();
    });
    const std::string echo = up.stdin_data;
    SendChunk(stream, true, echo, 0, echo.size());
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  const int listener = ListenAt(attach_path);
  ShimProcess::Options options{ShimArgs(socket_), TokenEnv()};
  options.args.push_back("--attach_fd=3");
  options.attach_fd = listener;
  ShimProcess shim(options);
  close(listener);
  AttachCaller caller(attach_path);
  ASSERT_TRUE(caller.connected());
  caller.Send(driver_common::EncodeAttachHello(false, 24, 80));
  caller.Stdin("ignored\n");  // taken from no caller
  shim.WriteStdin("own\n");
  shim.CloseStdin();
  EXPECT_TRUE(caller.ReadUntil(""));
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  EXPECT_EQ(up.stdin_data, "own\n");
  EXPECT_EQ(caller.stdout, "own\n");
  EXPECT_EQ(up.resizes.size(), 1u);
}

TEST_F(ShimBinaryTest, TokenFromEnvironmentLeavesNoTrace) {
  absl::Notification measured;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello& hello) {
    EXPECT_EQ(hello.token(), kToken);
    SendConnected(stream);
    // Some output, so the measured shim has done real work.
    const std::string out = Pattern(1 << 20, 4);
    SendOutput(stream, out, 0, out.size(), "", 0, 0);
    measured.WaitForNotification();
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  // Lets the handler end if an assertion below returns early.
  absl::Cleanup release = [&] {
    if (!measured.HasBeenNotified()) measured.Notify();
  };
  ShimProcess shim({ShimArgs(socket_), TokenEnv()});
  // All of the output has come out of the shim.
  ASSERT_TRUE(WaitFor([&] { return shim.out().size() == 1u << 20; }));
  const std::string environ_text = shim.Proc("environ");
  const std::string cmdline = shim.Proc("cmdline");
  EXPECT_THAT(environ_text, HasSubstr("PATH="));  // it could be read
  EXPECT_THAT(environ_text, Not(HasSubstr(kToken)));
  EXPECT_THAT(environ_text, Not(HasSubstr(kTokenEnvVar)));
  EXPECT_THAT(cmdline, Not(HasSubstr(kToken)));
  const Memory memory = shim.MeasureMemory();
  std::cout << "berth-shim while connected: Rss " << memory.rss_kb
            << " kB, Pss " << memory.pss_kb << " kB, private "
            << memory.private_kb << " kB (anonymous " << memory.anonymous_kb
            << " kB), " << memory.threads << " threads" << std::endl;
  ::testing::Test::RecordProperty("shim_rss_kb", memory.rss_kb);
  ::testing::Test::RecordProperty("shim_pss_kb", memory.pss_kb);
  ::testing::Test::RecordProperty("shim_private_kb", memory.private_kb);
  ::testing::Test::RecordProperty("shim_threads", memory.threads);
  EXPECT_GT(memory.pss_kb, 0);
  measured.Notify();
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  EXPECT_EQ(shim.out().size(), 1u << 20);
}

// Memory of shims side by side, as on a node: gRPC's and the other shared
// libraries' pages are shared between them, so each one's PSS approaches its
// private memory. Measures; asserts only that it could.
TEST_F(ShimBinaryTest, MemoryOfEightShimsConnected) {
  constexpr int kShims = 8;
  constexpr size_t kOutput = 256 << 10;
  absl::Notification measured;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello&) {
    SendConnected(stream);
    const std::string out = Pattern(kOutput, 8);
    SendOutput(stream, out, 0, out.size(), "", 0, 0);
    measured.WaitForNotification();
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  // Lets the handlers end if an assertion below returns early.
  absl::Cleanup release = [&] {
    if (!measured.HasBeenNotified()) measured.Notify();
  };
  std::vector<std::unique_ptr<ShimProcess>> shims;
  for (int i = 0; i < kShims; ++i) {
    shims.push_back(std::make_unique<ShimProcess>(
        ShimProcess::Options{ShimArgs(socket_), TokenEnv()}));
  }
  // All of the output has come out of each shim.
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& shim : shims) {
      if (shim->out().size() != kOutput) return false;
    }
    return true;
  }));
  int64_t pss = 0, rss = 0, private_kb = 0;
  int threads = 0;
  for (const auto& shim : shims) {
    const Memory memory = shim->MeasureMemory();
    threads = std::max(threads, memory.threads);
    pss += memory.pss_kb;
    rss += memory.rss_kb;
    private_kb += memory.private_kb;
  }
  std::cout << "berth-shim, " << kShims << " connected at once, each: Rss "
            << rss / kShims << " kB, Pss " << pss / kShims << " kB, private "
            << private_kb / kShims << " kB; " << threads << " threads"
            << std::endl;
  ::testing::Test::RecordProperty("shim_pss_kb_of_8", pss / kShims);
  EXPECT_GT(pss, 0);
  measured.Notify();
  for (const auto& shim : shims) EXPECT_EQ(shim->Wait(), 0) << shim->err();
}

// The token from an inherited descriptor, which the shim closes.
TEST_F(ShimBinaryTest, TokenFromDescriptorIsReadAndClosed) {
  absl::Notification checked;
  Server server(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello& hello) {
    EXPECT_EQ(hello.token(), "token-from-fd");
    SendConnected(stream);
    checked.WaitForNotification();
    SendExit(stream, 7, 0);
    return grpc::Status::OK;
  });
  ShimProcess::Options options;
  options.args = ShimArgs(socket_);
  options.args.push_back("--token_fd=5");
  options.token_on_fd = "token-from-fd\n";
  ShimProcess shim(options);
  ASSERT_TRUE(server.proxy().WaitForHellos(1));
  EXPECT_FALSE(shim.HoldsTokenPipe());
  EXPECT_THAT(shim.Proc("cmdline"), Not(HasSubstr("token-from-fd")));
  checked.Notify();
  EXPECT_EQ(shim.Wait(), 7) << shim.err();
}

TEST_F(ShimBinaryTest, NoTokenFlagAndNoTokenIsAnError) {
  {
    ShimProcess shim({{absl::StrCat("--proxy_socket=", socket_),
                       absl::StrCat("--token=", kToken)},
                      {}});
    EXPECT_NE(shim.Wait(), 0);
    EXPECT_THAT(shim.err(), HasSubstr("token"));
  }
  {
    ShimProcess shim({ShimArgs(socket_), {}});
    EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
    EXPECT_THAT(shim.err(), HasSubstr("no token"));
  }
  {
    std::vector<std::string> args = ShimArgs(socket_);
    args.push_back("--token_fd=0");
    ShimProcess shim({args, TokenEnv()});
    EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
    EXPECT_THAT(shim.err(), HasSubstr("--token_fd=0 is one of the process's"));
  }
}

TEST_F(ShimBinaryTest, VersionAndHelp) {
  {
    ShimProcess shim({{"--version"}, {}});
    EXPECT_EQ(shim.Wait(), 0);
    EXPECT_EQ(shim.out(), "berth-shim 0.1.0\n");
  }
  {
    ShimProcess shim({{"--help"}, {}});
    EXPECT_EQ(shim.Wait(), 0);
    EXPECT_THAT(shim.out(), HasSubstr("--token_fd"));
    EXPECT_THAT(shim.out(), HasSubstr("--proxy_socket"));
    EXPECT_THAT(shim.out(), HasSubstr("--reconnect_timeout"));
    EXPECT_THAT(shim.out(), Not(HasSubstr("--token ")));
    EXPECT_THAT(shim.out(), Not(HasSubstr("--token (")));
  }
}

// The proxy dies mid-stream and comes back: the shim resumes with the
// offsets it wrote, and writes nothing twice even though the new proxy
// repeats some output.
TEST_F(ShimBinaryTest, ProxyRestartResumesWithoutDuplicates) {
  const std::string out = Pattern(3 << 20, 5);
  const std::string err = Pattern(256 << 10, 6);
  const size_t out_cut = (3 << 20) / 2 + 123;
  const size_t err_cut = (256 << 10) / 3 + 7;
  absl::Notification first_done;
  auto first = std::make_unique<Server>(
      socket_, [&](grpc::ServerContext* context, ServerStream* stream,
                   const pb::ShimHello&) {
        SendConnected(stream);
        SendOutput(stream, out, 0, out_cut, err, 0, err_cut);
        Upstream up;
        ReadUntil(stream, &up, [&](const Upstream& u) {
          return u.acked_stdout == out_cut && u.acked_stderr == err_cut;
        });
        first_done.Notify();
        WaitCancelled(context);
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
      });
  ShimProcess shim({ShimArgs(socket_, "20s"), TokenEnv()});
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  first->Stop();  // like a crash: the stream is cut
  first.reset();
  // The new proxy comes only once the shim has found the old one gone.
  ASSERT_TRUE(AwaitReconnectAttempt(socket_)) << shim.err();

  Server second(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello& hello) {
    SendConnected(stream);
    // Resumes a little before what the shim says it wrote.
    const size_t out_from = hello.stdout_offset() - 1000;
    const size_t err_from = hello.stderr_offset() - 10;
    SendOutput(stream, out, out_from, out.size(), err, err_from, err.size());
    Upstream up;
    ReadUntil(stream, &up, [&](const Upstream& u) {
      return u.acked_stdout == out.size() && u.acked_stderr == err.size();
    });
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  const std::vector<pb::ShimHello> hellos = second.proxy().hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_TRUE(hellos[0].resume());
  EXPECT_EQ(hellos[0].token(), kToken);
  EXPECT_EQ(hellos[0].stdout_offset(), out_cut);
  EXPECT_EQ(hellos[0].stderr_offset(), err_cut);
  EXPECT_EQ(shim.out().size(), out.size());
  EXPECT_TRUE(shim.out() == out) << "stdout differs";
  EXPECT_EQ(shim.err().size(), err.size());
  EXPECT_TRUE(shim.err() == err) << "stderr differs";
}

// Stdin that comes while the proxy is away waits for the next one, and a
// signal too; stdin_close follows them.
TEST_F(ShimBinaryTest, StdinAndSignalsWaitForTheRestartedProxy) {
  absl::Notification got_first;
  auto first = std::make_unique<Server>(
      socket_, [&](grpc::ServerContext* context, ServerStream* stream,
                   const pb::ShimHello&) {
        SendConnected(stream);
        Upstream up;
        ReadUntil(stream, &up,
                  [](const Upstream& u) { return u.stdin_data == "before\n"; });
        got_first.Notify();
        WaitCancelled(context);
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
      });
  ShimProcess shim({ShimArgs(socket_, "20s"), TokenEnv()});
  shim.WriteStdin("before\n");
  ASSERT_TRUE(got_first.WaitForNotificationWithTimeout(absl::Seconds(30)));
  first->Stop();
  first.reset();
  // The shim sees the stream cut first: stdin carries no offsets, so bytes
  // written into a stream as it breaks can be lost (see README).
  ASSERT_TRUE(AwaitReconnectAttempt(socket_)) << shim.err();
  shim.WriteStdin("while away\n");
  // Taken by the shim while no proxy is there.
  ASSERT_TRUE(WaitFor([&] { return shim.StdinTaken(); }));
  kill(shim.pid(), SIGHUP);
  shim.CloseStdin();

  Upstream up;
  Server second(socket_, [&](grpc::ServerContext*, ServerStream* stream,
                             const pb::ShimHello& hello) {
    EXPECT_TRUE(hello.resume());
    SendConnected(stream);
    ReadUntil(stream, &up, [](const Upstream& u) {
      return u.stdin_closed && !u.signals.empty();
    });
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  EXPECT_EQ(shim.Wait(), 0) << shim.err();
  EXPECT_EQ(up.stdin_data, "while away\n");
  EXPECT_TRUE(up.stdin_closed);
  EXPECT_EQ(up.signals, std::vector<int>{SIGHUP});
}

// The proxy dies and never comes back: exit 255 after the reconnect timeout,
// with a message naming the socket.
TEST_F(ShimBinaryTest, ProxyGoneForGoodExits255) {
  absl::Notification connected;
  auto server = std::make_unique<Server>(
      socket_, [&](grpc::ServerContext* context, ServerStream* stream,
                   const pb::ShimHello&) {
        SendConnected(stream);
        SendChunk(stream, true, "partial", 0, 7);
        Upstream up;
        ReadUntil(stream, &up, [](const Upstream& u) { return u.acks > 0; });
        connected.Notify();
        WaitCancelled(context);
        return grpc::Status::OK;
      });
  ShimProcess shim({ShimArgs(socket_, "1500ms"), TokenEnv()});
  ASSERT_TRUE(connected.WaitForNotificationWithTimeout(absl::Seconds(30)));
  server->Stop();
  server.reset();
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_EQ(shim.out(), "partial");
  EXPECT_THAT(shim.err(), HasSubstr(socket_));
  EXPECT_THAT(shim.err(), HasSubstr("could not reach it again within 1.5s"));
}

// No proxy at all: exit 255 after the timeout, naming the socket.
TEST_F(ShimBinaryTest, NoProxyExits255NamingTheSocket) {
  ShimProcess shim({ShimArgs(socket_, "500ms"), TokenEnv()});
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_THAT(shim.err(), HasSubstr(absl::StrCat("cannot reach the proxy at ",
                                                 socket_, " within 500ms")));
  EXPECT_THAT(shim.err(), HasSubstr("no such socket"));
}

TEST_F(ShimBinaryTest, PermissionDeniedExits255AtOnce) {
  Server server(
      socket_, [](grpc::ServerContext*, ServerStream*, const pb::ShimHello&) {
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            "token 01234567 is unknown or already claimed");
      });
  ShimProcess shim({ShimArgs(socket_, "30s"), TokenEnv()});
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_THAT(shim.err(), HasSubstr("refused the token"));
  EXPECT_THAT(shim.err(), HasSubstr("already claimed"));
  EXPECT_EQ(server.proxy().hellos().size(), 1u);  // no retry
}

TEST_F(ShimBinaryTest, AgentGoneExits255WithTheProxysMessage) {
  Server server(socket_, [](grpc::ServerContext*, ServerStream* stream,
                            const pb::ShimHello&) {
    SendConnected(stream);
    SendChunk(stream, false, "last words\n", 0, 11);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "agent of sandbox sb-1 is gone");
  });
  ShimProcess shim({ShimArgs(socket_, "30s"), TokenEnv()});
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_THAT(shim.err(), HasSubstr("last words\n"));
  EXPECT_THAT(shim.err(), HasSubstr("agent of sandbox sb-1 is gone"));
  EXPECT_EQ(server.proxy().hellos().size(), 1u);  // no retry
}

// A proxy that sends a chunk beyond what was written has lost output: the
// shim says so and exits 255 rather than write a stream with a hole.
TEST_F(ShimBinaryTest, GapInOutputExits255) {
  Server server(socket_, [](grpc::ServerContext*, ServerStream* stream,
                            const pb::ShimHello&) {
    SendConnected(stream);
    SendChunk(stream, true, "abcdef", 0, 3);
    SendChunk(stream, true, "abcdef", 4, 2);
    SendExit(stream, 0, 0);
    return grpc::Status::OK;
  });
  ShimProcess shim({ShimArgs(socket_), TokenEnv()});
  EXPECT_EQ(shim.Wait(), kShimFailureExitCode);
  EXPECT_EQ(shim.out(), "abc");
  EXPECT_THAT(shim.err(), HasSubstr("stdout chunk at offset 4 leaves a gap"));
}

}  // namespace
}  // namespace shim
}  // namespace berth
