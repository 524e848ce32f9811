// unix_relay_bench: the floor for streaming through an exec'd `cat` over a
// Unix socket on this machine, without gRPC or any framing:
//
//   unix_relay_bench [--bytes=1073741824] [--repetitions=3] [--warmup=1]
//                    [--tmp_dir=/tmp]
//
// It starts a copy of itself as the server (`--serve=SOCKET`, in a temporary
// directory), which accepts one connection at a time and for each spawns
// `cat` with pipes as its stdin and stdout, copies socket -> cat's stdin and
// cat's stdout -> socket (64 KiB reads and writes, one thread each way), and
// half-closes the socket when cat's stdout ends. The client (this process)
// connects, sends --bytes while it reads them back on another thread,
// half-closes, and reads to the end; every byte back is counted and checked
// against what was sent. One repetition is timed from the connect to the end
// of the data back, so it includes spawning `cat`, as an ExecTaskStreaming
// call does.
//
// Prints "sample relay_stream VALUE MB/s" per repetition and a "median" line
// (tools/bench/figures.h); MB/s is of stdin, 10^6 bytes per second (as many
// bytes come back). Any error: a line on stderr naming it, exit code 1.

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "plugins/benchmarks/bench_util.h"
#include "tools/bench/figures.h"

ABSL_FLAG(int64_t, bytes, int64_t{1} << 30,
          "Bytes sent through `cat` per repetition.");
ABSL_FLAG(int, repetitions, 3, "Timed repetitions.");
ABSL_FLAG(int, warmup, 1,
          "Untimed repetitions of at most 16 MiB before the timed ones.");
ABSL_FLAG(std::string, tmp_dir, "/tmp",
          "Where to make the temporary directory of the socket.");
ABSL_FLAG(std::string, serve, "",
          "Internal: serve on this socket path until stdin ends.");

extern char** environ;

