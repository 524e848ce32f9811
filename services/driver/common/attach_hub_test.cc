#include "services/driver/common/attach_hub.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace berth::driver_common {
namespace {

// A listening socket in the abstract namespace (no file, no path length).
int Listen(std::string* name) {
  static int counter = 0;
  *name = std::string(1, '\0') + "berth-attach-hub-test-" +
          std::to_string(getpid()) + "-" + std::to_string(++counter);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, name->data(), name->size());
  const socklen_t length = static_cast<socklen_t>(
      offsetof(struct sockaddr_un, sun_path) + name->size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(fd, 16) != 0) {
    ADD_FAILURE() << "listening: " << std::strerror(errno);
  }
  return fd;
}

int Connect(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, name.data(), name.size());
  const socklen_t length = static_cast<socklen_t>(
      offsetof(struct sockaddr_un, sun_path) + name.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& data) {
  ASSERT_EQ(send(fd, data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
}

int64_t NowMillis() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// One round of the holder's poll loop.
void Pump(AttachHub& hub, int timeout_ms = 10) {
  std::vector<struct pollfd> fds;
  const size_t n = hub.AddPollFds(&fds);
  if (n == 0) return;
  poll(fds.data(), fds.size(), timeout_ms);
  hub.HandlePoll(fds.data(), n);
}

// Pumps the hub until `done` (false after 20 s: a bound, not a timing check).
bool PumpUntil(AttachHub& hub, const std::function<bool()>& done) {
  const int64_t deadline = NowMillis() + 20000;
  while (!done()) {
    if (NowMillis() > deadline) return false;
    Pump(hub);
  }
  return true;
}

// What a caller has received, decoded.
struct Received {
  AttachFrameReader reader;
  std::string stdout_bytes;
  std::string stderr_bytes;
  // "O:..." / "E:..." per frame, in order.
  std::vector<std::string> frames;
  bool exited = false;
  int32_t exit_code = -1;
  int32_t signal = -1;
  bool eof = false;

  // Reads what is there without blocking.
  void Read(int fd) {
    char buffer[65536];
    while (true) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n == 0) {
        eof = true;
        return;
      }
      if (n < 0) {
        if (errno != EAGAIN) eof = true;
        return;
      }
      reader.Feed(buffer, static_cast<size_t>(n));
      AttachFrameType type;
      std::string payload;
      bool malformed = false;
      while (reader.Next(&type, &payload, &malformed)) {
        if (type == AttachFrameType::kStdout) {
          stdout_bytes += payload;
          frames.push_back("O:" + payload);
        } else if (type == AttachFrameType::kStderr) {
          stderr_bytes += payload;
          frames.push_back("E:" + payload);
        } else if (type == AttachFrameType::kExit) {
          exited = DecodeAttachExit(payload, &exit_code, &signal);
        }
      }
      EXPECT_FALSE(malformed);
    }
  }
};

TEST(AttachFrames, RoundTrip) {
  std::string frames;
  AppendAttachFrames(&frames, AttachFrameType::kStdout, "hi", 2);
  frames += EncodeAttachHello(true, 24, 80);
  frames += EncodeAttachResize(50, 132);
  frames += EncodeAttachExit(3, 0);
  const std::string big(kAttachMaxPayloadBytes + 10, 'x');
  AppendAttachFrames(&frames, AttachFrameType::kStdin, big.data(), big.size());

  AttachFrameReader reader;
  // Byte by byte: frames are whole however the bytes arrive.
  std::vector<std::pair<AttachFrameType, std::string>> got;
  for (char c : frames) {
    reader.Feed(&c, 1);
    AttachFrameType type;
    std::string payload;
    bool malformed = false;
    while (reader.Next(&type, &payload, &malformed)) {
      got.emplace_back(type, payload);
    }
    ASSERT_FALSE(malformed);
  }
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].first, AttachFrameType::kStdout);
  EXPECT_EQ(got[0].second, "hi");
  bool send_stdin = false;
  uint32_t rows = 0, columns = 0;
  ASSERT_TRUE(DecodeAttachHello(got[1].second, &send_stdin, &rows, &columns));
  EXPECT_TRUE(send_stdin);
  EXPECT_EQ(rows, 24u);
  EXPECT_EQ(columns, 80u);
  ASSERT_TRUE(DecodeAttachSize(got[2].second, &rows, &columns));
  EXPECT_EQ(rows, 50u);
  EXPECT_EQ(columns, 132u);
  int32_t code = 0, signal = 0;
  ASSERT_TRUE(DecodeAttachExit(got[3].second, &code, &signal));
  EXPECT_EQ(code, 3);
  EXPECT_EQ(got[4].second.size(), kAttachMaxPayloadBytes);
  EXPECT_EQ(got[5].second.size(), 10u);
}

