#include "services/agent/agent_service.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "services/agent/output_window.h"
#include "services/common/status.h"

extern char** environ;

namespace berth::agent {
namespace {

using v1::ProcessIoRequest;
using v1::ProcessIoResponse;

// Output read from a pipe after the process has exited, by a background
// process that kept it open, is waited for this long before the stream is
// taken as ended.
constexpr absl::Duration kDrainGrace = absl::Milliseconds(250);

constexpr char kDeadlineRequired[] = "a deadline is required";

bool HasDeadline(const grpc::ServerContextBase& context) {
  return context.deadline() != std::chrono::system_clock::time_point::max();
}

absl::Time Deadline(const grpc::ServerContextBase& context) {
  return absl::FromChrono(context.deadline());
}

grpc::Status NoDeadline() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kDeadlineRequired);
}

std::string Name(const std::string& container_id,
                 const std::string& process_id) {
  return absl::StrCat("process \"", process_id, "\" of container \"",
                      container_id, "\"");
}

void SetWindowSize(int fd, const v1::TerminalSize& size) {
  struct winsize ws = {};
  ws.ws_row = static_cast<unsigned short>(size.rows());
  ws.ws_col = static_cast<unsigned short>(size.columns());
  ioctl(fd, TIOCSWINSZ, &ws);
}

// What a child writes on its close-on-exec pipe when it could not execute.
struct ChildError {
  int error_number;
  int step;
};

enum ChildStep {
  kStepStdio = 1,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepCwd,
  kStepExec,
};

[[noreturn]] void ChildFail(int fd, int step) {
  ChildError error = {errno, step};
  (void)!write(fd, &error, sizeof(error));
  _exit(127);
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t nanos = absl::ToUnixNanos(t);
  ts.set_seconds(nanos / 1000000000);
  ts.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return ts;
}

}  // namespace

// One process: its descriptors, its output windows, its exit, the stream
// attached to it, and the thread that moves its I/O.
class AgentService::Process {
 public:
  Process(std::string container_id, std::string process_id, size_t window)
      : container_id(std::move(container_id)),
        process_id(std::move(process_id)),
        out("stdout", window),
        err("stderr", window) {}

  ~Process() {
    if (io_thread.joinable()) io_thread.join();
    for (int fd : {in_fd, out_fd, err_fd, wake_fd}) {
      if (fd >= 0) close(fd);
    }
  }

  std::string name() const { return Name(container_id, process_id); }

  // Wakes the I/O thread (room in a window, stdin to write, an exit).
  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd, &one, sizeof(one));
  }

  // Moves output from the pipes into the windows and stdin from the stream
  // into the process, until the process has exited and its output ended.
  void IoLoop();

  // Reaps the process, which has exited, and records how (the reaper).
  void ReapAndRecord();

  // Starts a write on the attached stream if it has nothing in flight.
  void KickStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const std::string container_id;
  const std::string process_id;
  pid_t pid = -1;
  bool terminal = false;
  int wake_fd = -1;  // eventfd
  std::thread io_thread;

  absl::Mutex mu;
  // Our end of stdin (the pipe's write end, or the terminal), stdout (or
  // the terminal) and stderr (-1 with a terminal). Closed by the I/O thread.
  int in_fd ABSL_GUARDED_BY(mu) = -1;
  int out_fd ABSL_GUARDED_BY(mu) = -1;
  int err_fd ABSL_GUARDED_BY(mu) = -1;
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

