#include "services/common/peer_test_util.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"

namespace berth {
namespace testing {
namespace {

// The child's part of ConnectAs: returns errno of the step that failed, 0
// with *connected set on success. System calls only (a forked child of a
// threaded process).
int BecomeAndConnect(const std::string& path, const Caller& caller,
                     int* connected) {
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(SYS_setgroups, caller.groups.size(), caller.groups.data()) != 0) {
    return errno;
  }
  if (syscall(SYS_setresgid, caller.gid, caller.gid, caller.gid) != 0) {
    return errno;
  }
  if (syscall(SYS_setresuid, caller.uid, caller.uid, caller.uid) != 0) {
    return errno;
  }
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (caller.bypass_file_permissions && caller.uid != 0) {
    const uint32_t bits =
        (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);
    data[0].effective = bits;
    data[0].permitted = bits;
  }
  if (caller.uid != 0 && syscall(SYS_capset, &header, data) != 0) return errno;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    return errno;
  }
  *connected = fd;
  return 0;
}

}  // namespace

absl::StatusOr<base::UniqueFd> ConnectAs(const std::string& socket_path,
                                         const Caller& caller) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::ErrnoToStatus(errno, "socketpair");
  }
  base::UniqueFd parent_end(pair[0]);
  base::UniqueFd child_end(pair[1]);
  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    int connected = -1;
    int err = BecomeAndConnect(socket_path, caller, &connected);
    // One int (0 or errno), with the connection attached on success.
    iovec iov = {&err, sizeof(err)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (err == 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &connected, sizeof(int));
    }
    _exit(sendmsg(child_end.get(), &msg, MSG_NOSIGNAL) == sizeof(err) ? 0 : 1);
  }
  child_end = base::UniqueFd();
  int err = -1;
  iovec iov = {&err, sizeof(err)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = recvmsg(parent_end.get(), &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  const int recv_errno = errno;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(err)) {
    return absl::InternalError(absl::StrCat(
        "the child connecting to ", socket_path, " as uid ", caller.uid,
        " sent nothing back (", got < 0 ? strerror(recv_errno) : "EOF", ")"));
  }
  if (err != 0) {
    return absl::ErrnoToStatus(
        err, absl::StrCat("connect to ", socket_path, " as uid ", caller.uid));
  }
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) {
    return absl::InternalError("no descriptor came back from the child");
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return base::UniqueFd(fd);
}

std::shared_ptr<grpc::Channel> ChannelOverConnection(base::UniqueFd fd) {
  const int raw = fd.release();
  return grpc::CreateCustomInsecureChannelFromFd("unix-peer-test", raw,
                                                 grpc::ChannelArguments());
}

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response, absl::Duration timeout) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer,
                 &response_buffer, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (status.ok() && response != nullptr) {
    std::vector<grpc::Slice> slices;
    (void)response_buffer.Dump(&slices);
    response->clear();
    for (const grpc::Slice& s : slices) {
      response->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

grpc::Status CallHealthAs(const std::string& socket_path,
                          const Caller& caller) {
  absl::StatusOr<base::UniqueFd> fd = ConnectAs(socket_path, caller);
  if (!fd.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        std::string(fd.status().ToString()));
  }
  return RawUnaryCall(ChannelOverConnection(*std::move(fd)),
                      "/grpc.health.v1.Health/Check", "");
}

}  // namespace testing
}  // namespace berth
