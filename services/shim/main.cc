// berth-shim: stands for one sandboxed process outside the sandbox. Its stdin,
// stdout and stderr are the process's, the signals it gets go to the process,
// and it exits with the process's exit code (128 + N for a signal), 255 when
// it fails itself. See shim.h.
//
// The token comes in the environment (BERTH_SHIM_TOKEN, wiped and unset at
// once) or on an inherited descriptor (--token_fd=N, read and closed), never
// on the command line, where `ps` would show it: there is no --token flag.

#include <malloc.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/service_main.h"
#include "services/shim/shim.h"

ABSL_FLAG(std::string, proxy_socket,
          absl::StrCat(berth::kDefaultRuntimeDir, "/proxy.sock"),
          "berth-proxy's socket.");
ABSL_FLAG(int, token_fd, -1,
          "Read the token from this inherited descriptor (to EOF), then "
          "close it. Without it the token comes from $BERTH_SHIM_TOKEN.");
ABSL_FLAG(std::string, task_log_dir, "",
          "Write the process's stdout and stderr to rotated files "
          "DIR/stdout.log and DIR/stderr.log (where berth-node reads a "
          "task's output) instead of the shim's own stdout and stderr.");
ABSL_FLAG(uint64_t, task_log_max_file_bytes, 0,
          "With --task_log_dir: rotate a file at this size (0: 10 MiB).");
ABSL_FLAG(uint32_t, task_log_max_files, 0,
          "With --task_log_dir: rotated files kept per stream (0: 4).");
ABSL_FLAG(int, attach_fd, -1,
          "An inherited listening Unix socket on which to serve attached "
          "callers (the sandbox driver's AttachTask): the process's output, "
          "its exit, and their terminal sizes sent up as resizes.");
ABSL_FLAG(bool, attach_stdin, false,
          "With --attach_fd: the process's stdin is what attached callers "
          "send (end of file once one closes it), not the shim's own stdin.");
ABSL_FLAG(absl::Duration, reconnect_timeout, absl::Seconds(30),
          "How long to keep trying to reach the proxy when it went away (and "
          "at start) before exiting 255.");

namespace {

constexpr char kUsage[] =
    "one sandboxed process's stdio, signals and exit code, "
    "through berth-proxy\n"
    "usage: BERTH_SHIM_TOKEN=... berth-shim [--proxy_socket=PATH] "
    "[--reconnect_timeout=30s]\n"
    "                  [--task_log_dir=DIR [--task_log_max_file_bytes=N] "
    "[--task_log_max_files=N]]\n"
    "                  [--attach_fd=N [--attach_stdin]]\n"
    "       berth-shim --token_fd=N [--proxy_socket=PATH]";
constexpr char kVersion[] = "0.1.0";

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena for all threads: a shim moves little data, and every
  // further arena costs resident memory in every shim.
  mallopt(M_ARENA_MAX, 1);
  // First of all, before any thread: the token leaves the environment.
  absl::StatusOr<std::string> env_token =
      berth::shim::TakeTokenFromEnvironment();
  const absl::Status blocked = berth::shim::BlockShimSignals();
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (!blocked.ok()) {
    LOG(ERROR) << "berth-shim: " << blocked.message();
    return berth::shim::kShimFailureExitCode;
  }
  if (args.size() > 1) {
    LOG(ERROR) << "berth-shim: unexpected argument " << args[1]
               << "; see --help";
    return berth::shim::kShimFailureExitCode;
  }

  berth::shim::ShimOptions options;
  options.proxy_socket = absl::GetFlag(FLAGS_proxy_socket);
  options.reconnect_timeout = absl::GetFlag(FLAGS_reconnect_timeout);
  options.log_dir = absl::GetFlag(FLAGS_task_log_dir);
  options.log_max_file_bytes = absl::GetFlag(FLAGS_task_log_max_file_bytes);
  options.log_max_files = absl::GetFlag(FLAGS_task_log_max_files);
  options.attach_fd = absl::GetFlag(FLAGS_attach_fd);
  options.attach_stdin = absl::GetFlag(FLAGS_attach_stdin);
  if (options.attach_fd >= 0 && options.attach_fd <= 2) {
    LOG(ERROR) << "berth-shim: --attach_fd=" << options.attach_fd
               << " is one of the process's stdin, stdout and stderr";
    return berth::shim::kShimFailureExitCode;
  }
  if (options.attach_stdin && options.attach_fd < 0) {
    LOG(ERROR) << "berth-shim: --attach_stdin needs --attach_fd";
    return berth::shim::kShimFailureExitCode;
  }
  const int token_fd = absl::GetFlag(FLAGS_token_fd);
  if (token_fd >= 0 && token_fd <= 2) {
    LOG(ERROR) << "berth-shim: --token_fd=" << token_fd
               << " is one of the process's stdin, stdout and stderr; pass "
                  "the token on another descriptor";
    return berth::shim::kShimFailureExitCode;
  }
  if (token_fd >= 0) {
    absl::StatusOr<std::string> token = berth::shim::ReadTokenFromFd(token_fd);
    if (!token.ok()) {
      LOG(ERROR) << "berth-shim: " << token.status().message();
      return berth::shim::kShimFailureExitCode;
    }
    options.token = *std::move(token);
  } else if (env_token.ok()) {
    options.token = *std::move(env_token);
  } else {
    LOG(ERROR) << "berth-shim: no token: set " << berth::shim::kTokenEnvVar
               << " or pass --token_fd";
    return berth::shim::kShimFailureExitCode;
  }
  return berth::shim::RunShim(options);
}
