#include "services/shim/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "berth/proxy/v1/proxy.pb.h"
#include "glog/logging.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "services/common/unix_socket.h"
#include "services/shim/attach_server.h"

extern char** environ;

namespace berth {
namespace shim {
namespace {

namespace pb = ::berth::proxy::v1;
using Stream =
    grpc::ClientReaderWriter<pb::ConnectRequest, pb::ConnectResponse>;

constexpr size_t kMaxTokenSize = 4096;
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);
// Deadline of an AckOutput call.
constexpr absl::Duration kAckTimeout = absl::Seconds(10);
// After a failed AckOutput, the next try.
constexpr absl::Duration kAckRetryDelay = absl::Milliseconds(500);

// A channel to the proxy once it is connected, trying until `deadline`.
// Unlike services/common's DialUnix, it retries a missing or refusing socket
// every 100 ms to 1 s rather than gRPC's default 1 s growing to 2 minutes,
// so that a restarted proxy is found soon after it listens again.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& socket,
                                                    absl::Time deadline) {
  if (absl::Status length = CheckSocketPathLength(socket); !length.ok()) {
    return length;
  }
  grpc::ChannelArguments arguments;
  // A fresh connection, never one of a proxy that died (see DialUnix).
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(absl::StrCat("unix:", socket),
                                grpc::InsecureChannelCredentials(), arguments);
  if (channel->WaitForConnected(absl::ToChronoTime(deadline))) return channel;
  std::string why =
      "the socket accepts connections but no gRPC connection "
      "was made";
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(socket);
  if (!state.ok()) {
    why = std::string(state.status().message());
  } else if (*state == SocketPathState::kAbsent) {
    why = "no such socket";
  } else if (*state == SocketPathState::kNotSocket) {
    why = "not a socket";
  } else if (*state == SocketPathState::kStale) {
    why = "connection refused (nobody listens on it)";
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", socket, ": ", why));
}

// What one Connect stream came to.
struct StreamResult {
  enum Kind {
    kExited,  // the process exited: exit_code
    kLost,    // the connection was lost or never made: retry
    kFatal,   // a failure not worth retrying
  };
  Kind kind = kLost;
  int exit_code = 0;
  berth::agent::v1::ProcessExit exit;
  // Whether the proxy accepted the hello on this stream.
  bool connected = false;
  absl::Status error;
};

// Whether a status that ended the stream is about the sandbox's agent (the
// proxy's "agent gone"), as opposed to the connection to the proxy itself.
// gRPC's own transport errors never mention either word.
bool IsAboutAgent(const grpc::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.error_message());
  return absl::StrContains(message, "agent") ||
         absl::StrContains(message, "sandbox");
}

// The rotated files of one output stream, when options say so.
std::unique_ptr<plugin::RotatingLog> LogFor(const ShimOptions& options,
                                            const char* name) {
  if (options.log_dir.empty()) return nullptr;
  const plugin::LogLimits limits = plugin::ResolveLogLimits(
      options.log_max_file_bytes, options.log_max_files);
  return std::make_unique<plugin::RotatingLog>(
      options.log_dir, name, limits.max_file_bytes, limits.max_files);
}

class Shim {
 public:
  explicit Shim(const ShimOptions& options)
      : options_(options),
        stdin_fd_(options.stdin_fd),
        stdout_(options.stdout_fd, "stdout",
                LogFor(options, plugin::kStdoutLogName)),
        stderr_(options.stderr_fd, "stderr",
                LogFor(options, plugin::kStderrLogName)) {}