// One ProcessIo call. Before the attach, its state is guarded by its own
// mu_; once attached, by the process's mu (the I/O thread drives writes).
class AgentService::IoReactor
    : public grpc::ServerBidiReactor<ProcessIoRequest, ProcessIoResponse> {
 public:
  IoReactor(AgentService* service, grpc::CallbackServerContext* context)
      : service_(service) {
    if (!HasDeadline(*context)) {
      pre_finished_ = true;
      Finish(NoDeadline());
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Once attached, with the attached process's mu held; `p` is that
  // process (process_, which only Attach sets, under both locks).
  void MaybeWrite(Process& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  void FinishAttached(Process& p, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  void ResumeReading();
  // Output up to these offsets was acknowledged (in the stream or by
  // AckOutput): nothing before them needs sending.
  void Acked(Process& p, uint64_t stdout_offset, uint64_t stderr_offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  bool finished() const { return finished_; }

 private:
  void Attach();

  AgentService* const service_;
  ProcessIoRequest request_;
  ProcessIoResponse response_;

  absl::Mutex mu_;
  std::shared_ptr<Process> process_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool pre_finished_ = false;  // Finish called before any attach

  // Guarded by process_->mu once attached.
  bool writing_ = false;
  bool finished_ = false;
  bool read_paused_ = false;
  std::optional<grpc::Status> pending_finish_;
  uint64_t out_sent_ = 0;
  uint64_t err_sent_ = 0;
  bool err_next_ = false;
};

void AgentService::Process::KickStream() {
  if (reactor != nullptr) reactor->MaybeWrite(*this);
}

void AgentService::Process::ReapAndRecord() {
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

void AgentService::Process::IoLoop() {
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
      if (in_fd >= 0 && !stdin_closed && !stdin_pending.empty()) {
        const ssize_t w =
            write(in_fd, stdin_pending.data(), stdin_pending.size());
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
      if (in_fd >= 0 && !stdin_closed && stdin_pending.empty() &&
          stdin_close_requested) {
        stdin_closed = true;
        if (terminal) {
          // A terminal has no half-close: end of file is the EOF character.
          struct termios attributes;
          char eof = 4;
          if (tcgetattr(in_fd, &attributes) == 0) eof = attributes.c_cc[VEOF];
          (void)!write(in_fd, &eof, 1);
        } else {
          close(in_fd);
          in_fd = -1;
        }
      }
      fds[n] = {wake_fd, POLLIN, 0};
      ++n;
      if (!out.closed() && out.room() > 0) {
        out_room = out.room();
        read_out = out_fd;
        out_index = n;
        fds[n++] = {out_fd, POLLIN, 0};
      }
      if (!err.closed() && err.room() > 0) {
        err_room = err.room();
        read_err = err_fd;
        err_index = n;
        fds[n++] = {err_fd, POLLIN, 0};
      }
      if (in_fd >= 0 && !stdin_closed && !stdin_pending.empty()) {
        in_index = n;
        fds[n++] = {in_fd, POLLOUT, 0};
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
      (void)!read(wake_fd, &count, sizeof(count));
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
  for (int* fd : {&in_fd, &out_fd, &err_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  stdin_closed = true;
  stdin_pending.clear();
  if (reactor != nullptr) reactor->ResumeReading();
  KickStream();
}

// --- IoReactor.

void AgentService::IoReactor::OnReadDone(bool ok) {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
    if (process == nullptr) {
      if (!ok || cancelled_) {
        pre_finished_ = true;
        Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the stream ended before it attached"));
        return;
      }
    }
  }
  if (process == nullptr) {
    Attach();
    return;
  }
  // After the attach: a failed read is a half-close or a cancel (OnCancel).
  if (!ok) return;
  absl::MutexLock lock(&process->mu);
  if (finished_) return;
  switch (request_.frame_case()) {
    case ProcessIoRequest::kStdin:
      if (process->stdin_closed || process->stdin_close_requested) break;
      if (process->stdin_pending.empty()) {
        process->stdin_pending.swap(*request_.mutable_stdin());
      } else {
        process->stdin_pending.append(request_.stdin());
      }
      process->Wake();
      // Read on once the process took it: stdin's back-pressure.
      read_paused_ = true;
      return;
    case ProcessIoRequest::kStdinClose:
      process->stdin_close_requested = true;
      process->Wake();
      break;
    case ProcessIoRequest::kAck: {
      const v1::OutputAck& ack = request_.ack();
      absl::Status status = process->out.Ack(ack.stdout_offset());
      if (status.ok()) status = process->err.Ack(ack.stderr_offset());
      if (!status.ok()) {
        FinishAttached(*process, ToGrpcStatus(status));
        return;
      }
      process->Wake();  // there may be room to read again
      Acked(*process, ack.stdout_offset(), ack.stderr_offset());
      break;
    }
    case ProcessIoRequest::kAttach:
      FinishAttached(*process,
                     grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "attach: only the first request attaches"));
      return;
    default:
      FinishAttached(*process,
                     grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "frame: a request carries nothing"));
      return;
  }
  StartRead(&request_);
}

void AgentService::IoReactor::Attach() {
  absl::MutexLock lock(&mu_);
  const auto fail = [this](const absl::Status& status) {
    pre_finished_ = true;
    Finish(ToGrpcStatus(status));
  };
  if (cancelled_) {
    return fail(absl::CancelledError("cancelled before it attached"));
  }
  if (request_.frame_case() != ProcessIoRequest::kAttach) {
    return fail(absl::InvalidArgumentError(
        "attach: the first request must attach to a process"));
  }
  const v1::ProcessIoAttach& attach = request_.attach();
  absl::StatusOr<std::shared_ptr<Process>> found =
      service_->Find(attach.container_id(), attach.process_id());
  if (!found.ok()) return fail(found.status());
  std::shared_ptr<Process> process = *std::move(found);
  absl::MutexLock process_lock(&process->mu);
  absl::Status status = process->out.CheckResume(attach.stdout_offset());
  if (status.ok()) status = process->err.CheckResume(attach.stderr_offset());
  if (!status.ok()) {
    return fail(absl::OutOfRangeError(
        absl::StrCat(process->name(), ": ", status.message())));
  }
  // What comes before the offsets was delivered.
  (void)process->out.Ack(attach.stdout_offset());
  (void)process->err.Ack(attach.stderr_offset());
  if (process->reactor != nullptr) {
    process->reactor->FinishAttached(
        *process, grpc::Status(grpc::StatusCode::ABORTED,
                               absl::StrCat("another ProcessIo attached to ",
                                            process->name())));
  }
  process_ = process;
  process->reactor = this;
  out_sent_ = attach.stdout_offset();
  err_sent_ = attach.stderr_offset();
  VLOG(1) << "ProcessIo attached to " << process->name() << " at stdout "
          << out_sent_ << ", stderr " << err_sent_;
  process->Wake();
  MaybeWrite(*process);
  StartRead(&request_);
}

void AgentService::IoReactor::MaybeWrite(Process& p) {
  if (finished_ || writing_) return;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool is_err = err_next_ != (attempt == 1);
    OutputWindow& window = is_err ? p.err : p.out;
    uint64_t& sent = is_err ? err_sent_ : out_sent_;
    response_.Clear();
    v1::OutputChunk* chunk = is_err ? response_.mutable_stderr_chunk()
                                    : response_.mutable_stdout_chunk();
    const size_t n =
        window.CopyFrom(sent, kMaxOutputFrameBytes, chunk->mutable_data());
    if (n == 0) continue;
    chunk->set_offset(sent);
    sent += n;
    err_next_ = !is_err;
    writing_ = true;
    StartWrite(&response_);
    return;
  }
  response_.Clear();
  if (p.exited && p.out.closed() && p.err.closed() &&
      out_sent_ == p.out.end_offset() && err_sent_ == p.err.end_offset()) {
    *response_.mutable_exit() = p.exit;
    finished_ = true;
    p.reactor = nullptr;
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
}

void AgentService::IoReactor::FinishAttached(Process& p,
                                             const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  if (p.reactor == this) p.reactor = nullptr;
  if (writing_) {
    pending_finish_ = status;
  } else {
    Finish(status);
  }
}

void AgentService::IoReactor::Acked(Process& p, uint64_t stdout_offset,
                                    uint64_t stderr_offset) {
  if (finished_) return;
  out_sent_ = std::max(out_sent_, stdout_offset);
  err_sent_ = std::max(err_sent_, stderr_offset);
  MaybeWrite(p);
}

void AgentService::IoReactor::ResumeReading() {
  if (!read_paused_ || finished_) return;
  read_paused_ = false;
  StartRead(&request_);
}

void AgentService::IoReactor::OnWriteDone(bool ok) {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
  }
  absl::MutexLock lock(&process->mu);
  writing_ = false;
  if (pending_finish_.has_value()) {
    Finish(*pending_finish_);
    pending_finish_.reset();
    return;
  }
  if (finished_) return;
  if (!ok) {
    FinishAttached(*process, grpc::Status(grpc::StatusCode::CANCELLED,
                                          "the stream broke"));
    return;
  }
  MaybeWrite(*process);
}

void AgentService::IoReactor::OnCancel() {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
    if (process == nullptr) {
      cancelled_ = true;  // the pending read fails and finishes
      return;
    }
  }
  absl::MutexLock lock(&process->mu);
  FinishAttached(*process,
                 grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

void AgentService::IoReactor::OnDone() {
  std::shared_ptr<Process> process;
  {
    absl::MutexLock lock(&mu_);
    process = process_;
  }
  if (process != nullptr) {
    absl::MutexLock lock(&process->mu);
    if (process->reactor == this) process->reactor = nullptr;
  }
  delete this;
}

// --- AgentService.

AgentService::AgentService(AgentOptions options)
    : options_(std::move(options)), started_at_(absl::Now()) {
  // A process that closed its stdin must not kill the agent through a write
  // to that pipe (EPIPE is handled); children get the default back.
  signal(SIGPIPE, SIG_IGN);
  if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    PLOG(WARNING) << "becoming a child subreaper";
  }
  reaper_ = std::thread([this] { ReapLoop(); });
}

AgentService::~AgentService() {
  std::vector<std::thread> destroyers;
  {
    absl::MutexLock lock(&mu_);
    destroyers.swap(destroyers_);
  }
  for (std::thread& thread : destroyers) thread.join();
  KillAll(absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    stop_reaper_ = true;
  }
  // The reaper may be blocked in waitpid for a child we do not know (an
  // orphan we inherited): a child that exits at once wakes it.
  const pid_t waker = fork();
  if (waker == 0) _exit(0);
  reaper_.join();
  if (waker > 0) waitpid(waker, nullptr, 0);
  std::vector<std::shared_ptr<Process>> processes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, container] : containers_) {
      for (auto& [pid, process] : container.processes) {
        processes.push_back(process);
      }
    }
    containers_.clear();
  }
  for (const std::shared_ptr<Process>& process : processes) {
    {
      absl::MutexLock lock(&process->mu);
      process->stopping = true;
      process->Wake();
    }
    if (process->io_thread.joinable()) process->io_thread.join();
  }
}

void AgentService::ReapLoop() {
  while (true) {
    uint64_t generation;
    {
      absl::MutexLock lock(&mu_);
      if (stop_reaper_) return;
      generation = spawn_generation_;
    }
    // Look first (WNOWAIT), reap under the process's lock: Signal never
    // sends to a pid that was reaped and may have been reused.
    siginfo_t info = {};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT | __WALL) == 0 &&
        info.si_pid > 0) {
      const pid_t pid = info.si_pid;
      std::shared_ptr<Process> process;
      {
        absl::MutexLock lock(&mu_);
        auto it = running_.find(pid);
        if (it != running_.end()) process = it->second;
      }
      if (process != nullptr) {
        process->ReapAndRecord();
        absl::MutexLock lock(&mu_);
        running_.erase(pid);
      } else {
        waitpid(pid, nullptr, __WALL);
        VLOG(1) << "reaped pid " << pid;
      }
      continue;
    }
    if (errno == EINTR) continue;
    // No children: wait until one is started, or until the end.
    absl::MutexLock lock(&mu_);
    const auto changed = [this, generation]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stop_reaper_ || spawn_generation_ != generation;
    };
    mu_.Await(absl::Condition(&changed));
  }
}

