// The checks of the contract berth-node relies on beyond each call's own
// behaviour (plugins/DRIVERS.md): the task directory as the node hands it
// over, output where the node reads it, the working directory, network
// modes, an exit while the driver is down, the concurrency the node puts on
// a driver and Shutdown with calls open.

#include "plugins/conformance/node_contract_checks.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "glog/logging.h"
#include "plugins/conformance/check_util.h"
#include "plugins/conformance/context.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_process.h"

namespace berth::conformance {
namespace {

namespace driver = ::berth::driver::v1;
namespace host = ::berth::plugin::host;

// berth-node health-checks a plugin with this deadline (every 5 s; three
// misses in a row and it kills the plugin).
constexpr absl::Duration kNodeHealthDeadline = absl::Seconds(2);
// How many tasks many_tasks_waited runs at once.
constexpr int kManyTasks = 100;

// Waits (polling, up to kLogSettle) until `path` holds `want`; a Mismatch
// saying what it held otherwise.
absl::Status ExpectLogFile(const std::string& path, absl::string_view want) {
  const absl::Time deadline = absl::Now() + kLogSettle;
  std::optional<std::string> got;
  while (true) {
    got = ReadHostFile(path);
    if (got.has_value() && *got == want) return absl::OkStatus();
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (!got.has_value()) {
    return Mismatch(
        absl::StrCat(path,
                     " does not exist: berth-node reads the task's output from "
                     "<task_dir>/logs/stdout.log and stderr.log"));
  }
  return Mismatch(
      absl::StrCat(path, " holds ", Quote(*got), "; want ", Quote(want)));
}

bool ListsMode(const driver::DriverCapabilities& capabilities,
               driver::NetworkIsolationMode mode) {
  for (int listed : capabilities.network_isolation_modes()) {
    if (listed == mode) return true;
  }
  return false;
}

// "net:[INODE]" of a network namespace file.
absl::StatusOr<std::string> NamespaceLink(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InternalError(
        absl::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  return absl::StrCat("net:[", st.st_ino, "]");
}

// A network namespace of the suite's own, bound on a file in its temporary
// directory (as berth-netns binds its namespaces under /var/run/netns).
// Needs CAP_SYS_ADMIN; unmounted and removed when destroyed.
class TestNetns {
 public:
  static absl::StatusOr<std::unique_ptr<TestNetns>> Make(
      const std::string& path) {
    base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0444));
    if (!fd.valid()) {
      return absl::InternalError(
          absl::StrCat("cannot make ", path, ": ", std::strerror(errno)));
    }
    fd.reset();  // before the fork below
    auto netns = std::unique_ptr<TestNetns>(new TestNetns(path));
    // A child unshares (the suite's own threads keep the host's network)
    // and binds its namespace on the file: only system calls after fork.
    const pid_t child = fork();
    if (child < 0) {
      return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    }
    if (child == 0) {
      if (unshare(CLONE_NEWNET) != 0) _exit(errno);
      if (mount("/proc/self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) !=
          0) {
        _exit(errno);
      }
      _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const int error = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      if (error == EPERM) {
        return SkipCheck(
            "making a network namespace needs CAP_SYS_ADMIN (run the suite "
            "as root)");
      }
      return absl::InternalError(absl::StrCat(
          "cannot make a network namespace on ", path, ": ",
          error != 0 ? std::strerror(error) : "the child was killed"));
    }
    netns->mounted_ = true;
    return netns;
  }

  ~TestNetns() {
    if (mounted_ && umount2(path_.c_str(), MNT_DETACH) != 0) {
      LOG(WARNING) << "cannot unmount " << path_ << ": "
                   << std::strerror(errno);
    }
    unlink(path_.c_str());
  }

  const std::string& path() const { return path_; }

 private:
  explicit TestNetns(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  bool mounted_ = false;
};

// The last line of a task's stdout (as the node reads it), once it holds
// a line.
absl::StatusOr<std::string> LastStdoutLine(const driver::TaskConfig& task) {
  const std::string path = LogPath(task, "stdout");
  const absl::Time deadline = absl::Now() + kLogSettle;
  std::optional<std::string> got;
  while (true) {
    got = ReadHostFile(path);
    if (got.has_value() && absl::EndsWith(*got, "\n")) {
      std::vector<absl::string_view> lines =
          absl::StrSplit(absl::StripSuffix(*got, "\n"), '\n');
      return std::string(lines.back());
    }
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return Mismatch(absl::StrCat(
      "the task's stdout ", path,
      got.has_value() ? absl::StrCat(" holds ", Quote(*got), ", no whole line")
                      : std::string(" does not exist")));
}

// --- The checks.

absl::Status TaskDirAsHandedOver(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("task-dir",
                        "printf '%s\\n' \"$PWD\"; : > made-by-task; exit 0"));
  struct stat before;
  if (stat(task.task_dir().c_str(), &before) != 0) {
    return absl::InternalError(absl::StrCat("stat ", task.task_dir()));
  }
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(
      exit, 0, 0, "WaitTask of a task started in the node's task directory"));
  struct stat after;
  if (stat(task.task_dir().c_str(), &after) != 0 ||
      after.st_ino != before.st_ino || after.st_dev != before.st_dev) {
    return Mismatch(absl::StrCat(
        "the task directory ", task.task_dir(),
        " the node made was replaced or removed by StartTask; a driver works "
        "in the directory it is handed"));
  }
  CONFORMANCE_ASSIGN_OR_RETURN(std::string pwd, LastStdoutLine(task));
  if (context.capabilities()->fs_isolation() == driver::FS_ISOLATION_NONE) {
    if (pwd != task.task_dir()) {
      return Mismatch(absl::StrCat("the task ran in ", Quote(pwd),
                                   "; want its task directory ",
                                   task.task_dir()));
    }
    const std::string made = absl::StrCat(task.task_dir(), "/made-by-task");
    if (access(made.c_str(), F_OK) != 0) {
      return Mismatch(
          absl::StrCat("the file the task made in its working "
                       "directory is not at ",
                       made));
    }
  }
  return absl::OkStatus();
}

absl::Status LogsWhereTheNodeReads(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("logs",
                        "printf 'out-1\\nout-2\\n'; printf 'err-1\\n' >&2; "
                        "exit 5"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(exit, 5, 0, "WaitTask"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectLogFile(LogPath(task, "stdout"), "out-1\nout-2\n"));
  return ExpectLogFile(LogPath(task, "stderr"), "err-1\n");
}

absl::Status LogsRotation(Context& context) {
  constexpr uint64_t kMaxBytes = 1000;
  constexpr uint32_t kMaxFiles = 2;
  constexpr int kLines = 50;  // of 100 bytes: five files' worth
  const std::string padding(90, 'x');
  std::string want;
  for (int i = 1; i <= kLines; ++i) {
    absl::StrAppend(&want, absl::StrFormat("line-%03d ", i), padding, "\n");
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("rotation",
                        absl::StrCat("i=1; while [ $i -le ", kLines,
                                     " ]; do printf 'line-%03d %s\\n' $i ",
                                     padding, "; i=$((i + 1)); done")));
  task.mutable_logs()->set_max_file_bytes(kMaxBytes);
  task.mutable_logs()->set_max_files(kMaxFiles);
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(exit, 0, 0, "WaitTask"));
  const std::string current = LogPath(task, "stdout");
  // Once the output settled, the last line is in the current file.
  const std::string last_line = want.substr(want.size() - 100);
  const absl::Time deadline = absl::Now() + kLogSettle;
  while (!absl::EndsWith(ReadHostFile(current).value_or(""), last_line) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::vector<std::string> problems;
  std::string kept;
  for (uint32_t i = kMaxFiles + 1; i >= 1; --i) {
    const std::string path = absl::StrCat(current, ".", i);
    std::optional<std::string> content = ReadHostFile(path);
    if (i == kMaxFiles + 1) {
      if (content.has_value()) {
        problems.push_back(absl::StrCat(path, " exists: max_files ", kMaxFiles,
                                        " keeps stdout.log.1 to stdout.log.",
                                        kMaxFiles, " only"));
      }
      continue;
    }
    if (!content.has_value()) {
      problems.push_back(absl::StrCat(
          path, " does not exist after ", want.size(),
          " bytes of output with max_file_bytes ", kMaxBytes,
          " (rotated files are NAME.log.1, newest, to NAME.log.N)"));
      continue;
    }
    if (content->size() > kMaxBytes) {
      problems.push_back(absl::StrCat(path, " has ", content->size(),
                                      " bytes; max_file_bytes is ", kMaxBytes));
    }
    kept += *content;
  }
  std::optional<std::string> last = ReadHostFile(current);
  if (!last.has_value()) {
    problems.push_back(absl::StrCat(current, " does not exist"));
  } else {
    if (last->size() > kMaxBytes) {
      problems.push_back(absl::StrCat(current, " has ", last->size(),
                                      " bytes; max_file_bytes is ", kMaxBytes));
    }
    kept += *last;
  }
  if (problems.empty() && !absl::EndsWith(want, kept)) {
    problems.push_back(absl::StrCat(
        "stdout.log.", kMaxFiles,
        " ... stdout.log.1, stdout.log read in "
        "that order (",
        kept.size(),
        " bytes) are not the end of what the task wrote: ", Quote(kept, 120)));
  }
  if (problems.empty() && kept.size() < kMaxBytes * kMaxFiles) {
    problems.push_back(absl::StrCat("only ", kept.size(), " bytes are kept of ",
                                    want.size(), "; at least ",
                                    kMaxBytes * kMaxFiles, " should be"));
  }
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrJoin(problems, "; "));
}

absl::Status WorkDir(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("work-dir",
                        "printf '%s\\n' \"$PWD\"; : > in-work-dir; exit 0"));
  (*task.mutable_driver_config()->mutable_fields())["work_dir"]
      .set_string_value("sub/dir");
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectExit(exit, 0, 0,
                 "WaitTask of a task with driver_config.work_dir \"sub/dir\""));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string pwd, LastStdoutLine(task));
  const std::string want = absl::StrCat(task.task_dir(), "/sub/dir");
  if (context.capabilities()->fs_isolation() == driver::FS_ISOLATION_NONE) {
    if (pwd != want) {
      return Mismatch(absl::StrCat("with work_dir \"sub/dir\" the task ran in ",
                                   Quote(pwd), "; want ", want));
    }
    if (access(absl::StrCat(want, "/in-work-dir").c_str(), F_OK) != 0) {
      return Mismatch(absl::StrCat("the task's file is not in ", want));
    }
  } else if (!absl::EndsWith(pwd, "/sub/dir")) {
    return Mismatch(absl::StrCat("with work_dir \"sub/dir\" the task ran in ",
                                 Quote(pwd), "; want .../sub/dir"));
  }

  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig escaping,
                               context.ShellTask("work-dir-out", "exit 0"));
  (*escaping.mutable_driver_config()->mutable_fields())["work_dir"]
      .set_string_value("../outside");
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectError(context.StartTask(escaping).status(),
                  absl::StatusCode::kInvalidArgument, escaping.id(), "work_dir",
                  "StartTask with driver_config.work_dir \"../outside\""));
  return ExpectError(context.InspectTask(escaping.id()).status(),
                     absl::StatusCode::kNotFound, escaping.id(), "",
                     "InspectTask after a refused StartTask");
}

