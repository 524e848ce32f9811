// The driver's side of AttachTask: the attach socket a built-in driver makes
// for each run of a task (<task_dir>/.berth/attach.sock, served by the
// process holding the task's stdio with an AttachHub, attach_hub.h), and
// the relay between an AttachTask call and that socket.

#ifndef SERVICES_DRIVER_COMMON_ATTACH_CLIENT_H_
#define SERVICES_DRIVER_COMMON_ATTACH_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "plugins/sdk/attach.h"

namespace berth::driver_common {

// <task_dir>/.berth/attach.sock
std::string AttachSocketPath(const std::string& task_dir);

// A listening socket (AF_UNIX, SOCK_STREAM, close-on-exec, blocking) bound
// at `path`, mode 0600, after removing what a previous run left there. A
// path longer than a socket address holds is reached through its
// directory's descriptor.
absl::StatusOr<base::UniqueFd> ListenAttachSocket(const std::string& path);

// Removes the socket file at `path`; a missing one is fine.
void RemoveAttachSocket(const std::string& path);

// What RelayAttach attaches to.
struct AttachTarget {
  std::string task_id;
  // AttachSocketPath of the task's directory.
  std::string socket_path;
  // The task's TaskConfig.stdin_open.
  bool stdin_open = false;
};

// Serves `stream` on the task's attach socket: connects, says hello (with
// setup().stdin and terminal_size), then sends the holder's stdout and
// stderr frames as responses while a thread of its own passes the caller's
// stdin, stdin_close and resize requests on (the caller half-closing the
// stream leaves the task's stdin open). Returns OK when the task's output
// ends (the holder's exit frame is not passed on: the node adds the exit
// from WaitTask), CANCELLED (not worth a log line) when the caller
// cancelled or went away. FAILED_PRECONDITION naming the task when
// setup().stdin is asked of a task without stdin_open, or when nothing
// listens at the socket (the task has exited).
absl::Status RelayAttach(const AttachTarget& target,
                         plugin::AttachTaskStream* stream);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_ATTACH_CLIENT_H_
