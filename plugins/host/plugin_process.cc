#include "plugins/host/plugin_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/path.h"
#include "base/process.h"
#include "base/subprocess.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "glog/logging.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_lifetime.h"
#include "plugins/host/reattach_config.h"
#include "plugins/sdk/handshake.h"
#include "services/common/dial.h"
#include "services/common/status.h"
#include "services/common/unix_socket.h"

extern char** environ;

namespace berth::plugin::host {
namespace {

using base::DescribeWaitStatus;
using base::Dirname;
using base::PidfdOpen;
using base::PidfdSendSignal;
using base::ProcStat;
using base::ReadProcStat;
using base::Spawn;

// Lines of the plugin's stderr kept for error messages.
constexpr size_t kStderrTailLines = 10;
// A handshake line longer than this is refused (and quoted up to it).
constexpr size_t kMaxHandshakeLineBytes = 512;
// A line longer than this is cut (and the rest forwarded as further lines).
constexpr size_t kMaxLineBytes = 64 * 1024;
// How long Launch waits for the process to end after it closed its stdout
// without a handshake line, so that the error says how it ended.
constexpr absl::Duration kExitAfterStdoutClosed = absl::Seconds(1);
// The API package a driver plugin must list in its capabilities.
constexpr char kDriverApi[] = "berth.driver.v1";

// The real path of `path`, or nullopt.
std::optional<std::string> RealPath(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return std::nullopt;
  std::string result(real);
  free(real);
  return result;
}

// The host's environment with `overrides` replacing or adding variables.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  absl::flat_hash_set<std::string> keys;
  for (const auto& [key, value] : overrides) keys.insert(key);
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view variable(*entry);
    const size_t equals = variable.find('=');
    if (keys.contains(variable.substr(0, equals))) continue;
    env.emplace_back(variable);
  }
  for (const auto& [key, value] : overrides) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  return env;
}

}  // namespace

std::string PluginExit::ToString() const {
  if (!status_known) {
    return "exited (status unknown: not a child of this process)";
  }
  if (signal != 0) {
    const char* name = strsignal(signal);
    return absl::StrCat("was killed by signal ", signal, " (",
                        name != nullptr ? name : "unknown", ")");
  }
  return absl::StrCat("exited with code ", exit_code);
}

PluginProcess::PluginProcess(std::string name, std::string binary, pid_t pid,
                             uint64_t start_time, base::UniqueFd pidfd,
                             bool is_child, base::UniqueFd stdout_fd,
                             base::UniqueFd stderr_fd)
    : name_(std::move(name)),
      binary_(std::move(binary)),
      pid_(pid),
      start_time_(start_time),
      pidfd_(std::move(pidfd)),
      is_child_(is_child),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      stdout_fd_(std::move(stdout_fd)),
      stderr_fd_(std::move(stderr_fd)),
      lifetime_(std::make_shared<PluginLifetime>(name_)) {
  // Without an eventfd the monitor still ends when the process does; only a
  // plugin that cannot be killed would then hold JoinMonitor.
  PLOG_IF(ERROR, !wake_fd_.valid()) << "eventfd for plugin " << name_;
  monitor_ = std::thread([this] { MonitorLoop(); });
}

PluginProcess::~PluginProcess() { Stop(); }

