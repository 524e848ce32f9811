#include "services/driver/common/attach_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/beneath.h"
#include "services/driver/common/attach_hub.h"

namespace berth::driver_common {
namespace {

namespace dv1 = ::berth::driver::v1;

// `path` as a socket address: itself, or (too long for sun_path) through an
// O_PATH descriptor of its directory, which `*dir` then holds.
absl::StatusOr<std::string> SocketAddressPath(const std::string& path,
                                              base::UniqueFd* dir) {
  struct sockaddr_un address;
  if (path.size() < sizeof(address.sun_path)) return path;
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path ", path, " is too long"));
  }
  dir->reset(open(path.substr(0, slash == 0 ? 1 : slash).c_str(),
                  O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir->valid()) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("opening the directory of ", path));
  }
  std::string short_path =
      absl::StrCat("/proc/self/fd/", dir->get(), path.substr(slash));
  if (short_path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path ", path, " is too long"));
  }
  return short_path;
}

struct sockaddr_un UnixAddress(const std::string& path) {
  struct sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The caller's requests to the holder, until Recv says there are no more
// or the socket is gone.
void ForwardRequests(plugin::AttachTaskStream* stream, int fd,
                     bool send_stdin) {
  dv1::AttachTaskRequest request;
  while (stream->Recv(&request)) {
    std::string frames;
    switch (request.frame_case()) {
      case dv1::AttachTaskRequest::kStdin:
        // Stdin of a caller that did not ask for it is dropped.
        if (!send_stdin || request.stdin().empty()) continue;
        AppendAttachFrames(&frames, AttachFrameType::kStdin,
                           request.stdin().data(), request.stdin().size());
        break;
      case dv1::AttachTaskRequest::kStdinClose:
        if (!send_stdin) continue;
        AppendAttachFrames(&frames, AttachFrameType::kStdinClose, nullptr, 0);
        break;
      case dv1::AttachTaskRequest::kResize:
        frames = EncodeAttachResize(request.resize().rows(),
                                    request.resize().columns());
        break;
      default:
        continue;  // a second setup, or nothing: ignored
    }
    if (!SendAll(fd, frames)) return;
  }
}

// `path` split for OpenBeneath: its last two components below the
// directory holding them (<task_dir>/.berth/attach.sock: the entries of the
// task directory and of .berth are where someone other than the driver may
// write; the task directory's own path is the driver's to trust).
std::pair<std::string, std::string> SplitBeneath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  if (slash == 0) return {"/", path.substr(1)};
  const size_t parent = path.rfind('/', slash - 1);
  if (parent == std::string::npos) return {".", path};
  return {parent == 0 ? "/" : path.substr(0, parent), path.substr(parent + 1)};
}

// The socket file at `path`, opened O_PATH without following a link in its
// last two components: connecting to /proc/self/fd/N then reaches that
// socket and nothing a link planted there points at. FAILED_PRECONDITION
// naming the task when it is missing or not a socket.
absl::StatusOr<base::UniqueFd> OpenSocketFile(const AttachTarget& target) {
  const auto [dir, relative] = SplitBeneath(target.socket_path);
  absl::StatusOr<base::UniqueFd> fd = base::OpenBeneath(dir, relative, O_PATH);
  struct stat st;
  if (fd.ok() && fstat(fd->get(), &st) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("task ", target.task_id, ": ", target.socket_path));
  }
  if (!fd.ok() || !S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", target.task_id,
                     " cannot be attached: it is not running (no socket at ",
                     target.socket_path, fd.ok() ? "" : ": ",
                     fd.ok() ? "" : fd.status().message(), ")"));
  }
  return fd;
}

}  // namespace

std::string AttachSocketPath(const std::string& task_dir) {
  return absl::StrCat(task_dir, "/.berth/", kAttachSocketName);
}