absl::StatusOr<std::shared_ptr<AgentService::Process>> AgentService::Find(
    const std::string& container_id, const std::string& process_id) {
  if (container_id.empty()) {
    return absl::InvalidArgumentError("container_id is empty");
  }
  if (process_id.empty()) {
    return absl::InvalidArgumentError("process_id is empty");
  }
  absl::MutexLock lock(&mu_);
  auto container = containers_.find(container_id);
  if (container == containers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("container \"", container_id, "\" not found"));
  }
  auto process = container->second.processes.find(process_id);
  if (process == container->second.processes.end()) {
    return absl::NotFoundError(absl::StrCat("process \"", process_id,
                                            "\" not found in container \"",
                                            container_id, "\""));
  }
  return process->second;
}

absl::StatusOr<pid_t> AgentService::Start(const std::string& container_id,
                                          const std::string& process_id,
                                          const v1::ProcessSpec& spec,
                                          bool new_container) {
  if (container_id.empty()) {
    return absl::InvalidArgumentError("container_id is empty");
  }
  if (process_id.empty()) {
    return absl::InvalidArgumentError("process_id is empty");
  }
  if (spec.args().empty() || spec.args(0).empty()) {
    return absl::InvalidArgumentError("process.args is empty");
  }
  for (int i = 0; i < spec.env_size(); ++i) {
    if (spec.env(i).find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process.env[", i, "] \"", spec.env(i), "\" is not KEY=VALUE"));
    }
  }
  std::vector<std::string> args(spec.args().begin(), spec.args().end());
  std::vector<std::string> env(spec.env().begin(), spec.env().end());
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  const std::string& program = args[0];
  const bool search_path = program.find('/') == std::string::npos;
  const bool set_user = spec.has_user();
  std::vector<gid_t> groups(spec.user().additional_gids().begin(),
                            spec.user().additional_gids().end());
  const uid_t uid = spec.user().uid();
  const gid_t gid = spec.user().gid();
  const std::string cwd = spec.cwd();

  absl::MutexLock lock(&mu_);
  if (destroyed_) {
    return absl::FailedPreconditionError("the sandbox is being destroyed");
  }
  auto container = containers_.find(container_id);
  if (new_container && container != containers_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("container \"", container_id, "\" already exists"));
  }
  if (!new_container) {
    if (container == containers_.end()) {
      return absl::NotFoundError(
          absl::StrCat("container \"", container_id, "\" not found"));
    }
    if (container->second.processes.contains(process_id)) {
      return absl::AlreadyExistsError(
          absl::StrCat(Name(container_id, process_id), " already exists"));
    }
  }

  // Our ends and the child's, closed on every way out.
  std::vector<int> ours, theirs;
  absl::Cleanup close_all = [&] {
    for (int fd : ours) close(fd);
    for (int fd : theirs) close(fd);
  };
  const auto errno_error = [](absl::string_view what) {
    return absl::ErrnoToStatus(errno, what);
  };
  auto process = std::make_shared<Process>(container_id, process_id,
                                           options_.output_window_bytes);
  process->terminal = spec.terminal();
  int child_in = -1, child_out = -1, child_err = -1;
  int in_fd = -1, out_fd = -1, err_fd = -1;
  if (spec.terminal()) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return errno_error("opening a pseudo-terminal");
    ours.push_back(master);
    if (grantpt(master) != 0 || unlockpt(master) != 0) {
      return errno_error("unlocking the pseudo-terminal");
    }
    char name[128];
    if (ptsname_r(master, name, sizeof(name)) != 0) {
      return errno_error("naming the pseudo-terminal");
    }
    const int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return errno_error(absl::StrCat("opening ", name));
    theirs.push_back(slave);
    if (spec.has_terminal_size()) SetWindowSize(master, spec.terminal_size());
    const int out_copy = fcntl(master, F_DUPFD_CLOEXEC, 0);
    if (out_copy < 0) return errno_error("dup");
    ours.push_back(out_copy);
    in_fd = master;
    out_fd = out_copy;
    child_in = child_out = child_err = slave;
  } else {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return errno_error("pipe2");
    theirs.push_back(in[0]);
    ours.push_back(in[1]);
    if (pipe2(out, O_CLOEXEC) != 0) return errno_error("pipe2");
    ours.push_back(out[0]);
    theirs.push_back(out[1]);
    if (pipe2(err, O_CLOEXEC) != 0) return errno_error("pipe2");
    ours.push_back(err[0]);
    theirs.push_back(err[1]);
    // Best effort: the default 64 KiB caps each read below a frame, and an
    // unprivileged agent may be held to /proc/sys/fs/pipe-max-size.
    (void)fcntl(out[0], F_SETPIPE_SZ, kOutputPipeBytes);
    (void)fcntl(err[0], F_SETPIPE_SZ, kOutputPipeBytes);
    in_fd = in[1];
    out_fd = out[0];
    err_fd = err[0];
    child_in = in[0];
    child_out = out[1];
    child_err = err[1];
  }
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return errno_error("pipe2");
  theirs.push_back(exec_pipe[1]);
  ours.push_back(exec_pipe[0]);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return errno_error("eventfd");
  ours.push_back(wake_fd);

  const bool terminal = spec.terminal();
  const pid_t pid = fork();
  if (pid < 0) return errno_error("fork");
  if (pid == 0) {
    // The child: only async-signal-safe calls from here on.
    const int error_fd = exec_pipe[1];
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    }
    setsid();
    if (terminal && ioctl(child_in, TIOCSCTTY, 0) != 0) {
      ChildFail(error_fd, kStepStdio);
    }
    if (dup2(child_in, STDIN_FILENO) < 0 ||
        dup2(child_out, STDOUT_FILENO) < 0 ||
        dup2(child_err, STDERR_FILENO) < 0) {
      ChildFail(error_fd, kStepStdio);
    }
    if (set_user) {
      if (setgroups(groups.size(), groups.data()) != 0) {
        ChildFail(error_fd, kStepGroups);
      }
      if (setgid(gid) != 0) ChildFail(error_fd, kStepGid);
      if (setuid(uid) != 0) ChildFail(error_fd, kStepUid);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) ChildFail(error_fd, kStepCwd);
    if (search_path) {
      environ = envp.data();  // execvpe searches the PATH of environ
      execvpe(program.c_str(), argv.data(), envp.data());
    } else {
      execve(program.c_str(), argv.data(), envp.data());
    }
    ChildFail(error_fd, kStepExec);
  }
  // The reaper now has a child to wait for.
  ++spawn_generation_;
  close(exec_pipe[1]);
  theirs.pop_back();
  for (int fd : theirs) close(fd);
  theirs.clear();
  ChildError error = {};
  size_t got = 0;
  while (got < sizeof(error)) {
    const ssize_t r = read(exec_pipe[0], reinterpret_cast<char*>(&error) + got,
                           sizeof(error) - got);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(r);
  }
  if (got == sizeof(error)) {
    // It did not execute; the reaper reaps it (not in running_).
    const std::string reason = std::strerror(error.error_number);
    switch (error.step) {
      case kStepExec:
        if (error.error_number == ENOENT) {
          return absl::NotFoundError(absl::StrCat("process.args[0]: program \"",
                                                  program, "\" not found"));
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "process.args[0]: cannot execute \"", program, "\": ", reason));
      case kStepCwd:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.cwd: cannot change to \"", cwd, "\": ", reason));
      case kStepGroups:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.additional_gids: cannot set them: ", reason));
      case kStepGid:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.gid: cannot become group ", gid, ": ", reason));
      case kStepUid:
        return absl::InvalidArgumentError(absl::StrCat(
            "process.user.uid: cannot become user ", uid, ": ", reason));
      default:
        return absl::InternalError(absl::StrCat("setting up the stdio of \"",
                                                program, "\": ", reason));
    }
  }
  // Started: the descriptors now belong to the process.
  std::move(close_all).Cancel();
  close(exec_pipe[0]);
  SetNonBlocking(in_fd);
  SetNonBlocking(out_fd);
  if (err_fd >= 0) SetNonBlocking(err_fd);
  process->pid = pid;
  process->wake_fd = wake_fd;
  {
    absl::MutexLock process_lock(&process->mu);
    process->in_fd = in_fd;
    process->out_fd = out_fd;
    process->err_fd = err_fd;
    if (terminal) process->err.Close();  // stdout and stderr are one
  }
  process->io_thread = std::thread([p = process.get()] { p->IoLoop(); });
  Container& target = containers_[container_id];
  if (new_container) target.first_process_id = process_id;
  target.processes[process_id] = process;
  running_[pid] = process;
  LOG(INFO) << "sandbox " << options_.sandbox_id << ": started "
            << Name(container_id, process_id) << " (" << program << ") as pid "
            << pid << (terminal ? " with a terminal" : "");
  return pid;
}