absl::StatusOr<std::unique_ptr<PluginProcess>> PluginProcess::Launch(
    const LaunchOptions& options) {
  if (options.name.empty()) {
    return absl::InvalidArgumentError("plugin launch: name is empty");
  }
  const std::string what = absl::StrCat("plugin ", options.name);
  if (options.binary.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": binary is empty"));
  }
  if (options.socket_dir.empty() || options.socket_dir[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": socket directory \"", options.socket_dir,
                     "\" is not an absolute path"));
  }
  if (options.app_protocol_versions.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no app protocol version accepted"));
  }
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat(what, ": cannot execute ", options.binary));
  }
  if (absl::Status dir = MakeSocketDirectory(
          absl::StrCat(options.socket_dir, "/", options.name, ".sock"));
      !dir.ok()) {
    return absl::Status(
        dir.code(), absl::StrCat(what, ": socket directory: ", dir.message()));
  }
  const absl::Time deadline = absl::Now() + options.start_timeout;

  int stdout_pipe[2];
  int stderr_pipe[2];
  if (pipe2(stdout_pipe, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, ": pipe"));
  }
  base::UniqueFd stdout_read(stdout_pipe[0]);
  base::UniqueFd stdout_write(stdout_pipe[1]);
  if (pipe2(stderr_pipe, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, ": pipe"));
  }
  base::UniqueFd stderr_read(stderr_pipe[0]);
  base::UniqueFd stderr_write(stderr_pipe[1]);
  std::vector<std::pair<std::string, std::string>> env = options.env;
  env.emplace_back(kMagicCookieKey, kMagicCookieValue);
  env.emplace_back(kSocketDirEnv, options.socket_dir);
  env.emplace_back(kProtocolVersionsEnv,
                   absl::StrJoin(options.app_protocol_versions, ","));
  absl::StatusOr<pid_t> pid =
      Spawn(options.binary, options.args, ChildEnvironment(env),
            /*stdin_fd=*/-1, stdout_write.get(), stderr_write.get());
  // The plugin has its copies: the monitor sees end of file when it closes
  // them.
  stdout_write.reset();
  stderr_write.reset();
  if (!pid.ok()) {
    return absl::Status(pid.status().code(),
                        absl::StrCat(what, ": ", pid.status().message()));
  }
  // Our child, not yet reaped: its pid cannot have been reused.
  base::UniqueFd pidfd(PidfdOpen(*pid));
  const int pidfd_errno = errno;
  absl::StatusOr<ProcStat> stat = ReadProcStat(*pid);
  if (!pidfd.valid() || !stat.ok()) {
    const absl::Status error =
        !pidfd.valid() ? absl::ErrnoToStatus(pidfd_errno, "pidfd_open")
                       : stat.status();
    kill(-*pid, SIGKILL);
    kill(*pid, SIGKILL);
    int wait_status;
    while (waitpid(*pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    return absl::Status(error.code(),
                        absl::StrCat(what, ": ", options.binary, " (pid ", *pid,
                                     "): ", error.message()));
  }
  fcntl(stdout_read.get(), F_SETFL, O_NONBLOCK);
  fcntl(stderr_read.get(), F_SETFL, O_NONBLOCK);
  VLOG(1) << what << ": started " << options.binary << " (pid " << *pid << ")";

  std::unique_ptr<PluginProcess> process(new PluginProcess(
      options.name, options.binary, *pid, stat->start_time, std::move(pidfd),
      /*is_child=*/true, std::move(stdout_read), std::move(stderr_read)));
  process->socket_dir_ = options.socket_dir;
  if (absl::Status launched = process->CompleteLaunch(options, deadline);
      !launched.ok()) {
    process->Abort(/*group=*/true);
    return launched;
  }
  LOG(INFO) << process->Describe() << " serves on " << process->socket_path_;
  return process;
}

absl::Status PluginProcess::CompleteLaunch(const LaunchOptions& options,
                                           absl::Time deadline) {
  // 1. The handshake line, or the end of the process, whichever comes first.
  std::optional<std::string> line;
  std::optional<std::string> exited;  // how, when it has
  bool stdout_closed = false;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(&launch_ready_), deadline);
    if (!exited_ && !handshake_line_.has_value() && stdout_closed_) {
      // Most likely on its way out: say how it ended if it does so soon.
      mu_.AwaitWithTimeout(absl::Condition(&exited_), kExitAfterStdoutClosed);
    }
    line = handshake_line_;
    if (exited_) exited = exit_.ToString();
    stdout_closed = stdout_closed_;
  }
  if (exited.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), " ", *exited,
                     line.has_value() ? " right after its handshake line"
                                      : " before printing its handshake line",
                     StderrTail()));
  }
  if (!line.has_value()) {
    if (stdout_closed) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), " closed its stdout without printing a handshake line",
          StderrTail()));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        Describe(), " printed no handshake line within ",
        absl::FormatDuration(options.start_timeout), StderrTail()));
  }

  // 2. The line itself (a real one is short: a socket path is at most 107
  // bytes).
  if (line->size() > kMaxHandshakeLineBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), ": bad plugin handshake line \"",
                     absl::string_view(*line).substr(0, kMaxHandshakeLineBytes),
                     "...\": longer than ", kMaxHandshakeLineBytes, " bytes"));
  }
  absl::StatusOr<Handshake> handshake = ParseHandshake(*line);
  if (!handshake.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), ": ", handshake.status().message()));
  }
  // 3. The socket: inside the socket directory. Known from here on, so that
  // a failure removes it.
  const std::optional<std::string> real_dir = RealPath(options.socket_dir);
  const std::optional<std::string> socket_parent =
      RealPath(Dirname(handshake->address));
  if (!real_dir.has_value() || !socket_parent.has_value() ||
      (*socket_parent != *real_dir &&
       !absl::StartsWith(*socket_parent, absl::StrCat(*real_dir, "/")))) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), " put its socket ", handshake->address,
                     " outside the socket directory ", options.socket_dir));
  }
  socket_path_ = handshake->address;

  // 4. The versions.
  if (handshake->core_version != kCoreProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(), " speaks handshake core version ", handshake->core_version,
        "; this host speaks ", kCoreProtocolVersion));
  }
  bool accepted = false;
  for (int version : options.app_protocol_versions) {
    accepted = accepted || version == handshake->app_version;
  }
  if (!accepted) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), " speaks app protocol version ",
                     handshake->app_version, "; this host accepts ",
                     absl::StrJoin(options.app_protocol_versions, ", ")));
  }

  // 5. Dial, health, capabilities.
  return Connect(deadline);
}

