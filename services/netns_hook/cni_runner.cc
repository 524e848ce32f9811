#include "services/netns_hook/cni_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/host/process_util.h"
#include "services/netns_hook/cni_config.h"

namespace berth {
namespace netns_hook {
namespace {

using json = nlohmann::json;

// What is kept of a plugin's output; more is read and dropped.
constexpr size_t kMaxStdout = 16 << 20;
constexpr size_t kMaxStderr = 64 << 10;
// How much of a plugin's stderr or stray stdout an error message quotes.
constexpr size_t kMaxQuoted = 2000;

// `text` trimmed, C-escaped, cut at kMaxQuoted bytes and in double quotes.
std::string Quote(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const bool cut = text.size() > kMaxQuoted;
  if (cut) text = text.substr(0, kMaxQuoted);
  return absl::StrCat("\"", absl::CHexEscape(text), cut ? "...\"" : "\"");
}

// --- Running one process.

// A file descriptor closed when it goes.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

absl::Status MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  return absl::OkStatus();
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::ErrnoToStatus(errno, "fcntl(O_NONBLOCK)");
  }
  return absl::OkStatus();
}

// A pipe whose read end, given as stdin, holds `data` and then EOF: the
// whole input is written before the child exists (the pipe is grown to fit
// it), so writing can neither block nor raise SIGPIPE.
absl::Status StdinPipe(const std::string& data, Fd* read_end) {
  Fd write_end;
  if (absl::Status status = MakePipe(read_end, &write_end); !status.ok()) {
    return status;
  }
  // A pipe holds 64 KiB, or one page when the user's pipe quota is spent:
  // grow it when the input needs more.
  if (data.size() > 4096 &&
      fcntl(write_end.get(), F_GETPIPE_SZ) < static_cast<int>(data.size())) {
    fcntl(write_end.get(), F_SETPIPE_SZ,
          static_cast<int>(std::min(data.size(), size_t{1} << 30)));
    if (fcntl(write_end.get(), F_GETPIPE_SZ) < static_cast<int>(data.size())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a pipe cannot hold the ", data.size(),
                       "-byte plugin configuration"));
    }
  }
  if (absl::Status status = SetNonBlocking(write_end.get()); !status.ok()) {
    return status;
  }
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n =
        write(write_end.get(), data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ErrnoToStatus(
          errno, "writing the plugin configuration into its stdin pipe");
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

struct ProcessOutcome {
  int wait_status = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  bool out_truncated = false;
};

// One output pipe being read.
struct Output {
  Fd fd;
  std::string* data;
  size_t limit;
  bool* truncated;
};

// Reads what `output` has now (its fd is non-blocking); closes it at EOF.
void Drain(Output* output) {
  char buffer[65536];
  while (output->fd.get() >= 0) {
    const ssize_t n = read(output->fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) output->fd.Reset();
      return;
    }
    if (n == 0) {
      output->fd.Reset();
      return;
    }
    const size_t room =
        output->limit - std::min(output->limit, output->data->size());
    output->data->append(buffer, std::min(room, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) > room && output->truncated != nullptr) {
      *output->truncated = true;
    }
  }
}

void WaitForExit(pid_t pid, int* wait_status) {
  while (waitpid(pid, wait_status, 0) < 0) {
    if (errno == EINTR) continue;
    PLOG(ERROR) << "waitpid(" << pid << ")";
    *wait_status = 0;
    return;
  }
}