  int Run() {
    wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_.valid()) {
      return Fail(
          absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno))));
    }
    if (options_.forward_signals) {
      sigset_t set;
      sigemptyset(&set);
      for (int signal : ForwardedSignals()) sigaddset(&set, signal);
      sigaddset(&set, SIGWINCH);
      signal_fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
      if (!signal_fd_.valid()) {
        return Fail(absl::InternalError(
            absl::StrCat("signalfd: ", std::strerror(errno))));
      }
    }
    if (options_.attach_fd >= 0) {
      absl::StatusOr<std::unique_ptr<AttachServer>> server =
          AttachServer::Start(base::UniqueFd(options_.attach_fd),
                              options_.attach_stdin);
      if (!server.ok()) return Fail(server.status());
      attach_ = *std::move(server);
      if (options_.attach_stdin) stdin_fd_ = attach_->stdin_fd();
    }
    std::thread up([this] { UpLoop(); });
    std::thread acker([this] { AckLoop(); });
    berth::agent::v1::ProcessExit exit;
    const int code = ConnectLoop(&exit);
    if (attach_ != nullptr) {
      // Attached callers get the rest of the output and the exit before
      // the shim's own exit says the task has ended.
      if (code == kShimFailureExitCode && exit.exit_code() == 0 &&
          exit.signal() == 0) {
        exit.set_exit_code(kShimFailureExitCode);
      }
      attach_->Exit(exit.exit_code(), exit.signal(),
                    options_.attach_flush_timeout);
    }
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    {
      absl::MutexLock lock(&ack_mu_);
      ack_stub_ = nullptr;
      ack_stopping_ = true;
      // The process has ended: an ack in flight no longer matters.
      if (ack_context_ != nullptr) ack_context_->TryCancel();
    }
    acker.join();
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
    up.join();
    return code;
  }

 private:
  int Fail(const absl::Status& status) {
    LOG(ERROR) << "berth-shim: " << status.message();
    return kShimFailureExitCode;
  }

  // The connection loop of the calling thread: connects, reads, and
  // reconnects while that makes sense.
  int ConnectLoop(berth::agent::v1::ProcessExit* exit) {
    bool resume = false;
    absl::Time give_up = absl::Now() + options_.reconnect_timeout;
    absl::Duration backoff = kFirstBackoff;
    while (true) {
      StreamResult result = RunStream(resume, give_up);
      switch (result.kind) {
        case StreamResult::kExited:
          *exit = result.exit;
          return result.exit_code;
        case StreamResult::kFatal:
          return Fail(result.error);
        case StreamResult::kLost:
          break;
      }
      if (result.connected) {
        resume = true;
        give_up = absl::Now() + options_.reconnect_timeout;
        backoff = kFirstBackoff;
        VLOG(1) << "lost the stream to the proxy at " << options_.proxy_socket
                << " (" << result.error << "); reconnecting";
      }
      const absl::Time now = absl::Now();
      if (now >= give_up) {
        const std::string within = absl::StrCat(
            " within ", absl::FormatDuration(options_.reconnect_timeout), ": ",
            result.error.message());
        return Fail(absl::UnavailableError(
            resume ? absl::StrCat("lost the proxy at ", options_.proxy_socket,
                                  " and could not reach it again", within)
                   : absl::StrCat("cannot reach the proxy at ",
                                  options_.proxy_socket, within)));
      }
      absl::SleepFor(std::min(backoff, give_up - now));
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  StreamResult Lost(absl::Status error, bool connected) {
    StreamResult result;
    result.kind = StreamResult::kLost;
    result.connected = connected;
    result.error = std::move(error);
    return result;
  }

  StreamResult Fatal(absl::Status error) {
    StreamResult result;
    result.kind = StreamResult::kFatal;
    result.error = std::move(error);
    return result;
  }

  // Classifies the status a stream ended with.
  StreamResult Ended(const grpc::Status& status, bool connected) {
    const std::string message =
        absl::StrCat("the proxy at ", options_.proxy_socket,
                     " ended the stream: ", status.error_message());
    switch (status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        if (IsAboutAgent(status)) {
          return Fatal(absl::UnavailableError(status.error_message()));
        }
        return Lost(absl::UnavailableError(message), connected);
      case grpc::StatusCode::CANCELLED:
        // Never by us while the stream runs: the proxy went away.
        return Lost(absl::CancelledError(message), connected);
      case grpc::StatusCode::PERMISSION_DENIED:
        return Fatal(absl::PermissionDeniedError(
            absl::StrCat("the proxy at ", options_.proxy_socket,
                         " refused the token: ", status.error_message())));
      case grpc::StatusCode::OK:
        return Fatal(absl::DataLossError(
            absl::StrCat("the proxy at ", options_.proxy_socket,
                         " ended the stream without the process's exit")));
      default:
        return Fatal(absl::Status(
            static_cast<absl::StatusCode>(status.error_code()), message));
    }
  }

  // One Connect stream, from dialing to its end.
  StreamResult RunStream(bool resume, absl::Time give_up) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        Dial(options_.proxy_socket, give_up);
    if (!channel.ok()) return Lost(channel.status(), false);
    std::shared_ptr<pb::ProxyService::Stub> stub =
        pb::ProxyService::NewStub(*channel);
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = stub->Connect(&context);

    pb::ConnectRequest hello;
    pb::ShimHello* fields = hello.mutable_hello();
    fields->set_token(options_.token);
    fields->set_resume(resume);
    fields->set_stdout_offset(stdout_.written());
    fields->set_stderr_offset(stderr_.written());
    stream->Write(hello);  // a failure shows in the Read below
    hello.Clear();

    pb::ConnectResponse response;
    bool connected = false;
    StreamResult result;
    bool done = false;
    while (!done && stream->Read(&response)) {
      switch (response.frame_case()) {
        case pb::ConnectResponse::kConnected:
          if (!connected) {
            connected = true;
            Publish(stream.get());
            absl::MutexLock lock(&ack_mu_);
            ack_stub_ = stub;
          }
          break;
        case pb::ConnectResponse::kStdout:
        case pb::ConnectResponse::kStderr: {
          const bool out =
              response.frame_case() == pb::ConnectResponse::kStdout;
          const pb::OutputChunk& chunk =
              out ? response.stdout() : response.stderr();
          OutputSink& sink = out ? stdout_ : stderr_;
          const uint64_t before = sink.written();
          if (absl::Status written = sink.Write(chunk.offset(), chunk.data());
              !written.ok()) {
            result = Fatal(written);
            done = true;
            break;
          }
          if (attach_ != nullptr && sink.written() > before) {
            // The bytes new to the sink: the end of the chunk (a resumed
            // stream may repeat its start).
            const size_t fresh = static_cast<size_t>(sink.written() - before);
            attach_->Output(out, absl::string_view(chunk.data())
                                     .substr(chunk.data().size() - fresh));
          }
          Ack();
          break;
        }
        case pb::ConnectResponse::kExit:
          result.kind = StreamResult::kExited;
          result.exit_code = ExitCodeFor(response.exit());
          result.exit = response.exit();
          done = true;
          break;
        case pb::ConnectResponse::FRAME_NOT_SET:
          break;
      }
    }
    if (done) {
      // The exit came (or the output is wrong): the rest of the stream does
      // not matter; cancelling is how a caller ends a stream it is done with.
      context.TryCancel();
      Unpublish();
      stream->Finish();
      return result;
    }
    const grpc::Status status = stream->Finish();
    context.TryCancel();  // a Write blocked in the other thread returns
    Unpublish();
    return Ended(status, connected);
  }

  // Makes `stream` the one the other thread sends on, and sends the terminal
  // size if stdin is a terminal.
  void Publish(Stream* stream) {
    absl::MutexLock lock(&mu_);
    stream_ = stream;
    ++generation_;
    pb::ConnectRequest request;
    if (TerminalSize(request.mutable_resize())) stream_->Write(request);
  }

  void Unpublish() {
    {
      absl::MutexLock lock(&ack_mu_);
      ack_stub_ = nullptr;
    }
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
  }

  // The size of the terminal on stdin; false if stdin is not one.
  bool TerminalSize(berth::agent::v1::TerminalSize* size) {
    winsize ws;
    if (ioctl(stdin_fd_, TIOCGWINSZ, &ws) != 0) return false;
    size->set_rows(ws.ws_row);
    size->set_columns(ws.ws_col);
    return true;
  }

  // Acknowledges the output written so far: by AckOutput, out of band of
  // the stream, where an ack would wait behind stdin the process has not
  // read while the process waits for room for its output (a deadlock). At
  // most one AckOutput is in flight; when it completes, the latest offsets
  // go if they advanced. A proxy without AckOutput gets acks on the stream.
  void Ack() {
    {
      absl::MutexLock lock(&ack_mu_);
      if (!stream_acks_) {
        ack_wanted_ = true;  // the acker thread sends it
        return;
      }
    }
    AckOnStream();
  }

  // The acker thread: sends AckOutput with the offsets written so far
  // whenever Ack() asked for it and they advanced; one call at a time, so
  // the acks that come meanwhile go as one.
  void AckLoop() {
    uint64_t sent_stdout = 0, sent_stderr = 0;
    while (true) {
      std::shared_ptr<pb::ProxyService::Stub> stub;
      {
        absl::MutexLock lock(&ack_mu_);
        const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ack_mu_) {
          return ack_stopping_ || (ack_wanted_ && ack_stub_ != nullptr);
        };
        ack_mu_.Await(absl::Condition(&ready));
        if (ack_stopping_) return;
        ack_wanted_ = false;
        stub = ack_stub_;
      }
      const uint64_t out = stdout_.written();
      const uint64_t err = stderr_.written();
      if (out <= sent_stdout && err <= sent_stderr) continue;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kAckTimeout));
      pb::AckOutputRequest request;
      request.set_token(options_.token);
      request.set_stdout_offset(out);
      request.set_stderr_offset(err);
      pb::AckOutputResponse response;
      {
        absl::MutexLock lock(&ack_mu_);
        if (ack_stopping_) return;
        ack_context_ = &context;
      }
      const grpc::Status status = stub->AckOutput(&context, request, &response);
      {
        absl::MutexLock lock(&ack_mu_);
        ack_context_ = nullptr;
      }
      if (status.ok()) {
        sent_stdout = out;
        sent_stderr = err;
        continue;
      }
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        {
          absl::MutexLock lock(&ack_mu_);
          stream_acks_ = true;  // an older proxy
        }
        AckOnStream();
        return;
      }
      // Sent again, after a while: the agent's window may be full, so that
      // no more output (and no more Ack()) comes. (A reconnecting shim's
      // hello carries its offsets anyway.)
      VLOG(1) << "AckOutput: " << status.error_message();
      absl::MutexLock lock(&ack_mu_);
      ack_wanted_ = true;
      ack_mu_.AwaitWithTimeout(absl::Condition(&ack_stopping_), kAckRetryDelay);
    }
  }

  // Acknowledges on the stream; if the other thread is busy sending (a Write
  // can block on flow control), leaves it to that thread, which sends the
  // latest offsets after its Write. Looks again after unlocking: an ack
  // asked for while this thread held mu_ (its TryLock failed against this
  // thread) is this thread's to send, or it would be lost.
  void AckOnStream() {
    ack_pending_.store(true);
    while (ack_pending_.load()) {
      if (!mu_.TryLock()) return;  // the holder sends it when it unlocks
      if (ack_pending_.exchange(false)) SendAckLocked();
      mu_.Unlock();
    }
  }

  // Sends the ack that Ack() left pending while this thread held mu_. The
  // check comes after unlocking, so that an Ack() whose TryLock failed
  // against this thread is always seen.
  void FlushPendingAck() {
    while (ack_pending_.load()) {
      absl::MutexLock lock(&mu_);
      if (ack_pending_.exchange(false)) SendAckLocked();
    }
  }

  void SendAckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stream_ == nullptr) return;  // the next hello carries the offsets
    pb::ConnectRequest request;
    berth::agent::v1::OutputAck* ack = request.mutable_ack();
    ack->set_stdout_offset(stdout_.written());
    ack->set_stderr_offset(stderr_.written());
    stream_->Write(request);
  }

  // Sends `request` on the current stream, waiting for one while there is
  // none and sending again on the next one if the stream fails under it.
  // False once the shim is stopping.
  bool Send(const pb::ConnectRequest& request) {
    const bool sent = SendOnSomeStream(request);
    FlushPendingAck();
    return sent;
  }

  bool SendOnSomeStream(const pb::ConnectRequest& request) {
    absl::MutexLock lock(&mu_);
    uint64_t failed = 0;  // generations start at 1
    while (true) {
      mu_.Await(absl::Condition(
          +[](std::pair<Shim*, uint64_t>* arg) {
            Shim* shim = arg->first;
            shim->mu_.AssertReaderHeld();
            return shim->stopping_ || (shim->stream_ != nullptr &&
                                       shim->generation_ != arg->second);
          },
          new_pair(failed)));
      if (stopping_) return false;
      const uint64_t generation = generation_;
      if (stream_->Write(request)) return true;
      failed = generation;
    }
  }

  // Storage for Send's wait condition argument (one Send at a time: only
  // the up thread sends).
  std::pair<Shim*, uint64_t>* new_pair(uint64_t failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    wait_arg_ = {this, failed};
    return &wait_arg_;
  }

  // The up thread: stdin and signals to the proxy.
  void UpLoop() {
    bool stdin_open = true;
    pb::ConnectRequest request;
    while (true) {
      pollfd fds[4];
      nfds_t n = 0;
      fds[n++] = {wake_fd_.get(), POLLIN, 0};
      const int signal_index = signal_fd_.valid() ? static_cast<int>(n) : -1;
      if (signal_fd_.valid()) fds[n++] = {signal_fd_.get(), POLLIN, 0};
      const int stdin_index = stdin_open ? static_cast<int>(n) : -1;
      if (stdin_open) fds[n++] = {stdin_fd_, POLLIN, 0};
      const int resize_index = attach_ != nullptr ? static_cast<int>(n) : -1;
      if (attach_ != nullptr) fds[n++] = {attach_->resize_fd(), POLLIN, 0};
      if (poll(fds, n, -1) < 0) {
        if (errno == EINTR) continue;
        LOG(ERROR) << "berth-shim: poll: " << std::strerror(errno);
        return;
      }
      if (fds[0].revents != 0) return;  // stopping
      if (resize_index >= 0 && fds[resize_index].revents != 0) {
        // A terminal size an attached caller sent.
        uint32_t rows = 0, columns = 0;
        if (attach_->TakeResize(&rows, &columns)) {
          request.Clear();
          request.mutable_resize()->set_rows(rows);
          request.mutable_resize()->set_columns(columns);
          VLOG(1) << "resize from an attached caller: " << rows << "x"
                  << columns;
          if (!Send(request)) return;
          request.Clear();
        }
      }
      if (signal_index >= 0 && fds[signal_index].revents != 0) {
        signalfd_siginfo info;
        while (read(signal_fd_.get(), &info, sizeof(info)) ==
               static_cast<ssize_t>(sizeof(info))) {
          request.Clear();
          if (static_cast<int>(info.ssi_signo) == SIGWINCH) {
            if (!TerminalSize(request.mutable_resize())) continue;
          } else {
            request.set_signal(static_cast<int32_t>(info.ssi_signo));
          }
          VLOG(1) << "forwarding signal " << info.ssi_signo;
          if (!Send(request)) return;
        }
      }
      if (stdin_index >= 0 && fds[stdin_index].revents != 0) {
        std::string* data = request.mutable_stdin();
        data->resize(kStdinFrameSize);
        ssize_t got;
        do {
          got = read(stdin_fd_, data->data(), data->size());
        } while (got < 0 && errno == EINTR);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (got > 0) {
          data->resize(static_cast<size_t>(got));
          if (!Send(request)) return;
        } else {
          // EOF, or an error reading (EIO from a hung-up terminal, EBADF
          // for no stdin at all): either way the end of stdin.
          if (got < 0) {
            VLOG(1) << "reading stdin: " << std::strerror(errno);
          }
          stdin_open = false;
          request.mutable_stdin_close();
          if (!Send(request)) return;
        }
        request.Clear();
      }
    }
  }

  const ShimOptions options_;
  // The process's stdin: options_.stdin_fd, or the attached callers'.
  int stdin_fd_;
  // Serves the attach socket (options_.attach_fd), if any.
  std::unique_ptr<AttachServer> attach_;
  OutputSink stdout_;
  OutputSink stderr_;
  base::UniqueFd signal_fd_;
  base::UniqueFd wake_fd_;
  std::atomic<bool> ack_pending_{false};

  absl::Mutex ack_mu_;
  // The stub of the stream the proxy accepted; null between streams.
  std::shared_ptr<pb::ProxyService::Stub> ack_stub_ ABSL_GUARDED_BY(ack_mu_);
  // Output was written since the acker thread last looked.
  bool ack_wanted_ ABSL_GUARDED_BY(ack_mu_) = false;
  bool ack_stopping_ ABSL_GUARDED_BY(ack_mu_) = false;
  // The AckOutput in flight, cancelled when the shim stops.
  grpc::ClientContext* ack_context_ ABSL_GUARDED_BY(ack_mu_) = nullptr;
  // The proxy has no AckOutput: acks go on the stream.
  bool stream_acks_ ABSL_GUARDED_BY(ack_mu_) = false;

  absl::Mutex mu_;
  // The stream being read, once the proxy accepted the hello; null between
  // streams. Only used with mu_ held; owned by ConnectLoop's thread.
  Stream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Counts the streams published.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::pair<Shim*, uint64_t> wait_arg_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::string> TakeTokenFromEnvironment() {
  const size_t name_length = std::strlen(kTokenEnvVar);
  std::string token;
  std::vector<char*> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    char* variable = *entry;
    if (std::strncmp(variable, kTokenEnvVar, name_length) == 0 &&
        variable[name_length] == '=') {
      if (entries.empty()) token = variable + name_length + 1;
      entries.push_back(variable);
    }
  }
  if (entries.empty()) {
    return absl::NotFoundError(absl::StrCat(kTokenEnvVar, " is not set"));
  }
  // Out of environ first (children do not inherit it), then wiped where it
  // sits: the strings of the initial environment are what /proc/PID/environ
  // shows for the rest of the process's life.
  unsetenv(kTokenEnvVar);
  for (char* variable : entries) {
    std::memset(variable, 0, std::strlen(variable));
  }
  return token;
}