TEST(AttachFrames, RefusesWhatIsNotFrames) {
  AttachFrameReader reader;
  const std::string junk = "GET / HTTP/1.1\r\n";
  reader.Feed(junk.data(), junk.size());
  AttachFrameType type;
  std::string payload;
  bool malformed = false;
  EXPECT_FALSE(reader.Next(&type, &payload, &malformed));
  EXPECT_TRUE(malformed);

  AttachFrameReader too_long;
  const char header[5] = {'O', 0x7f, 0, 0, 0};
  too_long.Feed(header, 5);
  EXPECT_FALSE(too_long.Next(&type, &payload, &malformed));
  EXPECT_TRUE(malformed);
}

TEST(AttachHub, FirstCallerGetsEarlierOutputInOrderLaterOnesOnlyNew) {
  std::string name;
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  options.replay_bytes = 16;
  AttachHub hub(options);
  hub.Output(AttachStream::kStdout, "0123456789", 10);
  hub.Output(AttachStream::kStderr, "abcdef", 6);
  hub.Output(AttachStream::kStdout, "XYZ", 3);
  // Only the latest 16 bytes are kept.
  EXPECT_EQ(hub.replay_size(), 16u);

  const int first = Connect(name);
  ASSERT_GE(first, 0);
  Received one;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    one.Read(first);
    return one.stdout_bytes.size() + one.stderr_bytes.size() >= 16;
  }));
  EXPECT_EQ(one.frames,
            (std::vector<std::string>{"O:3456789", "E:abcdef", "O:XYZ"}));
  EXPECT_EQ(hub.replay_size(), 0u);

  const int second = Connect(name);
  ASSERT_GE(second, 0);
  ASSERT_TRUE(PumpUntil(hub, [&] { return hub.client_count() == 2; }));
  hub.Output(AttachStream::kStdout, "new", 3);
  Received two;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    one.Read(first);
    two.Read(second);
    return two.stdout_bytes.size() >= 3 && one.stdout_bytes.size() >= 13;
  }));
  EXPECT_EQ(two.stdout_bytes, "new");
  EXPECT_EQ(two.stderr_bytes, "");
  EXPECT_EQ(one.stdout_bytes, "3456789XYZnew");

  hub.Exit(7, 0);
  ASSERT_TRUE(PumpUntil(hub, [&] {
    one.Read(first);
    two.Read(second);
    return one.eof && two.eof;
  }));
  EXPECT_TRUE(one.exited);
  EXPECT_EQ(one.exit_code, 7);
  EXPECT_TRUE(two.exited);
  // No caller is taken after the exit.
  const int late = Connect(name);
  EXPECT_LT(late, 0);
  if (late >= 0) close(late);
  close(first);
  close(second);
}

TEST(AttachHub, SlowCallerIsDroppedWithoutHoldingOutputBack) {
  std::string name;
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  AttachHub hub(options);
  const int slow = Connect(name);
  const int reader = Connect(name);
  ASSERT_GE(slow, 0);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(PumpUntil(hub, [&] { return hub.client_count() == 2; }));
  const std::string chunk(32 * 1024, 'z');
  const size_t total = 3 * kAttachMaxBacklogBytes;
  Received got;
  // Output never blocks: the slow caller, which reads nothing, is dropped
  // once it is kAttachMaxBacklogBytes behind; the reading one gets it all.
  for (size_t written = 0; written < total; written += chunk.size()) {
    hub.Output(AttachStream::kStdout, chunk.data(), chunk.size());
    Pump(hub, 0);
    got.Read(reader);
  }
  ASSERT_TRUE(PumpUntil(hub, [&] {
    got.Read(reader);
    return got.stdout_bytes.size() >= total;
  }));
  EXPECT_EQ(got.stdout_bytes.size(), total);
  EXPECT_EQ(hub.client_count(), 1u);
  // The slow one reads what its socket held, then end of file.
  Received dropped;
  while (!dropped.eof) dropped.Read(slow);
  EXPECT_LT(dropped.stdout_bytes.size(), total);
  close(slow);
  close(reader);
}

TEST(AttachHub, StdinReachesThePipeAndItsCloseIsEndOfFile) {
  std::string name;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  options.stdin_fd = pipe_fds[1];
  AttachHub hub(options);
  const int client = Connect(name);
  ASSERT_GE(client, 0);
  std::string frames = EncodeAttachHello(true, 0, 0);
  AppendAttachFrames(&frames, AttachFrameType::kStdin, "hello\n", 6);
  AppendAttachFrames(&frames, AttachFrameType::kStdinClose, nullptr, 0);
  SendAll(client, frames);
  ASSERT_TRUE(PumpUntil(hub, [&] { return !hub.stdin_open(); }));
  std::string read_back;
  char buffer[64];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) {
    read_back.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(n, 0);  // end of file: the hub closed its end
  EXPECT_EQ(read_back, "hello\n");
  close(pipe_fds[0]);
  close(client);
}