// Runs `path` with `input` on stdin, collects stdout and stderr until it
// exits; kills its process group and reaps it at `timeout`.
absl::StatusOr<ProcessOutcome> RunProcess(const std::string& path,
                                          const std::string& input,
                                          std::vector<std::string> env,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ProcessOutcome outcome;
  Fd stdin_read;
  if (absl::Status status = StdinPipe(input, &stdin_read); !status.ok()) {
    return status;
  }
  Output out{Fd(), &outcome.out, kMaxStdout, &outcome.out_truncated};
  Output err{Fd(), &outcome.err, kMaxStderr, nullptr};
  Fd stdout_write, stderr_write;
  for (auto [output, write_end] :
       {std::pair{&out, &stdout_write}, std::pair{&err, &stderr_write}}) {
    if (absl::Status status = MakePipe(&output->fd, write_end); !status.ok()) {
      return status;
    }
    if (absl::Status status = SetNonBlocking(output->fd.get()); !status.ok()) {
      return status;
    }
  }
  // A plugin being installed (or whose write fd another thread's child
  // inherited) fails with ETXTBSY for a moment: tried 4 more times.
  absl::StatusOr<pid_t> spawned = plugin::host::internal::Spawn(
      path, {}, std::move(env), stdin_read.get(), stdout_write.get(),
      stderr_write.get(), /*etxtbsy_retries=*/4);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  stdin_read.Reset();
  stdout_write.Reset();
  stderr_write.Reset();

  // A pidfd says when the plugin itself exits, even if a process it left
  // behind still holds its stdout; without one, EOF on both pipes does.
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  bool exited = false;
  while (true) {
    if (exited) {
      Drain(&out);
      Drain(&err);
      break;
    }
    const bool pipes_open = out.fd.get() >= 0 || err.fd.get() >= 0;
    if (!pipes_open && pidfd.get() < 0) break;
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) {
      outcome.timed_out = true;
      break;
    }
    struct pollfd fds[3];
    Output* owners[3] = {nullptr, nullptr, nullptr};
    int count = 0;
    for (Output* output : {&out, &err}) {
      if (output->fd.get() < 0) continue;
      fds[count] = {output->fd.get(), POLLIN, 0};
      owners[count++] = output;
    }
    if (pidfd.get() >= 0) fds[count++] = {pidfd.get(), POLLIN, 0};
    const int ready =
        poll(fds, count,
             static_cast<int>(std::min<int64_t>(
                 absl::ToInt64Milliseconds(remaining) + 1, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on the pipes of " << path;
      outcome.timed_out = true;  // Cannot watch it: end it.
      break;
    }
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] != nullptr) {
        Drain(owners[i]);
      } else {
        exited = true;
      }
    }
  }

  if (outcome.timed_out) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    WaitForExit(pid, &outcome.wait_status);
    return outcome;
  }
  if (exited || pidfd.get() >= 0) {
    WaitForExit(pid, &outcome.wait_status);
    return outcome;
  }
  // No pidfd and both pipes at EOF: the plugin closed them or is exiting.
  while (true) {
    const pid_t done = waitpid(pid, &outcome.wait_status, WNOHANG);
    if (done == pid) return outcome;
    if (done < 0 && errno != EINTR) {
      PLOG(ERROR) << "waitpid(" << pid << ")";
      return outcome;
    }
    if (absl::Now() >= deadline) {
      outcome.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      WaitForExit(pid, &outcome.wait_status);
      return outcome;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    return absl::StrCat("was killed by signal ", signal, " (",
                        strsignal(signal), ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

}  // namespace

// --- The runner.

CniRunner::CniRunner(std::vector<std::string> plugin_dirs,
                     absl::Duration timeout)
    : plugin_dirs_(std::move(plugin_dirs)), timeout_(timeout) {}

absl::StatusOr<std::string> CniRunner::FindPlugin(
    const std::string& type) const {
  if (type.empty() || absl::StrContains(type, '/') ||
      absl::StrContains(type, '\0')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CNI plugin type \"", absl::CHexEscape(type), "\" is not a file name"));
  }
  for (const std::string& dir : plugin_dirs_) {
    const std::string path =
        absl::StrCat(dir, absl::EndsWith(dir, "/") ? "" : "/", type);
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("CNI plugin \"", type, "\" not found in ",
                   plugin_dirs_.empty() ? "(no plugin directories)"
                                        : absl::StrJoin(plugin_dirs_, ", ")));
}