absl::StatusOr<base::UniqueFd> ListenAttachSocket(const std::string& path) {
  base::UniqueFd dir;
  absl::StatusOr<std::string> address_path = SocketAddressPath(path, &dir);
  if (!address_path.ok()) return address_path.status();
  if (unlink(address_path->c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(errno, "making the attach socket");
  }
  const struct sockaddr_un address = UnixAddress(*address_path);
  if (bind(fd.get(), reinterpret_cast<const struct sockaddr*>(&address),
           sizeof(address)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("binding ", path));
  }
  if (chmod(address_path->c_str(), 0600) != 0 || listen(fd.get(), 16) != 0) {
    const int err = errno;
    unlink(address_path->c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("listening on ", path));
  }
  return fd;
}

void RemoveAttachSocket(const std::string& path) {
  // Through its directory opened without following a link (.berth swapped
  // for a link must not have root unlink elsewhere).
  const auto [dir, relative] = SplitBeneath(path);
  const size_t slash = relative.rfind('/');
  if (slash == std::string::npos) {
    const base::UniqueFd dir_fd(
        open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir_fd.valid()) unlinkat(dir_fd.get(), relative.c_str(), 0);
    return;
  }
  absl::StatusOr<base::UniqueFd> parent =
      base::OpenBeneath(dir, relative.substr(0, slash), O_PATH | O_DIRECTORY);
  if (parent.ok())
    unlinkat(parent->get(), relative.substr(slash + 1).c_str(), 0);
}

absl::Status RelayAttach(const AttachTarget& target,
                         plugin::AttachTaskStream* stream) {
  const dv1::AttachSetup& setup = stream->setup();
  if (setup.stdin() && !target.stdin_open) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", target.task_id,
        " was started without stdin_open: its stdin cannot be attached"));
  }
  absl::StatusOr<base::UniqueFd> socket_file = OpenSocketFile(target);
  if (!socket_file.ok()) return socket_file.status();
  const std::string address_path =
      absl::StrCat("/proc/self/fd/", socket_file->get());
  base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("task ", target.task_id, ": making a socket"));
  }
  const struct sockaddr_un address = UnixAddress(address_path);
  int connected;
  do {
    connected = connect(fd.get(), reinterpret_cast<const sockaddr*>(&address),
                        sizeof(address));
  } while (connected != 0 && errno == EINTR);
  if (connected != 0) {
    const int err = errno;
    if (err == ENOENT || err == ECONNREFUSED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", target.task_id,
          " cannot be attached: it is not running (nothing listens at ",
          target.socket_path, ")"));
    }
    return absl::ErrnoToStatus(
        err, absl::StrCat("task ", target.task_id, ": connecting to ",
                          target.socket_path));
  }
  const bool send_stdin = setup.stdin();
  if (!SendAll(fd.get(),
               EncodeAttachHello(send_stdin, setup.terminal_size().rows(),
                                 setup.terminal_size().columns()))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", target.task_id, " cannot be attached: it has just exited"));
  }

  std::thread requests(ForwardRequests, stream, fd.get(), send_stdin);
  bool cancelled = false;
  AttachFrameReader reader;
  char buffer[65536];
  bool done = false;
  bool malformed = false;
  while (!done && !malformed) {
    struct pollfd fds[2] = {{fd.get(), POLLIN, 0},
                            {stream->cancel().fd(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (stream->cancel().IsCancelled()) {
      cancelled = true;
      break;
    }
    if (fds[0].revents == 0) continue;
    const ssize_t n = recv(fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // the holder is gone: the output has ended
    reader.Feed(buffer, static_cast<size_t>(n));
    AttachFrameType type;
    std::string payload;
    while (!done && reader.Next(&type, &payload, &malformed)) {
      dv1::AttachTaskResponse response;
      switch (type) {
        case AttachFrameType::kStdout:
          response.set_stdout(std::move(payload));
          break;
        case AttachFrameType::kStderr:
          response.set_stderr(std::move(payload));
          break;
        case AttachFrameType::kExit:
          done = true;
          continue;
        default:
          continue;
      }
      if (!stream->Send(response)) {
        cancelled = true;
        done = true;
      }
    }
  }
  // Unblocks the request thread's send, and its Recv.
  shutdown(fd.get(), SHUT_RDWR);
  stream->CloseRecv();
  requests.join();
  if (cancelled || stream->cancel().IsCancelled()) {
    return absl::CancelledError(
        absl::StrCat("attach to task ", target.task_id, " was cancelled"));
  }
  if (malformed) {
    return absl::InternalError(
        absl::StrCat("task ", target.task_id, ": ", target.socket_path,
                     " sent something that is not attach frames"));
  }
  return absl::OkStatus();
}

}  // namespace berth::driver_common