absl::Status PluginProcess::Connect(absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket_path_, deadline - absl::Now());
  if (!channel.ok()) {
    return absl::Status(
        channel.status().code(),
        absl::StrCat(Describe(), ": ", channel.status().message(),
                     ExitContext()));
  }
  channel_ = *channel;

  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(kHealthServiceName);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        grpc::health::v1::Health::NewStub(channel_)->Check(&context, request,
                                                           &response);
    if (!status.ok()) {
      const absl::Status error = FromGrpcStatus(status);
      return absl::Status(
          error.code() == absl::StatusCode::kNotFound
              ? absl::StatusCode::kFailedPrecondition
              : error.code(),
          absl::StrCat(Describe(), ": health check of service \"",
                       kHealthServiceName, "\" on socket ", socket_path_,
                       " failed: ", error.message(), ExitContext()));
    }
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), " is not healthy on socket ", socket_path_,
          ": service \"", kHealthServiceName, "\" is ",
          grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
              response.status()),
          ExitContext()));
    }
  }

  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    plugin::v1::GetCapabilitiesResponse response;
    const grpc::Status status =
        plugin::v1::PluginService::NewStub(channel_)->GetCapabilities(
            &context, plugin::v1::GetCapabilitiesRequest(), &response);
    if (!status.ok()) {
      const absl::Status error = FromGrpcStatus(status);
      return absl::Status(
          error.code() == absl::StatusCode::kUnimplemented
              ? absl::StatusCode::kFailedPrecondition
              : error.code(),
          absl::StrCat(Describe(), ": PluginService.GetCapabilities on ",
                       socket_path_, " failed: ", error.message(),
                       ExitContext()));
    }
    std::vector<std::string> apis;
    bool speaks_driver = false;
    for (const plugin::v1::ApiVersion& api : response.api_versions()) {
      apis.push_back(absl::StrCat(api.package(), " r", api.revision()));
      speaks_driver = speaks_driver || api.package() == kDriverApi;
    }
    if (!speaks_driver) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), " does not speak ", kDriverApi, " (it speaks: ",
          apis.empty() ? "nothing" : absl::StrJoin(apis, ", "), ")"));
    }
  }

  DriverClient::Options client_options;
  client_options.socket_path = socket_path_;
  client_ = std::make_shared<DriverClient>(channel_, lifetime_, client_options);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PluginProcess>> PluginProcess::Reattach(
    const ReattachConfig& config, absl::Duration timeout) {
  if (config.name.empty()) {
    return absl::InvalidArgumentError("plugin reattach: name is empty");
  }
  const std::string what = absl::StrCat("plugin ", config.name);
  if (config.pid <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": bad pid ", config.pid));
  }
  if (config.socket_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": socket path is empty"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  // The pidfd first, then the start time: if the start time matches, the
  // pidfd is the plugin's and stays so, whatever happens to the pid later.
  base::UniqueFd pidfd(PidfdOpen(config.pid));
  if (!pidfd.valid()) {
    const int err = errno;
    if (err == ESRCH) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": pid ", config.pid, " not found (the plugin exited)"));
    }
    return absl::ErrnoToStatus(
        err, absl::StrCat(what, ": pidfd_open of pid ", config.pid));
  }
  absl::StatusOr<ProcStat> stat = ReadProcStat(config.pid);
  if (!stat.ok()) {
    if (absl::IsNotFound(stat.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": pid ", config.pid, " not found (the plugin exited)"));
    }
    return absl::Status(stat.status().code(),
                        absl::StrCat(what, ": ", stat.status().message()));
  }
  if (stat->start_time != config.start_time) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": pid ", config.pid, " was reused (start time ",
                     stat->start_time, ", expected ", config.start_time, ")"));
  }
  if (stat->state == 'Z' || stat->state == 'X') {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": pid ", config.pid, " has exited"));
  }
  std::unique_ptr<PluginProcess> process(
      new PluginProcess(config.name, /*binary=*/"", config.pid,
                        stat->start_time, std::move(pidfd), /*is_child=*/false,
                        /*stdout_fd=*/base::UniqueFd(),
                        /*stderr_fd=*/base::UniqueFd()));
  process->socket_dir_ = Dirname(config.socket_path);
  process->socket_path_ = config.socket_path;
  if (absl::Status connected = process->Connect(deadline); !connected.ok()) {
    process->Abort(/*group=*/false);
    return absl::Status(
        connected.code(),
        absl::StrCat(connected.message(), "; killed it (pid ", config.pid,
                     ") so that it can be launched again"));
  }
  LOG(INFO) << process->Describe() << " reattached on "
            << process->socket_path_;
  return process;
}