absl::StatusOr<std::string> CniRunner::RunPlugin(
    const char* command_name, const CniNetwork& network, int index,
    const CniRuntime& runtime, const json* prev_result) const {
  const std::string type =
      network.conflist["plugins"][index]["type"].get<std::string>();
  const std::string what = absl::StrCat(
      "CNI ", command_name, " of network \"", network.name, "\" for container ",
      runtime.container_id, ": plugin \"", type, "\"");
  absl::StatusOr<std::string> path = FindPlugin(type);
  if (!path.ok()) {
    return absl::Status(
        path.status().code(),
        absl::StrCat("CNI ", command_name, " of network \"", network.name,
                     "\": ", path.status().message()));
  }
  std::vector<std::string> env = {
      absl::StrCat("CNI_COMMAND=", command_name),
      absl::StrCat("CNI_CONTAINERID=", runtime.container_id),
      absl::StrCat("CNI_NETNS=", runtime.netns_path),
      absl::StrCat("CNI_IFNAME=", runtime.ifname),
      absl::StrCat("CNI_ARGS=",
                   absl::StrJoin(runtime.args, ";", absl::PairFormatter("="))),
      absl::StrCat("CNI_PATH=", absl::StrJoin(plugin_dirs_, ":")),
      absl::StrCat("PATH=", kCniPluginPathEnv),
  };
  const std::string input =
      DumpJson(PluginConfig(network, index, runtime, prev_result));
  VLOG(1) << "CNI " << command_name << " " << type << " (" << *path << ") for "
          << runtime.container_id << " in network " << network.name;

  absl::StatusOr<ProcessOutcome> outcome =
      RunProcess(*path, input, std::move(env), timeout_);
  if (!outcome.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", outcome.status().message()));
  }
  if (outcome->timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " (", *path, ") did not finish within ",
                     absl::FormatDuration(timeout_), " and was killed"));
  }
  const std::string stderr_part =
      outcome->err.empty() ? ""
                           : absl::StrCat("; stderr: ", Quote(outcome->err));
  if (!WIFEXITED(outcome->wait_status) ||
      WEXITSTATUS(outcome->wait_status) != 0) {
    if (const std::string error = CniErrorOf(outcome->out); !error.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " failed: ", error, stderr_part));
    }
    std::string printed;
    if (!outcome->out.empty()) {
      absl::StrAppend(&printed, ", stdout: ", Quote(outcome->out));
    }
    if (!outcome->err.empty()) {
      absl::StrAppend(&printed, ", stderr: ", Quote(outcome->err));
    }
    if (printed.empty()) printed = " and printed nothing";
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", DescribeWaitStatus(outcome->wait_status), printed));
  }
  if (outcome->out_truncated) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " printed more than ", kMaxStdout, " bytes on stdout"));
  }
  if (!outcome->err.empty()) {
    VLOG(1) << what
            << " succeeded and printed on stderr: " << Quote(outcome->err);
  }
  return std::move(outcome->out);
}

absl::StatusOr<CniResult> CniRunner::Add(const CniNetwork& network,
                                         const CniRuntime& runtime) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/true);
      !status.ok()) {
    return status;
  }
  const json& plugins = network.conflist["plugins"];
  json result;
  bool have_result = false;
  for (size_t i = 0; i < plugins.size(); ++i) {
    absl::StatusOr<std::string> out =
        RunPlugin("ADD", network, static_cast<int>(i), runtime,
                  have_result ? &result : nullptr);
    if (!out.ok()) return out.status();
    const std::string what =
        absl::StrCat("CNI ADD of network \"", network.name, "\" for container ",
                     runtime.container_id, ": plugin \"",
                     plugins[i]["type"].get<std::string>(), "\"");
    if (absl::StripAsciiWhitespace(*out).empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " succeeded but printed no result"));
    }
    try {
      result = json::parse(*out);
    } catch (const json::exception& e) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " printed a result that is not JSON (", e.what(),
                       "): ", Quote(*out)));
    }
    if (!result.is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " printed a result that is not a JSON object: ", Quote(*out)));
    }
    have_result = true;
  }
  absl::StatusOr<CniResult> parsed = ParseResult(result, runtime.ifname);
  if (!parsed.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CNI ADD of network \"", network.name, "\" for container ",
                     runtime.container_id, ": the result of plugin \"",
                     plugins.back()["type"].get<std::string>(),
                     "\" cannot be read: ", parsed.status().message()));
  }
  return parsed;
}

absl::Status CniRunner::Check(const CniNetwork& network,
                              const CniRuntime& runtime,
                              const json& prev_result) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (ChecksDisabled(network.conflist)) return absl::OkStatus();
  if (!HasCheckAndDelPrevResult(network.cni_version)) {
    return absl::UnimplementedError(absl::StrCat(
        "CNI network \"", network.name, "\" has cniVersion ",
        network.cni_version, ", which has no CHECK (0.4.0 and later have)"));
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/true);
      !status.ok()) {
    return status;
  }
  const size_t count = network.conflist["plugins"].size();
  for (size_t i = 0; i < count; ++i) {
    absl::StatusOr<std::string> out =
        RunPlugin("CHECK", network, static_cast<int>(i), runtime, &prev_result);
    if (!out.ok()) return out.status();
  }
  return absl::OkStatus();
}

absl::Status CniRunner::Del(const CniNetwork& network,
                            const CniRuntime& runtime,
                            const json* prev_result) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/false);
      !status.ok()) {
    return status;
  }
  if (!HasCheckAndDelPrevResult(network.cni_version)) prev_result = nullptr;
  absl::Status first;
  const int count = static_cast<int>(network.conflist["plugins"].size());
  for (int i = count - 1; i >= 0; --i) {
    absl::StatusOr<std::string> out =
        RunPlugin("DEL", network, i, runtime, prev_result);
    if (out.ok()) continue;
    LOG(WARNING) << out.status().message();
    if (first.ok()) first = out.status();
  }
  return first;
}

}  // namespace netns_hook
}  // namespace berth