absl::Status NetworkHost(Context& context) {
  if (!ListsMode(*context.capabilities(),
                 driver::NETWORK_ISOLATION_MODE_HOST)) {
    return SkipCheck("driver does not list NETWORK_ISOLATION_MODE_HOST");
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("net-host", "readlink /proc/self/ns/net"));
  task.mutable_network()->set_mode(driver::NETWORK_ISOLATION_MODE_HOST);
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(exit, 0, 0, "WaitTask"));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string seen, LastStdoutLine(task));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string host,
                               NamespaceLink("/proc/self/ns/net"));
  if (seen != host) {
    return Mismatch(absl::StrCat("a NETWORK_ISOLATION_MODE_HOST task is in ",
                                 Quote(seen), "; the host's namespace is ",
                                 host));
  }
  return absl::OkStatus();
}

absl::Status NetworkGroupRefused(Context& context);

absl::Status NetworkGroup(Context& context) {
  if (!ListsMode(*context.capabilities(),
                 driver::NETWORK_ISOLATION_MODE_GROUP)) {
    return NetworkGroupRefused(context);
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<TestNetns> netns,
      TestNetns::Make(absl::StrCat(context.work_dir(), "/netns-group")));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string want, NamespaceLink(netns->path()));
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("net-group", "readlink /proc/self/ns/net"));
  task.mutable_network()->set_mode(driver::NETWORK_ISOLATION_MODE_GROUP);
  task.mutable_network()->set_namespace_path(netns->path());
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult exit,
                               RunToEnd(context, task));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(exit, 0, 0, "WaitTask"));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string seen, LastStdoutLine(task));
  if (seen != want) {
    return Mismatch(
        absl::StrCat("a NETWORK_ISOLATION_MODE_GROUP task with namespace_path ",
                     netns->path(), " is in ", Quote(seen), "; want ", want));
  }
  // The namespace stays the node's: destroying the task must leave it.
  CONFORMANCE_RETURN_IF_ERROR(context.DestroyTask(task.id(), true));
  CONFORMANCE_ASSIGN_OR_RETURN(std::string still, NamespaceLink(netns->path()));
  if (still != want) {
    return Mismatch(absl::StrCat("after DestroyTask the namespace file ",
                                 netns->path(), " no longer holds ", want));
  }
  return absl::OkStatus();
}