ReattachConfig PluginProcess::reattach_config() const {
  ReattachConfig config;
  config.name = name_;
  config.socket_path = socket_path_;
  config.pid = pid_;
  config.start_time = start_time_;
  return config;
}

std::optional<PluginExit> PluginProcess::exit_status() const {
  absl::MutexLock lock(&mu_);
  if (!exited_) return std::nullopt;
  return exit_;
}

std::optional<PluginExit> PluginProcess::Wait(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&exited_), timeout);
  if (!exited_) return std::nullopt;
  return exit_;
}

bool PluginProcess::WaitExited(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&exited_), timeout);
}

PluginExit PluginProcess::Stop(absl::Duration grace) {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return FinalExit();
  lifetime_->MarkGone("stopped by the host");
  if (!WaitExited(absl::ZeroDuration())) {
    if (channel_ != nullptr) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + grace));
      plugin::v1::ShutdownRequest request;
      request.mutable_grace_period()->set_seconds(absl::ToInt64Seconds(grace));
      request.mutable_grace_period()->set_nanos(static_cast<int32_t>(
          absl::ToInt64Nanoseconds(grace % absl::Seconds(1))));
      plugin::v1::ShutdownResponse response;
      const grpc::Status status =
          plugin::v1::PluginService::NewStub(channel_)->Shutdown(
              &context, request, &response);
      VLOG(1) << Describe() << ": Shutdown: "
              << (status.ok() ? "OK" : status.error_message());
    }
    const absl::Time deadline = absl::Now() + grace;
    if (channel_ != nullptr) {
      // A gRPC server shutting down waits for its clients to close their
      // connections, which a client does once it reads the server's GOAWAY;
      // but an idle C++ client reads nothing until its backup poller runs
      // (every 5 s). Watching the channel reads it: the connection leaves
      // READY and is closed.
      channel_->WaitForStateChange(GRPC_CHANNEL_READY,
                                   absl::ToChronoTime(deadline));
    }
    if (!WaitExited(deadline - absl::Now())) {
      LOG(WARNING) << Describe() << " did not exit within "
                   << absl::FormatDuration(grace) << " of Shutdown; killing it";
      if (!SignalProcess(SIGKILL)) {
        // Nothing more to do (EPERM for a plugin of another user): leave it.
        JoinMonitor();
        stopped_ = true;
        return FinalExit();
      }
      WaitExited(absl::InfiniteDuration());
    }
  }
  JoinMonitor();
  RemoveStaleSocket();
  stopped_ = true;
  const PluginExit exit = FinalExit();
  VLOG(1) << Describe() << " stopped: " << exit.ToString();
  return exit;
}