namespace berth::bench {
namespace {

using ::berth::plugin::benchmarks::Child;
using ::berth::plugin::benchmarks::TempDir;
using Clock = std::chrono::steady_clock;

constexpr size_t kBufferBytes = 64 * 1024;

// Writes all of [data, data + size); false on an error (errno set).
ssize_t ReadSome(int fd, char* buffer, size_t size) {
  while (true) {
    const ssize_t n = read(fd, buffer, size);
    if (n >= 0 || errno != EINTR) return n;
  }
}

sockaddr_un Address(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

// The server side of one connection: `cat` between the socket's two
// directions.
absl::Status Relay(int connection) {
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd in_read(in[0]);
  base::UniqueFd in_write(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  base::UniqueFd out_read(out[0]);
  base::UniqueFd out_write(out[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  char cat[] = "cat";
  char* argv[] = {cat, nullptr};
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, "cat", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  // cat's ends: reading its stdout ends when cat does.
  in_read.reset();
  out_write.reset();
  if (err != 0) return absl::ErrnoToStatus(err, "cannot run cat");
  // Socket -> cat's stdin; cat's stdin closes at the end of the socket's
  // input (the client's half-close).
  std::thread up([connection, cat_stdin = std::move(in_write)]() mutable {
    std::vector<char> buffer(kBufferBytes);
    while (true) {
      const ssize_t n = ReadSome(connection, buffer.data(), buffer.size());
      if (n <= 0) {
        PLOG_IF(ERROR, n < 0) << "relay: reading the socket";
        break;
      }
      if (absl::Status written = base::WriteAll(
              cat_stdin.get(),
              absl::string_view(buffer.data(), static_cast<size_t>(n)),
              "cat's stdin");
          !written.ok()) {
        LOG(ERROR) << "relay: " << written.message();
        break;
      }
    }
    cat_stdin.reset();  // cat's end of file
  });
  // cat's stdout -> socket, then a half-close.
  absl::Status status;
  std::vector<char> buffer(kBufferBytes);
  while (true) {
    const ssize_t n = ReadSome(out_read.get(), buffer.data(), buffer.size());
    if (n < 0) {
      status = absl::ErrnoToStatus(errno, "reading from cat");
      break;
    }
    if (n == 0) break;
    if (absl::Status written = base::WriteAll(
            connection,
            absl::string_view(buffer.data(), static_cast<size_t>(n)),
            "the socket");
        !written.ok()) {
      status = written;
      break;
    }
  }
  out_read.reset();  // cat, if still writing, ends (EPIPE)
  shutdown(connection, SHUT_WR);
  up.join();
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (status.ok() &&
      (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0)) {
    status = absl::InternalError(
        absl::StrCat("cat ended with wait status ", wait_status));
  }
  return status;
}

// The server: one connection at a time, until stdin ends.
int Serve(const std::string& path) {
  const base::UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  PCHECK(listener.valid()) << "socket";
  const sockaddr_un address = Address(path);
  PCHECK(bind(listener.get(), reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) == 0)
      << "bind " << path;
  PCHECK(listen(listener.get(), 4) == 0) << "listen";
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) {
    pollfd fds[2] = {{listener.get(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(FATAL) << "poll";
    }
    if (fds[1].revents != 0) break;  // stdin ended: the client is done
    if (fds[0].revents == 0) continue;
    const base::UniqueFd connection(
        accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection.valid()) {
      PLOG(ERROR) << "accept";
      continue;
    }
    const absl::Status relayed = Relay(connection.get());
    LOG_IF(ERROR, !relayed.ok()) << "relay: " << relayed;
  }
  unlink(path.c_str());
  return 0;
}

// One repetition: connect, send `bytes` while reading them back. MB/s.
absl::StatusOr<double> RelayOnce(const std::string& path, uint64_t bytes,
                                 const StreamPattern& pattern) {
  const std::string what =
      absl::StrCat("relaying ", FormatBytes(bytes), " through cat via ", path);
  const Clock::time_point start = Clock::now();
  const base::UniqueFd socket_fd(
      socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket_fd.valid()) return absl::ErrnoToStatus(errno, "socket");
  const int fd = socket_fd.get();
  const sockaddr_un address = Address(path);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, ": connect"));
  }
  uint64_t sent = 0;
  absl::Status send_status;
  std::thread sender([&] {
    std::vector<char> buffer(kBufferBytes);
    while (sent < bytes) {
      const size_t size =
          static_cast<size_t>(std::min<uint64_t>(buffer.size(), bytes - sent));
      pattern.Fill(sent, buffer.data(), size);
      send_status = base::WriteAll(fd, absl::string_view(buffer.data(), size),
                                   "the relay's socket");
      if (!send_status.ok()) return;
      sent += size;
    }
    shutdown(fd, SHUT_WR);
  });
  uint64_t received = 0;
  bool corrupt = false;
  int read_errno = 0;
  std::vector<char> buffer(kBufferBytes);
  while (true) {
    const ssize_t n = ReadSome(fd, buffer.data(), buffer.size());
    if (n < 0) {
      read_errno = errno;
      shutdown(fd, SHUT_RDWR);  // unblocks the sender
      break;
    }
    if (n == 0) break;
    if (!corrupt &&
        !pattern.Matches(received, absl::string_view(buffer.data(), n))) {
      corrupt = true;
    }
    received += static_cast<uint64_t>(n);
  }
  sender.join();
  const Clock::time_point end = Clock::now();
  if (read_errno != 0) {
    return absl::InternalError(
        absl::StrCat(what, ": reading after ", received,
                     " bytes: ", std::strerror(read_errno)));
  }
  if (!send_status.ok()) {
    return absl::InternalError(absl::StrCat(what, ": sending after ", sent,
                                            " bytes: ", send_status.message()));
  }
  if (received != bytes || corrupt) {
    return absl::DataLossError(
        absl::StrCat(what, ": received ", received, " bytes, expected ", bytes,
                     corrupt ? "; they differ from what was sent" : ""));
  }
  const double seconds = std::chrono::duration<double>(end - start).count();
  return static_cast<double>(bytes) / seconds / 1e6;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "unix_relay_bench: FAILED: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Run() {
  const int64_t bytes = absl::GetFlag(FLAGS_bytes);
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  if (bytes < 1 || repetitions < 1 || warmup < 0) {
    std::fprintf(stderr,
                 "unix_relay_bench: --bytes and --repetitions must be >= 1, "
                 "--warmup >= 0\n");
    return 2;
  }
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return Fail(absl::InternalError(
        absl::StrCat("reading /proc/self/exe: ", error.message())));
  }
  TempDir dir(absl::GetFlag(FLAGS_tmp_dir));
  const std::string path = dir.Join("relay.sock");
  absl::StatusOr<std::unique_ptr<Child>> server =
      Child::Start({self.string(), absl::StrCat("--serve=", path)});
  if (!server.ok()) return Fail(server.status());
  absl::StatusOr<std::string> ready = (*server)->ReadLine(absl::Seconds(10));
  if (!ready.ok() || *ready != "ready") {
    return Fail(absl::InternalError(absl::StrCat(
        "the relay server (pid ", (*server)->pid(), ") did not say ready: ",
        ready.ok() ? *ready : ready.status().ToString())));
  }
  const StreamPattern pattern;
  for (int i = 0; i < warmup; ++i) {
    absl::StatusOr<double> rate =
        RelayOnce(path, std::min<uint64_t>(bytes, uint64_t{16} << 20), pattern);
    if (!rate.ok()) return Fail(rate.status());
  }
  Figure figure("relay_stream", "MB/s");
  for (int i = 0; i < repetitions; ++i) {
    absl::StatusOr<double> rate =
        RelayOnce(path, static_cast<uint64_t>(bytes), pattern);
    if (!rate.ok()) return Fail(rate.status());
    figure.Add(*rate);
  }
  server->reset();  // closes its stdin: it exits and is reaped
  std::printf("%s\n", figure.MedianLine().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Relays bytes through `cat` over a Unix socket, the floor for "
      "ExecTaskStreaming.\nusage: unix_relay_bench [flags]");
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const std::string serve = absl::GetFlag(FLAGS_serve);
  if (!serve.empty()) return berth::bench::Serve(serve);
  return berth::bench::Run();
}