// For a driver that does not list GROUP: it says so when asked.
absl::Status NetworkGroupRefused(Context& context) {
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               context.ShellTask("net-refused", "exit 0"));
  task.mutable_network()->set_mode(driver::NETWORK_ISOLATION_MODE_GROUP);
  task.mutable_network()->set_namespace_path(
      absl::StrCat("/proc/", getpid(), "/ns/net"));
  CONFORMANCE_RETURN_IF_ERROR(ExpectError(
      context.StartTask(task).status(), absl::StatusCode::kInvalidArgument,
      task.id(), "network.mode",
      "StartTask in NETWORK_ISOLATION_MODE_GROUP by a driver that does not "
      "list it"));
  return ExpectError(context.InspectTask(task.id()).status(),
                     absl::StatusCode::kNotFound, task.id(), "",
                     "InspectTask after a refused StartTask");
}

absl::Status ExitWhileDriverDown(Context& context) {
  // Long enough for the kill to come first, short enough to end while the
  // plugin is down.
  constexpr absl::Duration kDown = absl::Seconds(3);
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      context.ShellTask("exit-down", "sleep 1; exit 7"));
  CONFORMANCE_RETURN_IF_ERROR(context.StartTask(task).status());
  context.KillPlugin();
  absl::SleepFor(kDown);
  CONFORMANCE_RETURN_IF_ERROR(context.EnsurePlugin());
  driver::RecoverTaskRequest request;
  *request.mutable_handle() = *context.HandleOf(task.id());
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::RecoverTaskResponse recovered,
      context.driver().RecoverTask(request, context.Rpc(absl::Seconds(30))));
  CONFORMANCE_RETURN_IF_ERROR(ExpectState(
      recovered.status(), driver::TASK_STATE_EXITED,
      absl::StrCat("(RecoverTask's status) of `sleep 1; exit 7`, killed ",
                   "with its plugin down for ", absl::FormatDuration(kDown))));
  CONFORMANCE_RETURN_IF_ERROR(ExpectExit(
      recovered.status().exit_result(), 7, 0,
      "RecoverTask's exit_result of a task that exited while its driver was "
      "down (the exit status must outlive the driver)"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::ExitResult after,
                               context.WaitTask(task.id(), kRpcTimeout));
  return ExpectExit(after, 7, 0, "WaitTask after RecoverTask");
}