// Found by attach_frames_fuzzer: frames read together with a bad hello
// reached the program's stdin after the hub had dropped the caller.
TEST(AttachHub, NothingAfterABadHelloReachesStdin) {
  std::string name;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  options.stdin_fd = pipe_fds[1];
  AttachHub hub(options);
  const int client = Connect(name);
  ASSERT_GE(client, 0);
  // A hello of 13 bytes (not 9), then stdin, in one write.
  std::string frames;
  AppendAttachFrames(&frames, AttachFrameType::kHello, "0123456789abc", 13);
  AppendAttachFrames(&frames, AttachFrameType::kStdin, "echo hi\n", 8);
  SendAll(client, frames);
  ASSERT_TRUE(PumpUntil(hub, [&] { return hub.client_count() == 1; }));
  ASSERT_TRUE(PumpUntil(hub, [&] { return hub.client_count() == 0; }));
  Pump(hub, 0);
  char buffer[64];
  EXPECT_EQ(read(pipe_fds[0], buffer, sizeof(buffer)), -1)
      << "stdin of a dropped caller reached the program";
  EXPECT_TRUE(hub.stdin_open());
  close(pipe_fds[0]);
  close(client);
}

TEST(AttachHub, StdinWaitsForRoomInThePipe) {
  std::string name;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  fcntl(pipe_fds[1], F_SETPIPE_SZ, 4096);
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  options.stdin_fd = pipe_fds[1];
  AttachHub hub(options);
  const int client = Connect(name);
  ASSERT_GE(client, 0);
  SendAll(client, EncodeAttachHello(true, 0, 0));
  const std::string data(256 * 1024, 's');
  std::string frames;
  AppendAttachFrames(&frames, AttachFrameType::kStdin, data.data(),
                     data.size());
  AppendAttachFrames(&frames, AttachFrameType::kStdinClose, nullptr, 0);
  // The caller's send and the program's read go on together; nothing is
  // lost while the pipe is full.
  fcntl(client, F_SETFL, O_NONBLOCK);
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  size_t sent = 0;
  std::string read_back;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    if (sent < frames.size()) {
      const ssize_t n = send(client, frames.data() + sent, frames.size() - sent,
                             MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    char buffer[1024];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) read_back.append(buffer, static_cast<size_t>(n));
    return n == 0;  // end of file
  }));
  EXPECT_EQ(read_back, data);
  close(pipe_fds[0]);
  close(client);
}

TEST(AttachHub, ResizeAndStdinOnARealTerminal) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0) << std::strerror(errno);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(slave, 0) << std::strerror(errno);
  std::string name;
  AttachHub::Options options;
  options.listen_fd = Listen(&name);
  options.terminal_fd = master;
  options.terminal_stdin = true;
  AttachHub hub(options);
  const int client = Connect(name);
  ASSERT_GE(client, 0);
  SendAll(client, EncodeAttachHello(true, 24, 80));
  struct winsize size;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    return ioctl(slave, TIOCGWINSZ, &size) == 0 && size.ws_row == 24 &&
           size.ws_col == 80;
  }));
  SendAll(client, EncodeAttachResize(40, 100));
  std::string frames;
  AppendAttachFrames(&frames, AttachFrameType::kStdin, "abc\n", 4);
  SendAll(client, frames);
  ASSERT_TRUE(PumpUntil(hub, [&] {
    return ioctl(slave, TIOCGWINSZ, &size) == 0 && size.ws_row == 40 &&
           size.ws_col == 100;
  }));
  fcntl(slave, F_SETFL, O_NONBLOCK);
  std::string line;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    char buffer[64];
    const ssize_t n = read(slave, buffer, sizeof(buffer));
    if (n > 0) line.append(buffer, static_cast<size_t>(n));
    return line.find('\n') != std::string::npos;
  }));
  EXPECT_EQ(line, "abc\n");
  // Closing a terminal's stdin sends its EOF character: a read of the
  // terminal (canonical mode) returns 0 bytes.
  frames.clear();
  AppendAttachFrames(&frames, AttachFrameType::kStdinClose, nullptr, 0);
  SendAll(client, frames);
  bool eof = false;
  ASSERT_TRUE(PumpUntil(hub, [&] {
    char buffer[64];
    eof = read(slave, buffer, sizeof(buffer)) == 0;
    return eof;
  }));
  EXPECT_TRUE(hub.stdin_open());  // the terminal itself stays open
  close(client);
  close(slave);
  close(master);
}

TEST(AttachHub, KeepsNothingWhenReplayIsOff) {
  AttachHub::Options options;
  options.replay_bytes = 0;
  AttachHub hub(options);
  hub.Output(AttachStream::kStdout, "abc", 3);
  EXPECT_EQ(hub.replay_size(), 0u);
  std::vector<struct pollfd> fds;
  EXPECT_EQ(hub.AddPollFds(&fds), 0u);
}

}  // namespace
}  // namespace berth::driver_common