void AgentService::KillAll(absl::Duration grace) {
  const auto signal_all = [this](int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [pid, process] : running_) {
      kill(-pid, sig);  // its process group (setsid)
      kill(pid, sig);
    }
  };
  const auto none_running = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return running_.empty();
  };
  absl::MutexLock lock(&mu_);
  if (grace > absl::ZeroDuration()) {
    signal_all(SIGTERM);
    mu_.AwaitWithTimeout(absl::Condition(&none_running), grace);
  }
  signal_all(SIGKILL);
  if (getpid() == 1) kill(-1, SIGKILL);  // everything in the sandbox
  if (!mu_.AwaitWithTimeout(absl::Condition(&none_running),
                            absl::Seconds(10))) {
    LOG(ERROR) << "sandbox " << options_.sandbox_id << ": " << running_.size()
               << " processes still not reaped after SIGKILL";
  }
}

// --- The calls.

grpc::Status AgentService::Ping(grpc::ServerContext* context,
                                const v1::PingRequest* /*request*/,
                                v1::PingResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  response->set_agent_version(kAgentVersion);
  const absl::Duration uptime = absl::Now() - started_at_;
  const int64_t nanos = absl::ToInt64Nanoseconds(uptime);
  response->mutable_uptime()->set_seconds(nanos / 1000000000);
  response->mutable_uptime()->set_nanos(
      static_cast<int32_t>(nanos % 1000000000));
  return grpc::Status::OK;
}