PluginExit PluginProcess::Kill() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return FinalExit();
  if (SignalProcess(SIGKILL)) WaitExited(absl::InfiniteDuration());
  JoinMonitor();
  lifetime_->MarkGone("killed by the host");
  RemoveStaleSocket();
  stopped_ = true;
  return FinalExit();
}

void PluginProcess::Abort(bool group) {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  {
    // While the leader is unreaped its pid, hence its process group id, is
    // not reused: killing the group is safe until the monitor reaps it.
    absl::MutexLock lock(&mu_);
    if (group && is_child_ && !reaped_) kill(-pid_, SIGKILL);
  }
  if (SignalProcess(SIGKILL)) WaitExited(absl::InfiniteDuration());
  JoinMonitor();
  lifetime_->MarkGone("its launch failed");
  RemoveStaleSocket();
  stopped_ = true;
}

bool PluginProcess::SignalProcess(int signal) {
  if (PidfdSendSignal(pidfd_.get(), signal) == 0) return true;
  const int err = errno;
  if (err == ESRCH) return true;  // already gone (a zombie or reaped)
  LOG(ERROR) << Describe() << ": cannot send signal " << signal << ": "
             << strerror(err);
  return false;
}

void PluginProcess::JoinMonitor() {
  if (!monitor_.joinable()) return;
  if (!WaitExited(absl::ZeroDuration()) && wake_fd_.valid()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
  }
  monitor_.join();
}

void PluginProcess::RemoveStaleSocket() {
  // Before the handshake named the socket, the conventional one
  // (SOCKET_DIR/NAME.sock, as plugins/sdk makes it) is the plugin's.
  const std::string path = !socket_path_.empty() ? socket_path_
                           : !socket_dir_.empty()
                               ? absl::StrCat(socket_dir_, "/", name_, ".sock")
                               : "";
  if (path.empty()) return;
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(path);
  if (state.ok() && *state == SocketPathState::kStale) {
    if (unlink(path.c_str()) == 0) {
      VLOG(1) << Describe() << ": removed its stale socket " << path;
    }
  }
}

PluginExit PluginProcess::FinalExit() const {
  absl::MutexLock lock(&mu_);
  return exit_;
}

std::string PluginProcess::Describe() const {
  if (binary_.empty()) {
    return absl::StrCat("plugin ", name_, " (pid ", pid_, ")");
  }
  return absl::StrCat("plugin ", name_, ": ", binary_, " (pid ", pid_, ")");
}

std::string PluginProcess::StderrTail() const {
  absl::MutexLock lock(&mu_);
  if (stderr_tail_.empty()) return "";
  std::string tail = "; the last lines of its stderr:";
  for (const std::string& line : stderr_tail_) {
    absl::StrAppend(&tail, "\n  ", line);
  }
  return tail;
}

std::string PluginProcess::ExitContext() const {
  std::string how;
  {
    absl::MutexLock lock(&mu_);
    if (!exited_) return "";
    how = exit_.ToString();
  }
  return absl::StrCat("; it ", how, StderrTail());
}

