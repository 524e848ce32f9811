// Launching a driver plugin (or finding a running one again) and watching its
// process: the host side of the launch handshake in plugins/sdk/handshake.h.
//
//   LaunchOptions options;
//   options.name = "exec";
//   options.binary = "/usr/lib/berth/berth-driver-exec";
//   options.socket_dir = "/run/berth/plugins";
//   absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
//       PluginProcess::Launch(options);
//   if (!plugin.ok()) return plugin.status();
//   persist((*plugin)->reattach_config().Serialize());
//   std::shared_ptr<DriverClient> driver = (*plugin)->client();
//   ...
//   (*plugin)->Stop();
//
// Once the plugin has exited, closed its socket or been stopped, every call of
// its DriverClient, and every stream of it already open, fails with
// ErrPluginShutdown (errors.h).

#ifndef PLUGINS_HOST_PLUGIN_PROCESS_H_
#define PLUGINS_HOST_PLUGIN_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "grpcpp/channel.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_lifetime.h"
#include "plugins/host/reattach_config.h"
#include "plugins/sdk/handshake.h"

namespace berth::plugin::host {

// How to launch a plugin.
struct LaunchOptions {
  // The name the plugin is known by on the node, e.g. "exec"; names it in
  // every log line and error.
  std::string name;
  // Path of the plugin's executable (not looked up on PATH).
  std::string binary;
  // Its arguments (argv[1...]); argv[0] is `binary`.
  std::vector<std::string> args;
  // The directory the plugin must put its socket in (kSocketDirEnv); created
  // 0750 if missing. A socket outside it is refused.
  std::string socket_dir;
  // Environment variables added to the host's own (and overriding them).
  std::vector<std::pair<std::string, std::string>> env;
  // How long the plugin has, from its start, to print its handshake line,
  // serve and report healthy.
  absl::Duration start_timeout = absl::Seconds(10);
  // App protocol versions this host accepts (kProtocolVersionsEnv).
  std::vector<int> app_protocol_versions = {kAppProtocolVersion};
};

// How a plugin process ended.
struct PluginExit {
  // False when the plugin was not this process's child (reattached): its exit
  // status is not ours to read.
  bool status_known = false;
  // The exit code, when it exited.
  int exit_code = 0;
  // The signal that killed it, or 0.
  int signal = 0;

  // "exited with code 0", "was killed by signal 9 (Killed)", "exited (status
  // unknown: not a child of this process)".
  std::string ToString() const;
};

// One running plugin process, launched or reattached, with a gRPC channel and
// a DriverClient to it. Stops the plugin when destroyed (see Stop).
//
// Thread-safe.
class PluginProcess {
 public:
  // How long Stop gives the plugin, by default, to answer Shutdown and then
  // again to exit.
  static constexpr absl::Duration kDefaultStopGrace = absl::Seconds(2);

  // Starts options.binary in its own process group, with stdin /dev/null, no
  // file descriptor but stdio inherited, and in its environment
  // kMagicCookieKey, kSocketDirEnv and kProtocolVersionsEnv; then, within
  // options.start_timeout:
  // - reads its handshake line (the first line on its stdout); a plugin that
  //   exits first is reported at once, with its exit code or signal and the
  //   last lines of its stderr;
  // - checks the versions (core kCoreProtocolVersion, app one of
  //   options.app_protocol_versions) and that the socket is inside
  //   options.socket_dir;
  // - dials the socket, checks grpc.health.v1 Check(kHealthServiceName) is
  //   SERVING and that PluginService.GetCapabilities lists berth.driver.v1.
  // The plugin's stderr is forwarded line by line to LOG(INFO)
  // "[plugin NAME] LINE" and its stdout after the handshake line to
  // "[plugin NAME] stdout: LINE", for as long as it runs.
  //
  // Errors name the plugin, its binary and (once started) its pid:
  // INVALID_ARGUMENT for bad options, NOT_FOUND / PERMISSION_DENIED when the
  // binary cannot be run, DEADLINE_EXCEEDED when no handshake line came in
  // time, FAILED_PRECONDITION for an early exit, a bad handshake line (quoted)
  // or versions, a socket outside the directory, a plugin not SERVING or not
  // speaking berth.driver.v1, UNAVAILABLE when its socket cannot be dialed. On
  // any failure the process and its process group are killed and reaped and
  // its socket, if it made one, removed.
  static absl::StatusOr<std::unique_ptr<PluginProcess>> Launch(
      const LaunchOptions& options);

  // Finds a plugin running since before this host started (after a restart
  // of berth-node) from what reattach_config() said of it: checks the pid
  // exists and has the same start time, dials the socket and checks health
  // and capabilities, within `timeout`. Errors:
  // - FAILED_PRECONDITION "plugin NAME: pid N not found (the plugin exited)",
  //   "plugin NAME: pid N has exited", or
  //   "plugin NAME: pid N was reused (start time X, expected Y)";
  // - as Launch's for the socket, health and capabilities; a plugin that
  //   fails them is killed (its identity is certain).
  // Its exit is detected through a pidfd; its exit status is not known (it is
  // not this process's child) and its stdio are not forwarded.
  static absl::StatusOr<std::unique_ptr<PluginProcess>> Reattach(
      const ReattachConfig& config, absl::Duration timeout = absl::Seconds(10));