grpc::Status AgentService::NewContainer(grpc::ServerContext* context,
                                        const v1::NewContainerRequest* request,
                                        v1::NewContainerResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<pid_t> pid =
      Start(request->container_id(), request->process_id(), request->process(),
            /*new_container=*/true);
  if (!pid.ok()) return ToGrpcStatus(pid.status());
  response->set_pid(*pid);
  return grpc::Status::OK;
}

grpc::Status AgentService::ExecCmd(grpc::ServerContext* context,
                                   const v1::ExecCmdRequest* request,
                                   v1::ExecCmdResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<pid_t> pid =
      Start(request->container_id(), request->process_id(), request->process(),
            /*new_container=*/false);
  if (!pid.ok()) return ToGrpcStatus(pid.status());
  response->set_pid(*pid);
  return grpc::Status::OK;
}

grpc::Status AgentService::Signal(grpc::ServerContext* context,
                                  const v1::SignalRequest* request,
                                  v1::SignalResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  if (request->signal() <= 0 || request->signal() >= NSIG) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("signal ", request->signal(), " is not a signal"));
  }
  absl::StatusOr<std::shared_ptr<Process>> process =
      Find(request->container_id(), request->process_id());
  if (!process.ok()) return ToGrpcStatus(process.status());
  absl::MutexLock lock(&(*process)->mu);
  if ((*process)->exited) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has exited"));
  }
  // Not reaped yet (the reaper takes the process's lock to record the
  // exit), so the pid is still ours.
  if (kill((*process)->pid, request->signal()) != 0) {
    return ToGrpcStatus(absl::ErrnoToStatus(
        errno, absl::StrCat("signalling ", (*process)->name())));
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::Resize(grpc::ServerContext* context,
                                  const v1::ResizeRequest* request,
                                  v1::ResizeResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> process =
      Find(request->container_id(), request->process_id());
  if (!process.ok()) return ToGrpcStatus(process.status());
  absl::MutexLock lock(&(*process)->mu);
  if (!(*process)->terminal) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has no terminal"));
  }
  if ((*process)->in_fd < 0) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat((*process)->name(), " has ended"));
  }
  SetWindowSize((*process)->in_fd, request->size());
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<ProcessIoRequest, ProcessIoResponse>*
AgentService::ProcessIo(grpc::CallbackServerContext* context) {
  return new IoReactor(this, context);
}