// One probe as berth-node's: GetPluginInfo, then health Check, each with the
// node's deadline.
absl::Status ProbeAsTheNode(Context& context) {
  const absl::Time start = absl::Now();
  absl::StatusOr<plugin::v1::GetPluginInfoResponse> info =
      context.driver().GetPluginInfo({}, context.Rpc(kNodeHealthDeadline));
  if (!info.ok()) {
    return Mismatch(
        absl::StrCat("GetPluginInfo (berth-node's health check, deadline ",
                     absl::FormatDuration(kNodeHealthDeadline),
                     ") failed: ", DescribeError(info.status())));
  }
  if (absl::Status serving = ExpectServing(context, kNodeHealthDeadline);
      !serving.ok()) {
    return Mismatch(absl::StrCat("with the node's deadline of ",
                                 absl::FormatDuration(kNodeHealthDeadline),
                                 ": ", serving.message()));
  }
  VLOG(1) << "probe answered in " << absl::Now() - start;
  return absl::OkStatus();
}

absl::Status ManyTasksWaited(Context& context) {
  std::vector<driver::TaskConfig> tasks;
  for (int i = 0; i < kManyTasks; ++i) {
    CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                                 context.ShellTask("many", "exec sleep 300"));
    absl::Status started = context.StartTask(task).status();
    if (!started.ok()) {
      return absl::Status(started.code(),
                          absl::StrCat("StartTask of task ", i + 1, " of ",
                                       kManyTasks, ": ", started.message()));
    }
    tasks.push_back(std::move(task));
  }
  // A WaitTask open for each, as berth-node holds one per running task.
  std::vector<absl::StatusOr<driver::ExitResult>> results(
      tasks.size(), absl::UnknownError("not waited"));
  host::CallCanceller cancel_waits;
  std::vector<std::thread> waiters;
  waiters.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    waiters.emplace_back([&, i] {
      driver::WaitTaskRequest request;
      request.set_task_id(tasks[i].id());
      absl::StatusOr<driver::WaitTaskResponse> waited =
          context.driver().WaitTask(
              request, {absl::Now() + absl::Minutes(3), &cancel_waits});
      if (waited.ok()) {
        results[i] = waited->result();
      } else {
        results[i] = waited.status();
      }
    });
  }
  absl::Cleanup join = [&] {
    // A check that failed ends its calls (a driver that refuses calls may
    // not take StopTask either); the clean-up then destroys the tasks.
    cancel_waits.Cancel();
    for (std::thread& waiter : waiters) waiter.join();
  };
  // Health as the node checks it, while every WaitTask is open.
  for (int probe = 1; probe <= 6; ++probe) {
    absl::SleepFor(absl::Milliseconds(500));
    absl::Status answered = ProbeAsTheNode(context);
    if (!answered.ok()) {
      return Mismatch(absl::StrCat("with ", kManyTasks,
                                   " tasks running and a WaitTask open for "
                                   "each, probe ",
                                   probe, ": ", answered.message()));
    }
  }
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskStatus status,
                               context.InspectTask(tasks[kManyTasks / 2].id()));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectState(status, driver::TASK_STATE_RUNNING,
                  absl::StrCat("of one of ", kManyTasks, " tasks waited on")));
  for (const driver::TaskConfig& task : tasks) {
    CONFORMANCE_RETURN_IF_ERROR(
        context.StopTask(task.id(), "SIGTERM", absl::Seconds(5)));
  }
  // Every WaitTask ends with its task.
  for (std::thread& waiter : waiters) waiter.join();
  std::move(join).Cancel();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!results[i].ok()) {
      return absl::Status(
          results[i].status().code(),
          absl::StrCat("the WaitTask open on task ", tasks[i].id(), " (", i + 1,
                       " of ", kManyTasks,
                       "): ", results[i].status().message()));
    }
    CONFORMANCE_RETURN_IF_ERROR(
        ExpectExit(*results[i], 0, 15,
                   absl::StrCat("the WaitTask open on task ", tasks[i].id(),
                                " after StopTask(SIGTERM)")));
  }
  return absl::OkStatus();
}