  // Stop(kDefaultStopGrace).
  ~PluginProcess();

  PluginProcess(const PluginProcess&) = delete;
  PluginProcess& operator=(const PluginProcess&) = delete;

  const std::string& name() const { return name_; }
  // The executable; empty for a reattached plugin.
  const std::string& binary() const { return binary_; }
  pid_t pid() const { return pid_; }
  // Field 22 of /proc/PID/stat.
  uint64_t start_time() const { return start_time_; }
  const std::string& socket_path() const { return socket_path_; }
  // Whether this process launched the plugin (rather than reattached to it).
  bool launched() const { return is_child_; }

  // What the node persists to Reattach after a restart.
  ReattachConfig reattach_config() const;

  // The channel to the plugin's socket.
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  // The typed client; it stays usable (failing with ErrPluginShutdown) after
  // this object is gone.
  std::shared_ptr<DriverClient> client() const { return client_; }
  // Whether the plugin is still there.
  std::shared_ptr<PluginLifetime> lifetime() const { return lifetime_; }

  // How the process ended, once it has.
  std::optional<PluginExit> exit_status() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` for the process to end; returns exit_status().
  std::optional<PluginExit> Wait(absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the plugin: marks it gone (every call in flight fails with
  // ErrPluginShutdown), calls PluginService.Shutdown with a deadline of
  // `grace` (its tasks keep running), waits up to `grace` more for the
  // process to exit (pidfd), then kills it (SIGKILL, only the plugin's own
  // process) and reaps it, and removes its socket if it is left stale.
  // Returns how the process ended. Idempotent: later calls return the same.
  PluginExit Stop(absl::Duration grace = kDefaultStopGrace)
      ABSL_LOCKS_EXCLUDED(stop_mu_, mu_);

  // Kills the plugin at once (SIGKILL, no Shutdown), waits for it, reaps it
  // and removes its stale socket, as if it had crashed. For tests.
  PluginExit Kill() ABSL_LOCKS_EXCLUDED(stop_mu_, mu_);

 private:
  PluginProcess(std::string name, std::string binary, pid_t pid,
                uint64_t start_time, base::UniqueFd pidfd, bool is_child,
                base::UniqueFd stdout_fd, base::UniqueFd stderr_fd);

  // The rest of Launch once the process runs; on error the caller aborts.
  absl::Status CompleteLaunch(const LaunchOptions& options,
                              absl::Time deadline);
  // Dial, health and capabilities, for Launch and Reattach.
  absl::Status Connect(absl::Time deadline);
  // Kills the process (and, while it is unreaped, its process group if
  // `group`), waits for the monitor to see it end, removes a stale socket.
  void Abort(bool group) ABSL_LOCKS_EXCLUDED(stop_mu_, mu_);
  // Signals the plugin's process through its pidfd; logs a failure.
  bool SignalProcess(int signal);
  bool WaitExited(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  void JoinMonitor() ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveStaleSocket();
  PluginExit FinalExit() const ABSL_LOCKS_EXCLUDED(mu_);

  // "plugin NAME: BINARY (pid N)" or "plugin NAME (pid N)".
  std::string Describe() const;
  // "; it exited with code 3; its last stderr lines: ..." once the process
  // has ended, "" before.
  std::string ExitContext() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string StderrTail() const ABSL_LOCKS_EXCLUDED(mu_);

  // The monitor thread: forwards stderr and stdout, keeps the handshake line,
  // and detects the exit (pidfd), reaps a child and marks the plugin gone.
  void MonitorLoop();
  // Reads once from *fd and handles the complete lines; at EOF closes it.
  // Returns whether to read again (false at EAGAIN or EOF).
  bool ReadPipe(base::UniqueFd* fd, bool is_stderr, std::string* partial);
  void HandleLine(bool is_stderr, absl::string_view line);
  void OnExit();

  const std::string name_;
  const std::string binary_;
  const pid_t pid_;
  const uint64_t start_time_;
  const base::UniqueFd pidfd_;
  const bool is_child_;
  const base::UniqueFd wake_fd_;  // eventfd: tells the monitor to stop
  // Owned by the monitor thread once it runs.
  base::UniqueFd stdout_fd_;
  base::UniqueFd stderr_fd_;
  bool seen_handshake_line_ = false;  // monitor thread only

  // Set once by Launch/Reattach before the object is shared.
  std::string socket_dir_;
  std::string socket_path_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<DriverClient> client_;
  const std::shared_ptr<PluginLifetime> lifetime_;

  std::thread monitor_;

  mutable absl::Mutex mu_;
  std::optional<std::string> handshake_line_ ABSL_GUARDED_BY(mu_);
  bool stdout_closed_ ABSL_GUARDED_BY(mu_) = false;
  // handshake_line_, stdout_closed_ or exited_ is set: Launch stops waiting.
  // (A plain bool, so that absl::Condition needs no lambda: see
  // driver_client.cc on ThreadSanitizer.)
  bool launch_ready_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> stderr_tail_ ABSL_GUARDED_BY(mu_);
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  PluginExit exit_ ABSL_GUARDED_BY(mu_);

  // Serializes Stop, Kill and Abort; held while they run.
  absl::Mutex stop_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace berth::plugin::host

#endif  // PLUGINS_HOST_PLUGIN_PROCESS_H_