void PluginProcess::MonitorLoop() {
  std::string stdout_partial;
  std::string stderr_partial;
  while (true) {
    pollfd fds[4];
    nfds_t count = 0;
    fds[count++] = {pidfd_.get(), POLLIN, 0};
    const int wake_index = wake_fd_.valid() ? static_cast<int>(count) : -1;
    if (wake_fd_.valid()) fds[count++] = {wake_fd_.get(), POLLIN, 0};
    const int stdout_index = stdout_fd_.valid() ? static_cast<int>(count) : -1;
    if (stdout_fd_.valid()) fds[count++] = {stdout_fd_.get(), POLLIN, 0};
    const int stderr_index = stderr_fd_.valid() ? static_cast<int>(count) : -1;
    if (stderr_fd_.valid()) fds[count++] = {stderr_fd_.get(), POLLIN, 0};
    if (poll(fds, count, -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << Describe() << ": poll";
      break;
    }
    if (stdout_index >= 0 && fds[stdout_index].revents != 0) {
      ReadPipe(&stdout_fd_, /*is_stderr=*/false, &stdout_partial);
    }
    if (stderr_index >= 0 && fds[stderr_index].revents != 0) {
      ReadPipe(&stderr_fd_, /*is_stderr=*/true, &stderr_partial);
    }
    if (fds[0].revents != 0) {
      // Everything it wrote before it ended is in the pipes now: forward it
      // all before saying it ended. (A child of the plugin holding the pipes
      // open is not waited for.)
      while (stdout_fd_.valid() &&
             ReadPipe(&stdout_fd_, false, &stdout_partial)) {
      }
      while (stderr_fd_.valid() &&
             ReadPipe(&stderr_fd_, true, &stderr_partial)) {
      }
      if (!stdout_partial.empty()) HandleLine(false, stdout_partial);
      if (!stderr_partial.empty()) HandleLine(true, stderr_partial);
      stdout_fd_.reset();
      stderr_fd_.reset();
      OnExit();
      return;
    }
    if (wake_index >= 0 && fds[wake_index].revents != 0) break;
  }
  // Told to stop while the process runs on.
  stdout_fd_.reset();
  stderr_fd_.reset();
  absl::MutexLock lock(&mu_);
  stdout_closed_ = true;
  launch_ready_ = true;
}

bool PluginProcess::ReadPipe(base::UniqueFd* fd, bool is_stderr,
                             std::string* partial) {
  char buffer[16 * 1024];
  const ssize_t n = read(fd->get(), buffer, sizeof(buffer));
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && errno == EAGAIN) return false;
  if (n <= 0) {
    if (n < 0) PLOG(WARNING) << Describe() << ": reading its output";
    if (!partial->empty()) HandleLine(is_stderr, *partial);
    partial->clear();
    fd->reset();
    if (!is_stderr) {
      absl::MutexLock lock(&mu_);
      stdout_closed_ = true;
      launch_ready_ = true;
    }
    return false;
  }
  partial->append(buffer, n);
  size_t start = 0;
  while (true) {
    const size_t newline = partial->find('\n', start);
    if (newline == std::string::npos) break;
    HandleLine(is_stderr,
               absl::string_view(*partial).substr(start, newline - start));
    start = newline + 1;
  }
  partial->erase(0, start);
  while (partial->size() > kMaxLineBytes) {
    HandleLine(is_stderr, absl::string_view(*partial).substr(0, kMaxLineBytes));
    partial->erase(0, kMaxLineBytes);
  }
  return true;
}

void PluginProcess::HandleLine(bool is_stderr, absl::string_view line) {
  absl::ConsumeSuffix(&line, "\r");
  if (is_stderr) {
    LOG(INFO) << "[plugin " << name_ << "] " << line;
    absl::MutexLock lock(&mu_);
    stderr_tail_.emplace_back(line);
    if (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
    return;
  }
  if (!seen_handshake_line_) {
    seen_handshake_line_ = true;
    absl::MutexLock lock(&mu_);
    handshake_line_ = std::string(line);
    launch_ready_ = true;
    return;
  }
  LOG(INFO) << "[plugin " << name_ << "] stdout: " << line;
}

void PluginProcess::OnExit() {
  PluginExit exit;
  {
    absl::MutexLock lock(&mu_);
    if (is_child_) {
      int wait_status = 0;
      pid_t reaped;
      do {
        reaped = waitpid(pid_, &wait_status, 0);
      } while (reaped < 0 && errno == EINTR);
      if (reaped == pid_) {
        reaped_ = true;
        exit.status_known = true;
        if (WIFEXITED(wait_status)) exit.exit_code = WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status)) exit.signal = WTERMSIG(wait_status);
      } else {
        PLOG(ERROR) << Describe() << ": waitpid";
      }
    }
  }
  // Gone before exited_: whoever sees the exit sees the plugin gone.
  lifetime_->MarkGone(absl::StrCat("pid ", pid_, " ", exit.ToString()));
  VLOG(1) << Describe() << " " << exit.ToString();
  absl::MutexLock lock(&mu_);
  exit_ = exit;
  exited_ = true;
  launch_ready_ = true;
}

}  // namespace berth::plugin::host
