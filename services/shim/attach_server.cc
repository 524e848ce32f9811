#include "services/shim/attach_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/driver/common/attach_hub.h"

namespace berth::shim {

using ::berth::driver_common::AttachHub;
using ::berth::driver_common::AttachStream;

struct AttachServer::Hub {
  explicit Hub(const AttachHub::Options& options) : hub(options) {}
  AttachHub hub;
};

namespace {

void Signal(int event_fd) {
  const uint64_t one = 1;
  (void)!write(event_fd, &one, sizeof(one));
}

void Drain(int event_fd) {
  uint64_t value;
  (void)!read(event_fd, &value, sizeof(value));
}

}  // namespace

absl::StatusOr<std::unique_ptr<AttachServer>> AttachServer::Start(
    base::UniqueFd listen_fd, bool take_stdin) {
  std::unique_ptr<AttachServer> server(new AttachServer());
  server->wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  server->resize_event_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!server->wake_.valid() || !server->resize_event_.valid()) {
    return absl::ErrnoToStatus(errno, "eventfd for the attach socket");
  }
  AttachHub::Options options;
  options.listen_fd = listen_fd.release();
  // A task that takes no stdin (neither stdin_open nor tty) is seldom
  // attached to: its shim keeps less for a first caller, as
  // berth-task-init does.
  if (!take_stdin) options.replay_bytes = kQuietReplayBytes;
  if (take_stdin) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      const int error = errno;
      close(options.listen_fd);
      return absl::ErrnoToStatus(error, "pipe2 for the attached stdin");
    }
    server->stdin_read_.reset(fds[0]);
    options.stdin_fd = fds[1];  // the hub's: closed on a caller's close
  }
  AttachServer* raw = server.get();
  options.on_resize = [raw](uint32_t rows, uint32_t columns) {
    raw->OnResize(rows, columns);
  };
  server->hub_ = std::make_unique<Hub>(options);
  server->thread_ = std::thread([raw] { raw->Loop(); });
  return server;
}

AttachServer::~AttachServer() {
  if (thread_.joinable()) Exit(0, 0, absl::ZeroDuration());
}

bool AttachServer::TakeResize(uint32_t* rows, uint32_t* columns) {
  Drain(resize_event_.get());
  absl::MutexLock lock(&mu_);
  if (!resized_) return false;
  resized_ = false;
  *rows = rows_;
  *columns = columns_;
  return true;
}

void AttachServer::OnResize(uint32_t rows, uint32_t columns) {
  {
    absl::MutexLock lock(&mu_);
    resized_ = true;
    rows_ = rows;
    columns_ = columns;
  }
  Signal(resize_event_.get());
}

void AttachServer::Output(bool is_stdout, absl::string_view data) {
  if (data.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || exit_.has_value()) return;
    pending_.emplace_back(is_stdout, std::string(data));
  }
  Signal(wake_.get());
}

void AttachServer::Exit(int exit_code, int signal, absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (!exit_.has_value()) exit_ = ExitRequest{exit_code, signal, timeout};
  }
  Signal(wake_.get());
  if (thread_.joinable()) thread_.join();
}

size_t AttachServer::clients() const {
  absl::MutexLock lock(&mu_);
  return clients_;
}

void AttachServer::Loop() {
  AttachHub& hub = hub_->hub;
  std::vector<struct pollfd> fds;
  std::deque<std::pair<bool, std::string>> output;
  while (true) {
    std::optional<ExitRequest> exit;
    {
      absl::MutexLock lock(&mu_);
      output.swap(pending_);
      exit = exit_;
    }
    // Output before the exit: the exit frame comes after all of it.
    for (const auto& [is_stdout, bytes] : output) {
      hub.Output(is_stdout ? AttachStream::kStdout : AttachStream::kStderr,
                 bytes.data(), bytes.size());
    }
    output.clear();
    if (exit.has_value()) {
      hub.Exit(exit->exit_code, exit->signal);
      hub.Flush(static_cast<int>(absl::ToInt64Milliseconds(exit->timeout)));
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      clients_ = hub.client_count();
      return;
    }
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    const size_t count = hub.AddPollFds(&fds);
    {
      absl::MutexLock lock(&mu_);
      clients_ = hub.client_count();
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      LOG(ERROR) << "berth-shim: poll on the attach socket: "
                 << std::strerror(errno);
      for (struct pollfd& fd : fds) fd.revents = 0;
    }
    if (fds[0].revents != 0) Drain(wake_.get());
    hub.HandlePoll(fds.data() + 1, count);
  }
}

}  // namespace berth::shim