absl::StatusOr<std::string> ReadTokenFromFd(int fd) {
  base::UniqueFd owned(fd);
  std::string token;
  char buffer[512];
  absl::Status error;
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = absl::InvalidArgumentError(
          absl::StrCat("cannot read the token from descriptor ", fd,
                       " (--token_fd): ", std::strerror(errno)));
      break;
    }
    if (n == 0) break;
    token.append(buffer, static_cast<size_t>(n));
    if (token.size() > kMaxTokenSize) {
      error = absl::InvalidArgumentError(absl::StrCat(
          "the token from descriptor ", fd, " (--token_fd) is longer than ",
          kMaxTokenSize, " bytes"));
      break;
    }
  }
  owned.reset();
  if (!error.ok()) return error;
  absl::StripTrailingAsciiWhitespace(&token);
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("descriptor ", fd, " (--token_fd) gave an empty token"));
  }
  return token;
}

const std::vector<int>& ForwardedSignals() {
  static const std::vector<int>* const kSignals =
      new std::vector<int>{SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM,
                           SIGTERM, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU};
  return *kSignals;
}

absl::Status BlockShimSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : ForwardedSignals()) sigaddset(&set, signal);
  sigaddset(&set, SIGWINCH);
  if (const int error = pthread_sigmask(SIG_BLOCK, &set, nullptr); error != 0) {
    return absl::InternalError(
        absl::StrCat("cannot block signals: ", std::strerror(error)));
  }
  if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
    return absl::InternalError(
        absl::StrCat("cannot ignore SIGPIPE: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int ExitCodeFor(const berth::agent::v1::ProcessExit& exit) {
  if (exit.signal() > 0) return 128 + exit.signal();
  return exit.exit_code() & 0xff;
}

absl::Status OutputSink::Write(uint64_t offset, absl::string_view data) {
  const uint64_t written = written_.load(std::memory_order_relaxed);
  if (offset > written) {
    return absl::DataLossError(
        absl::StrCat(name_, " chunk at offset ", offset, " leaves a gap: only ",
                     written, " bytes of ", name_, " were written"));
  }
  const uint64_t skip = std::min<uint64_t>(written - offset, data.size());
  data.remove_prefix(static_cast<size_t>(skip));
  if (data.empty()) return absl::OkStatus();
  if (!broken_ && log_ != nullptr) {
    if (!log_->Write(data.data(), data.size())) {
      broken_ = true;
      LOG(ERROR) << "cannot write " << name_ << " to " << log_->CurrentPath()
                 << " (" << std::strerror(errno)
                 << "); discarding the rest of it";
    }
  } else if (!broken_) {
    if (absl::Status written = base::WriteAll(fd_, data, name_);
        !written.ok()) {
      broken_ = true;
      VLOG(1) << written.message() << "; discarding the rest of it";
    }
  }
  written_.store(written + data.size(), std::memory_order_release);
  return absl::OkStatus();
}

int RunShim(const ShimOptions& options) {
  Shim shim(options);
  return shim.Run();
}

}  // namespace shim
}  // namespace berth
