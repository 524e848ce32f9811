// berth-shim's side of AttachTask (services/driver/common/attach_hub.h): the
// sandbox driver passes the shim of a task a listening socket (the task's
// <task_dir>/.berth/attach.sock) and the shim serves attached callers on it
// with an AttachHub: the process's output as the shim receives it (the
// first caller also gets what came before it), their stdin into a pipe the
// shim reads as the process's stdin (its end of file once a caller closes
// stdin), terminal sizes handed to the shim to send up as resizes, and the
// exit last.
//
// The hub is poll-driven and not thread-safe: one thread of the server's own
// makes every call to it; the shim's threads hand it output and the exit
// through a queue and an eventfd.

#ifndef SERVICES_SHIM_ATTACH_SERVER_H_
#define SERVICES_SHIM_ATTACH_SERVER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace berth::shim {

// What the first caller gets of the output from before it: the hub's 1 MiB
// (kAttachReplayBytes) with take_stdin, else this.
inline constexpr size_t kQuietReplayBytes = 64 * 1024;

class AttachServer {
 public:
  // Starts serving `listen_fd` (taken). With `take_stdin` the callers'
  // stdin comes out of stdin_fd(); without, their stdin is dropped.
  static absl::StatusOr<std::unique_ptr<AttachServer>> Start(
      base::UniqueFd listen_fd, bool take_stdin);
  ~AttachServer();
  AttachServer(const AttachServer&) = delete;
  AttachServer& operator=(const AttachServer&) = delete;

  // The read end of the callers' stdin (non-blocking, close-on-exec), -1
  // without take_stdin. End of file once a caller closed stdin.
  int stdin_fd() const { return stdin_read_.get(); }

  // Readable (an eventfd) when a caller sent a terminal size; read it with
  // TakeResize.
  int resize_fd() const { return resize_event_.get(); }
  // The latest size a caller sent since the last call, if any; clears
  // resize_fd().
  bool TakeResize(uint32_t* rows, uint32_t* columns);

  // The process wrote `data` (new bytes only, in order).
  void Output(bool is_stdout, absl::string_view data);

  // The process ended (or the shim gives up): callers get the exit frame
  // and what they have not been sent yet, for at most `timeout`, then the
  // server stops. Returns once it has.
  void Exit(int exit_code, int signal, absl::Duration timeout);

  // Attached callers now (for tests and logs).
  size_t clients() const;

 private:
  AttachServer() = default;
  void Loop();
  void OnResize(uint32_t rows, uint32_t columns);

  base::UniqueFd stdin_read_;
  base::UniqueFd resize_event_;
  base::UniqueFd wake_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  // Output not yet handed to the hub: (is_stdout, bytes).
  std::deque<std::pair<bool, std::string>> pending_ ABSL_GUARDED_BY(mu_);
  struct ExitRequest {
    int exit_code;
    int signal;
    absl::Duration timeout;
  };
  std::optional<ExitRequest> exit_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool resized_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t rows_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t columns_ ABSL_GUARDED_BY(mu_) = 0;
  size_t clients_ ABSL_GUARDED_BY(mu_) = 0;

  // Set by Start, used only by the server's thread.
  struct Hub;
  std::unique_ptr<Hub> hub_;
};

}  // namespace berth::shim

#endif  // SERVICES_SHIM_ATTACH_SERVER_H_