absl::Status ShutdownWithCallsOpen(Context& context) {
  // berth-node's grace: Shutdown, then as long again before SIGKILL.
  constexpr absl::Duration kGrace = host::PluginProcess::kDefaultStopGrace;
  // Slack for a loaded machine between the plugin's exit and the host
  // seeing it.
  constexpr absl::Duration kSlack = absl::Seconds(1);
  std::vector<driver::TaskConfig> tasks;
  for (int i = 0; i < 2; ++i) {
    CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                                 StartSleeper(context, "shutdown-open"));
    tasks.push_back(std::move(task));
  }
  std::vector<std::thread> waiters;
  for (const driver::TaskConfig& task : tasks) {
    waiters.emplace_back([&context, id = task.id()] {
      (void)context.WaitTask(id, absl::Seconds(60));
    });
  }
  absl::Cleanup join = [&] {
    for (std::thread& waiter : waiters) waiter.join();
  };
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::FingerprintStream> fingerprint,
      context.driver().Fingerprint({}, context.Rpc(absl::Seconds(60))));
  // Its first message, when it comes soon, shows the call reached the
  // driver; a silent stream is the fingerprint check's business.
  if (absl::Status first =
          fingerprint->Next(absl::Now() + absl::Seconds(2)).status();
      !first.ok() && !absl::IsDeadlineExceeded(first)) {
    return first;
  }
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::unique_ptr<host::TaskEventsStream> events,
      context.driver().TaskEvents({}, context.Rpc(absl::Seconds(60))));
  std::unique_ptr<host::TaskStatsStream> stats;
  if (context.capabilities()->stats()) {
    driver::TaskStatsRequest request;
    request.set_task_id(tasks[0].id());
    request.mutable_interval()->set_seconds(1);
    CONFORMANCE_ASSIGN_OR_RETURN(
        stats,
        context.driver().TaskStats(request, context.Rpc(absl::Seconds(60))));
    CONFORMANCE_RETURN_IF_ERROR(
        stats->Next(absl::Now() + kRpcTimeout).status());
  }
  const absl::Time stop = absl::Now();
  const host::PluginExit exit = context.StopPlugin();
  const absl::Duration took = absl::Now() - stop;
  if (!exit.status_known || exit.exit_code != 0 || exit.signal != 0) {
    return Mismatch(absl::StrCat(
        "with WaitTask, Fingerprint, TaskEvents",
        stats != nullptr ? ", TaskStats" : "",
        " calls open, after PluginService.Shutdown (grace ",
        absl::FormatDuration(kGrace), ") the plugin ", exit.ToString(),
        "; want exit code 0 within the grace, open calls ended"));
  }
  if (took > kGrace + kSlack) {
    return Mismatch(absl::StrCat(
        "with calls open, the plugin took ", absl::FormatDuration(took),
        " to exit after PluginService.Shutdown; the grace is ",
        absl::FormatDuration(kGrace)));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Check> NodeContractChecks() {
  return {
      {"task_dir_as_handed_over",
       "StartTask in the existing, empty task directory the node made: kept "
       "(same inode), the task's working directory",
       std::nullopt, true, &TaskDirAsHandedOver},
      {"logs_where_the_node_reads",
       "the task's stdout and stderr in <task_dir>/logs/stdout.log and "
       "stderr.log, where berth-node reads them",
       std::nullopt, true, &LogsWhereTheNodeReads},
      {"logs_rotation",
       "logs.max_file_bytes 1000 and max_files 2: no file larger, "
       "stdout.log.2, .1, stdout.log hold the end of the output in order",
       std::nullopt, true, &LogsRotation},
      {"work_dir",
       "driver_config.work_dir \"sub/dir\" is made in the task directory and "
       "the task runs there; \"../outside\" is INVALID_ARGUMENT naming it",
       std::nullopt, true, &WorkDir},
      {"network_host",
       "a NETWORK_ISOLATION_MODE_HOST task is in the host's network "
       "namespace",
       std::nullopt, true, &NetworkHost},
      {"network_group",
       "a NETWORK_ISOLATION_MODE_GROUP task is in the namespace of "
       "namespace_path, which DestroyTask leaves (needs root); a driver not "
       "listing GROUP refuses it with INVALID_ARGUMENT naming network.mode, "
       "leaving nothing",
       std::nullopt, true, &NetworkGroup},
      {"exit_while_driver_down",
       "a task that exits while its plugin is killed is recovered EXITED "
       "with its real exit code",
       Capability::kRecover, true, &ExitWhileDriverDown},
      {"many_tasks_waited",
       "100 tasks running with a WaitTask open for each: GetPluginInfo and "
       "health answer within berth-node's 2s; every WaitTask ends with its "
       "task",
       std::nullopt, true, &ManyTasksWaited},
      {"shutdown_with_calls_open",
       "Shutdown with WaitTask and streams open: the plugin exits 0 within "
       "the grace (2s)",
       std::nullopt, true, &ShutdownWithCallsOpen},
  };
}

}  // namespace berth::conformance
