// A process the agent started (agent_service.h): its descriptors, the
// windows of its unacknowledged output (output_window.h), its exit, and the
// thread that moves its I/O between its pipes (or terminal) and the
// ProcessIo stream attached to it (io_reactor.h).

#ifndef SERVICES_AGENT_PROCESS_H_
#define SERVICES_AGENT_PROCESS_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "services/agent/output_window.h"

namespace berth::agent {

class IoReactor;

// 'process "P" of container "C"', for messages.
std::string ProcessName(const std::string& container_id,
                        const std::string& process_id);

// One process: its descriptors, its output windows, its exit, the stream
// attached to it, and the thread that moves its I/O.
class Process {
 public:
  Process(std::string container_id, std::string process_id, size_t window)
      : container_id(std::move(container_id)),
        process_id(std::move(process_id)),
        out("stdout", window),
        err("stderr", window) {}
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Joins the I/O thread; the descriptors close after it.
  ~Process();

  std::string name() const { return ProcessName(container_id, process_id); }

  // Wakes the I/O thread (room in a window, stdin to write, an exit).
  void Wake();

  // Moves output from the pipes into the windows and stdin from the stream
  // into the process, until the process has exited and its output ended.
  void IoLoop();

  // Reaps the process, which has exited, and records how (the reaper).
  void ReapAndRecord();

  // Starts a write on the attached stream (io_reactor.h) if it has nothing
  // in flight.
  void KickStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const std::string container_id;
  const std::string process_id;
  pid_t pid = -1;
  bool terminal = false;
  base::UniqueFd wake_fd;  // eventfd
  std::thread io_thread;

  absl::Mutex mu;
  // Our end of stdin (the pipe's write end, or the terminal), stdout (or
  // the terminal) and stderr (none with a terminal). Closed by the I/O
  // thread.
  base::UniqueFd in_fd ABSL_GUARDED_BY(mu);
  base::UniqueFd out_fd ABSL_GUARDED_BY(mu);
  base::UniqueFd err_fd ABSL_GUARDED_BY(mu);
  OutputWindow out ABSL_GUARDED_BY(mu);
  OutputWindow err ABSL_GUARDED_BY(mu);
  std::string stdin_pending ABSL_GUARDED_BY(mu);
  bool stdin_close_requested ABSL_GUARDED_BY(mu) = false;
  bool stdin_closed ABSL_GUARDED_BY(mu) = false;
  bool exited ABSL_GUARDED_BY(mu) = false;
  absl::Time exit_seen ABSL_GUARDED_BY(mu);
  v1::ProcessExit exit ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // The stream attached, if any.
  IoReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
};

}  // namespace berth::agent

#endif  // SERVICES_AGENT_PROCESS_H_