grpc::Status AgentService::AckOutput(grpc::ServerContext* context,
                                     const v1::AckOutputRequest* request,
                                     v1::AckOutputResponse* /*response*/) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> found =
      Find(request->container_id(), request->process_id());
  if (!found.ok()) return ToGrpcStatus(found.status());
  Process& process = **found;
  absl::MutexLock lock(&process.mu);
  absl::Status status = process.out.Ack(request->stdout_offset());
  if (status.ok()) status = process.err.Ack(request->stderr_offset());
  if (!status.ok()) {
    return ToGrpcStatus(absl::OutOfRangeError(
        absl::StrCat(process.name(), ": ", status.message())));
  }
  process.Wake();  // there may be room to read again
  if (process.reactor != nullptr) {
    process.reactor->Acked(process, request->stdout_offset(),
                           request->stderr_offset());
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::WaitProcess(grpc::ServerContext* context,
                                       const v1::WaitProcessRequest* request,
                                       v1::WaitProcessResponse* response) {
  if (!HasDeadline(*context)) return NoDeadline();
  absl::StatusOr<std::shared_ptr<Process>> found =
      Find(request->container_id(), request->process_id());
  if (!found.ok()) return ToGrpcStatus(found.status());
  Process& process = **found;
  const absl::Time deadline = Deadline(*context);
  absl::MutexLock lock(&process.mu);
  // In steps, to notice a cancelled call (or a server shutting down).
  while (!process.exited) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat(process.name(), " is still running"));
    }
    process.mu.AwaitWithDeadline(
        absl::Condition(&process.exited),
        std::min(deadline, absl::Now() + absl::Milliseconds(200)));
  }
  *response->mutable_exit() = process.exit;
  return grpc::Status::OK;
}

