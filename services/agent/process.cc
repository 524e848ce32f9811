#include "services/agent/process.h"

#include <poll.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "services/agent/io_reactor.h"

namespace berth::agent {
namespace {

// Output read from a pipe after the process has exited, by a background
// process that kept it open, is waited for this long before the stream is
// taken as ended.
constexpr absl::Duration kDrainGrace = absl::Milliseconds(250);

google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t nanos = absl::ToUnixNanos(t);
  ts.set_seconds(nanos / 1000000000);
  ts.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return ts;
}

}  // namespace

std::string ProcessName(const std::string& container_id,
                        const std::string& process_id) {
  return absl::StrCat("process \"", process_id, "\" of container \"",
                      container_id, "\"");
}

Process::~Process() {
  if (io_thread.joinable()) io_thread.join();
}

void Process::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd.get(), &one, sizeof(one));
}

void Process::KickStream() {
  if (reactor != nullptr) reactor->MaybeWrite(*this);
}

void Process::ReapAndRecord() {
  absl::MutexLock lock(&mu);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, __WALL) < 0 && errno == EINTR) {
  }
  exited = true;
  exit_seen = absl::Now();
  exit.Clear();
  if (WIFEXITED(wait_status)) exit.set_exit_code(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) exit.set_signal(WTERMSIG(wait_status));
  *exit.mutable_exited_at() = ToTimestamp(absl::Now());
  VLOG(1) << name() << " (pid " << pid << ") exited: code " << exit.exit_code()
          << ", signal " << exit.signal();
  Wake();
  KickStream();
}

void Process::IoLoop() {
  absl::Time last_output = absl::InfinitePast();
  bool out_idle = false, err_idle = false;
  while (true) {
    struct pollfd fds[4];
    int n = 0;
    int out_index = -1, err_index = -1, in_index = -1;
    size_t out_room = 0, err_room = 0;
    int read_out = -1, read_err = -1;
    bool draining = false;
    absl::Time exit_time;
    {
      absl::MutexLock lock(&mu);
      if (stopping) break;
      if (exited && out.closed() && err.closed()) break;
      // Stdin: write what is pending; close once asked and written.
      if (in_fd.valid() && !stdin_closed && !stdin_pending.empty()) {
        const ssize_t w =
            write(in_fd.get(), stdin_pending.data(), stdin_pending.size());
        if (w > 0) {
          stdin_pending.erase(0, static_cast<size_t>(w));
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          stdin_pending.clear();  // the process closed its stdin
          stdin_closed = true;
        }
        if (stdin_pending.empty() && reactor != nullptr) {
          reactor->ResumeReading();
        }
      }
      if (in_fd.valid() && !stdin_closed && stdin_pending.empty() &&
          stdin_close_requested) {
        stdin_closed = true;
        if (terminal) {
          // A terminal has no half-close: end of file is the EOF character.
          struct termios attributes;
          char eof = 4;
          if (tcgetattr(in_fd.get(), &attributes) == 0) {
            eof = attributes.c_cc[VEOF];
          }
          (void)!write(in_fd.get(), &eof, 1);
        } else {
          in_fd.reset();  // the process's end of file
        }
      }
      fds[n] = {wake_fd.get(), POLLIN, 0};
      ++n;
      if (!out.closed() && out.room() > 0) {
        out_room = out.room();
        read_out = out_fd.get();
        out_index = n;
        fds[n++] = {out_fd.get(), POLLIN, 0};
      }
      if (!err.closed() && err.room() > 0) {
        err_room = err.room();
        read_err = err_fd.get();
        err_index = n;
        fds[n++] = {err_fd.get(), POLLIN, 0};
      }
      if (in_fd.valid() && !stdin_closed && !stdin_pending.empty()) {
        in_index = n;
        fds[n++] = {in_fd.get(), POLLOUT, 0};
      }
      draining = exited;
      exit_time = exit_seen;
    }
    if (poll(fds, n, draining ? 50 : -1) < 0 && errno != EINTR) {
      PLOG(ERROR) << name() << ": poll";
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!read(wake_fd.get(), &count, sizeof(count));
    }
    // Reads outside the lock; only this thread appends, so room only grows.
    const auto pump = [&](int index, int fd, size_t room, bool is_out) {
      if (index < 0 || fds[index].revents == 0) return;
      std::string data;
      data.resize(std::min(room, kMaxOutputFrameBytes));
      const ssize_t r = read(fd, data.data(), data.size());
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
      absl::MutexLock lock(&mu);
      OutputWindow& window = is_out ? out : err;
      if (r > 0) {
        data.resize(static_cast<size_t>(r));
        window.Append(std::move(data));
        last_output = absl::Now();
      } else {
        // End of file; EIO from a terminal whose other side is closed.
        window.Close();
      }
      KickStream();
    };
    pump(out_index, read_out, out_room, /*is_out=*/true);
    pump(err_index, read_err, err_room, /*is_out=*/false);
    (void)in_index;  // stdin is written at the top of the loop
    out_idle = out_index >= 0 && fds[out_index].revents == 0;
    err_idle = err_index >= 0 && fds[err_index].revents == 0;
    if (draining && (out_idle || err_idle) &&
        absl::Now() - std::max(exit_time, last_output) > kDrainGrace) {
      // The process has exited and its pipe is empty: whoever still holds
      // it open is not the process, so what it wrote has all been read.
      absl::MutexLock lock(&mu);
      if (out_idle) out.Close();
      if (err_idle) err.Close();
      KickStream();
    }
  }
  absl::MutexLock lock(&mu);
  in_fd.reset();
  out_fd.reset();
  err_fd.reset();
  stdin_closed = true;
  stdin_pending.clear();
  if (reactor != nullptr) reactor->ResumeReading();
  KickStream();
}

}  // namespace berth::agent