namespace {

// Answers a DestroySandbox call; runs `on_done` after the answer is sent.
class DestroyReactor : public grpc::ServerUnaryReactor {
 public:
  explicit DestroyReactor(std::function<void()> on_done)
      : on_done_(std::move(on_done)) {}
  void OnDone() override {
    if (on_done_) on_done_();
    delete this;
  }

 private:
  const std::function<void()> on_done_;
};

}  // namespace

grpc::ServerUnaryReactor* AgentService::DestroySandbox(
    grpc::CallbackServerContext* context,
    const v1::DestroySandboxRequest* request,
    v1::DestroySandboxResponse* /*response*/) {
  if (!HasDeadline(*context)) {
    auto* reactor = new DestroyReactor(nullptr);
    reactor->Finish(NoDeadline());
    return reactor;
  }
  absl::Duration grace = absl::Seconds(5);
  if (request->has_timeout()) {
    grace = absl::Seconds(request->timeout().seconds()) +
            absl::Nanoseconds(request->timeout().nanos());
  }
  // Keep time to answer before the caller's deadline.
  grace = std::max(absl::ZeroDuration(),
                   std::min(grace, Deadline(*context) - absl::Now() -
                                       absl::Milliseconds(500)));
  absl::MutexLock lock(&mu_);
  const bool first = !destroyed_;
  destroyed_ = true;
  auto* reactor = new DestroyReactor(first ? options_.on_destroyed
                                           : std::function<void()>());
  LOG(INFO) << "sandbox " << options_.sandbox_id
            << ": destroying, SIGKILL after " << grace;
  // Not on gRPC's callback thread: the grace may take seconds.
  destroyers_.emplace_back([this, reactor, grace] {
    KillAll(grace);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace berth::agent
