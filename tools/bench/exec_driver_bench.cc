// exec_driver_bench: how fast a driver plugin starts a task, execs into one
// and streams through an exec'd `cat`, as berth-node sees it. Any driver that
// accepts the conventional task config ({"command": ..., "args": [...]}, see
// plugins/conformance/CONVENTIONS.md) can be measured:
//
//   exec_driver_bench --driver=PATH [--figures=start,exec,stream]
//                     [--repetitions=20] [--warmup=2]
//                     [--stream_repetitions=3] [--stream_bytes=1073741824]
//                     [--tag_env=KEY=VALUE] [--task_prefix=bench]
//                     [--tmp_dir=/tmp]
//
// The driver is launched once, as berth-node launches it
// (host::PluginProcess::Launch), and configured with SetConfig (a NodeContext
// whose state directory is in this program's temporary directory); then:
//
//   driver_start   StartTask of `/bin/true` until the call returns (the task
//                  is running, or already done). WaitTask (exit 0 expected)
//                  and DestroyTask follow, outside the timed region.
//   driver_exec    ExecTask(`/bin/true`) into a running `sleep 3600` task,
//                  until the response (exit 0 expected) is back.
//   task_memory    the memory a running task costs beyond its own program:
//                  --memory_tasks `sleep 3600` tasks are started, then the
//                  growth of the driver's PSS plus the PSS of each task's
//                  per-task process (the pid the driver reports in
//                  InspectTask's driver_attributes, e.g. berth-task-init),
//                  divided by the number of tasks, in kB. One sample per run.
//   driver_stream  ExecTaskStreaming of `cat` in that task: --stream_bytes of
//                  stdin sent in 32 KiB frames while stdout is read, from the
//                  opening of the call to its end; every byte back is counted
//                  and checked against what was sent. MB/s of stdin (10^6
//                  bytes per second; as many bytes come back).
//
// With --echo_server instead of --driver, the same streaming client measures
// a bare gRPC echo server (tools/bench/grpc_echo.h: a plain DriverService that
// writes every stdin frame back as a stdout frame, with no driver, SDK,
// process or pipe), which this program starts as a helper process (itself
// with --serve_echo=SOCKET, on a Unix socket in its temporary directory,
// through UnixGrpcServer) and dials as berth-node dials a plugin (DialUnix,
// host::DriverClient). Only the streaming figure, named echo_stream; the
// flags of the stream apply, and --tag_env puts the tags in the server's
// environment:
//
//   exec_driver_bench --echo_server [--stream_repetitions=3]
//                     [--stream_bytes=1073741824] [--warmup=2] ...
//
// Every task has a fresh TaskConfig.task_dir under the temporary directory and
// an id unique per iteration. Each figure prints a "sample" line per timed
// repetition and a "median" line at the end (tools/bench/figures.h). Any
// error ends the program with exit code 1 and a line on stderr naming what
// failed, after removing its tasks and stopping the driver; so do SIGINT and
// SIGTERM. A driver that does not exit 0 when stopped at the end (Shutdown,
// then up to 2 s) gets a WARNING line on stderr, not a failure. Nothing is left
// behind: tasks are destroyed, the driver (or the echo server) stopped, the
// temporary directory (--tmp_dir/berth-bench-XXXXXX) removed.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "glog/logging.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/channel.h"
#include "plugins/benchmarks/bench_util.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_lifetime.h"
#include "plugins/host/plugin_process.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "tools/bench/figures.h"
#include "tools/bench/grpc_echo.h"

ABSL_FLAG(std::string, driver, "",
          "Path of the driver plugin binary to measure (required, unless "
          "--echo_server).");
ABSL_FLAG(bool, echo_server, false,
          "Instead of a driver, measure the streaming figure (echo_stream) "
          "against a bare gRPC echo server in a helper process.");
ABSL_FLAG(std::string, serve_echo, "",
          "Internal: serve the gRPC echo on this socket path until stdin "
          "ends.");
ABSL_FLAG(std::vector<std::string>, figures,
          std::vector<std::string>({"start", "exec", "stream"}),
          "Which figures to measure, in this order: start, exec, stream, "
          "memory.");
ABSL_FLAG(int, memory_tasks, 100,
          "Tasks running at once for the memory figure.");
ABSL_FLAG(int, repetitions, 20, "Timed StartTask and ExecTask calls, each.");
ABSL_FLAG(int, warmup, 2,
          "Untimed StartTask and ExecTask calls before the timed ones, and "
          "an untimed ExecTaskStreaming of at most 16 MiB before the timed "
          "ones when above 0.");
ABSL_FLAG(int, stream_repetitions, 3, "Timed ExecTaskStreaming calls.");
ABSL_FLAG(int64_t, stream_bytes, int64_t{1} << 30,
          "Bytes of stdin sent through `cat` in each ExecTaskStreaming call.");
ABSL_FLAG(std::vector<std::string>, tag_env, {},
          "KEY=VALUE pairs put in the environment of the driver (or the echo "
          "server) and of every task, so that a script can find anything a "
          "killed run left.");
ABSL_FLAG(std::string, task_prefix, "bench",
          "Task ids are PREFIX-KIND-PID-N (e.g. bench-start-1234-7), so that "
          "a script can find what a driver made for them (cgroups).");
ABSL_FLAG(std::string, tmp_dir, "/tmp",
          "Where to make the temporary directory (berth-bench-XXXXXX): the "
          "driver's socket and state, the task directories.");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(30),
          "Deadline of each unary call.");
ABSL_FLAG(absl::Duration, stream_timeout, absl::Minutes(10),
          "Deadline of each ExecTaskStreaming call.");

namespace berth::bench {
namespace {

namespace driver = ::berth::driver::v1;
namespace host = ::berth::plugin::host;
using ::berth::plugin::benchmarks::Child;
using ::berth::plugin::benchmarks::TempDir;
using Clock = std::chrono::steady_clock;

constexpr size_t kFrameBytes = 32 * 1024;  // the protocol's largest frame
constexpr char kSleeperSeconds[] = "3600";
// The task id the streams to the echo server name (it does not look at it).
constexpr char kEchoTaskId[] = "grpc-echo";

double Milliseconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Cancels every call in flight when SIGINT or SIGTERM arrives; calls made
// for the clean-up afterwards do not use it.
host::CallCanceller* interrupt_canceller = nullptr;
std::atomic<int> interrupted_by{0};

void WatchSignals(sigset_t signals) {
  std::thread([signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) return;
    interrupted_by = signal;
    interrupt_canceller->Cancel();
  }).detach();
}

absl::Status Annotate(const absl::Status& status, absl::string_view what) {
  if (interrupted_by != 0) {
    return absl::CancelledError(
        absl::StrCat(what, ": interrupted by signal ", interrupted_by.load(),
                     " (", strsignal(interrupted_by.load()), ")"));
  }
  return absl::Status(status.code(),
                      absl::StrCat(what, ": ", status.message()));
}

std::string DescribeExit(const driver::ExitResult& exit) {
  return absl::StrCat("exit_code ", exit.exit_code(), ", signal ",
                      exit.signal(), exit.oom_killed() ? ", OOM-killed" : "");
}

bool ExitedZero(const driver::ExitResult& exit) {
  return exit.exit_code() == 0 && exit.signal() == 0 && !exit.oom_killed();
}

class Bench {
 public:
  Bench(std::shared_ptr<host::DriverClient> client, const TempDir& dir,
        std::vector<std::pair<std::string, std::string>> tags,
        pid_t driver_pid = -1)
      : client_(std::move(client)),
        dir_(dir),
        tags_(std::move(tags)),
        driver_pid_(driver_pid) {}

  // Destroys the sleeper, if started.
  ~Bench() { RemoveSleeper(); }

  absl::Status MeasureStart(int warmup, int repetitions, Figure& figure);
  absl::Status MeasureExec(int warmup, int repetitions, Figure& figure);
  // driver_stream: through `cat` in the sleeper.
  absl::Status MeasureStream(int warmup, int repetitions, uint64_t bytes,
                             Figure& figure);
  // task_memory: `tasks` sleeping tasks at once.
  absl::Status MeasureMemory(int tasks, Figure& figure);
  // echo_stream: the same calls, to a server that echoes them.
  absl::Status MeasureEchoStream(int warmup, int repetitions, uint64_t bytes,
                                 Figure& figure);

 private:
  host::CallOptions Rpc(absl::Duration timeout) const {
    host::CallOptions options;
    options.deadline = absl::Now() + timeout;
    options.canceller = interrupt_canceller;
    return options;
  }
  // For the clean-up: not cancelled by a signal.
  static host::CallOptions CleanupRpc() {
    host::CallOptions options;
    options.deadline = absl::Now() + absl::Seconds(30);
    return options;
  }

  // A new task's config: a unique id, a fresh task directory, the tags.
  absl::StatusOr<driver::TaskConfig> NewTask(
      absl::string_view kind, const std::string& command,
      const std::vector<std::string>& args);
  // Stops (SIGKILL) and destroys a task; logs what fails.
  void Remove(const std::string& task_id);
  // The `sleep 3600` task ExecTask and ExecTaskStreaming run in.
  absl::StatusOr<std::string> Sleeper();
  void RemoveSleeper();

  absl::Status StartOnce(bool timed, Figure& figure);
  // One untimed stream of at most 16 MiB if `warmup` > 0, then
  // `repetitions` timed ones; `subject` names the other side in errors.
  absl::Status StreamRepeatedly(const std::string& task_id,
                                absl::string_view subject, int warmup,
                                int repetitions, uint64_t bytes,
                                Figure& figure);
  absl::StatusOr<double> StreamOnce(const std::string& task_id,
                                    absl::string_view subject, uint64_t bytes);

  const std::shared_ptr<host::DriverClient> client_;
  const TempDir& dir_;
  const std::vector<std::pair<std::string, std::string>> tags_;
  const StreamPattern pattern_;
  const pid_t driver_pid_;
  int tasks_made_ = 0;
  std::optional<std::string> sleeper_;
};

absl::StatusOr<driver::TaskConfig> Bench::NewTask(
    absl::string_view kind, const std::string& command,
    const std::vector<std::string>& args) {
  driver::TaskConfig task;
  task.set_id(absl::StrCat(absl::GetFlag(FLAGS_task_prefix), "-", kind, "-",
                           getpid(), "-", ++tasks_made_));
  task.set_name(task.id());
  // Where berth-node puts them: inside the state directory, as the drivers
  // require.
  const std::string task_dir =
      dir_.Join(absl::StrCat("state/node/tasks/", task.id()));
  if (mkdir(task_dir.c_str(), 0755) != 0) {
    return absl::InternalError(absl::StrCat("cannot make the task directory ",
                                            task_dir, ": ", strerror(errno)));
  }
  task.set_task_dir(task_dir);
  auto& fields = *task.mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value(command);
  google::protobuf::ListValue* list = fields["args"].mutable_list_value();
  for (const std::string& arg : args) list->add_values()->set_string_value(arg);
  for (const auto& [key, value] : tags_) (*task.mutable_env())[key] = value;
  return task;
}

void Bench::Remove(const std::string& task_id) {
  driver::StopTaskRequest stop;
  stop.set_task_id(task_id);
  stop.set_signal("SIGKILL");
  stop.mutable_timeout()->set_seconds(1);
  absl::Status stopped = client_->StopTask(stop, CleanupRpc()).status();
  LOG_IF(ERROR, !stopped.ok() && !absl::IsNotFound(stopped))
      << "StopTask of task " << task_id << ": " << stopped;
  driver::DestroyTaskRequest destroy;
  destroy.set_task_id(task_id);
  destroy.set_force(true);
  absl::Status destroyed = client_->DestroyTask(destroy, CleanupRpc()).status();
  LOG_IF(ERROR, !destroyed.ok() && !absl::IsNotFound(destroyed))
      << "DestroyTask of task " << task_id << ": " << destroyed;
}

absl::StatusOr<std::string> Bench::Sleeper() {
  if (sleeper_.has_value()) return *sleeper_;
  absl::StatusOr<driver::TaskConfig> task =
      NewTask("sleeper", "sleep", {kSleeperSeconds});
  if (!task.ok()) return task.status();
  driver::StartTaskRequest request;
  *request.mutable_task() = *task;
  absl::Status started =
      client_->StartTask(request, Rpc(absl::GetFlag(FLAGS_call_timeout)))
          .status();
  if (!started.ok()) {
    Remove(task->id());
    return Annotate(started, absl::StrCat("StartTask of task ", task->id(),
                                          " (sleep ", kSleeperSeconds, ")"));
  }
  sleeper_ = task->id();
  return *sleeper_;
}

void Bench::RemoveSleeper() {
  if (!sleeper_.has_value()) return;
  Remove(*sleeper_);
  sleeper_.reset();
}

namespace {

// The "Pss:" of /proc/PID/smaps_rollup in kB: the process's resident memory
// with each shared page divided among the processes mapping it.
absl::StatusOr<uint64_t> PssKb(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/smaps_rollup");
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  }
  char line[256];
  uint64_t kb = 0;
  bool found = false;
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    unsigned long long value = 0;
    if (std::sscanf(line, "Pss: %llu kB", &value) == 1) {
      kb = value;
      found = true;
      break;
    }
  }
  std::fclose(file);
  if (!found) return absl::InternalError(absl::StrCat("no Pss line in ", path));
  return kb;
}

}  // namespace

absl::Status Bench::MeasureMemory(int tasks, Figure& figure) {
  if (driver_pid_ <= 0) {
    return absl::FailedPreconditionError("the driver's pid is not known");
  }
  // A first task, so that what the driver allocates once is not counted.
  absl::StatusOr<std::string> sleeper = Sleeper();
  if (!sleeper.ok()) return sleeper.status();
  absl::SleepFor(absl::Milliseconds(200));
  absl::StatusOr<uint64_t> before = PssKb(driver_pid_);
  if (!before.ok()) return before.status();
  std::vector<std::string> started;
  absl::Status status;
  uint64_t per_task_kb = 0;
  int with_process = 0;
  for (int i = 0; i < tasks && status.ok(); ++i) {
    absl::StatusOr<driver::TaskConfig> task =
        NewTask("memory", "sleep", {kSleeperSeconds});
    if (!task.ok()) {
      status = task.status();
      break;
    }
    driver::StartTaskRequest request;
    *request.mutable_task() = *task;
    status = client_->StartTask(request, Rpc(absl::GetFlag(FLAGS_call_timeout)))
                 .status();
    if (status.ok()) {
      started.push_back(task->id());
    } else {
      Remove(task->id());
      status = Annotate(status, absl::StrCat("StartTask of task ", task->id()));
    }
  }
  if (status.ok()) {
    absl::SleepFor(absl::Milliseconds(500));  // let the tasks settle
    for (const std::string& id : started) {
      driver::InspectTaskRequest inspect;
      inspect.set_task_id(id);
      absl::StatusOr<driver::InspectTaskResponse> response =
          client_->InspectTask(inspect, Rpc(absl::GetFlag(FLAGS_call_timeout)));
      if (!response.ok()) {
        status = Annotate(response.status(), absl::StrCat("InspectTask ", id));
        break;
      }
      const auto& attributes = response->status().driver_attributes();
      auto pid = attributes.find("pid");
      int value = 0;
      if (pid == attributes.end() || !absl::SimpleAtoi(pid->second, &value)) {
        continue;
      }
      absl::StatusOr<uint64_t> pss = PssKb(value);
      if (!pss.ok()) {
        status = pss.status();
        break;
      }
      per_task_kb += *pss;
      ++with_process;
    }
  }
  absl::StatusOr<uint64_t> after = PssKb(driver_pid_);
  if (status.ok() && !after.ok()) status = after.status();
  for (const std::string& id : started) Remove(id);
  if (!status.ok()) return status;
  const double driver_growth_kb =
      static_cast<double>(*after) - static_cast<double>(*before);
  std::printf(
      "memory %d tasks: driver Pss %llu kB -> %llu kB (%+.1f kB per task); "
      "per-task processes (driver_attributes pid) %d, Pss %.1f kB each\n",
      tasks, static_cast<unsigned long long>(*before),
      static_cast<unsigned long long>(*after), driver_growth_kb / tasks,
      with_process,
      with_process > 0 ? static_cast<double>(per_task_kb) / with_process : 0.0);
  figure.Add((driver_growth_kb + static_cast<double>(per_task_kb)) / tasks);
  return absl::OkStatus();
}

absl::Status Bench::StartOnce(bool timed, Figure& figure) {
  absl::StatusOr<driver::TaskConfig> task = NewTask("start", "/bin/true", {});
  if (!task.ok()) return task.status();
  const std::string what = absl::StrCat("task ", task->id(), " (/bin/true)");
  driver::StartTaskRequest request;
  *request.mutable_task() = *task;
  const host::CallOptions options = Rpc(absl::GetFlag(FLAGS_call_timeout));
  const Clock::time_point start = Clock::now();
  absl::StatusOr<driver::StartTaskResponse> started =
      client_->StartTask(request, options);
  const Clock::time_point end = Clock::now();
  if (!started.ok()) {
    Remove(task->id());
    return Annotate(started.status(), absl::StrCat("StartTask of ", what));
  }
  driver::WaitTaskRequest wait;
  wait.set_task_id(task->id());
  absl::StatusOr<driver::WaitTaskResponse> waited =
      client_->WaitTask(wait, Rpc(absl::GetFlag(FLAGS_call_timeout)));
  if (!waited.ok()) {
    Remove(task->id());
    return Annotate(waited.status(), absl::StrCat("WaitTask of ", what));
  }
  if (!ExitedZero(waited->result())) {
    Remove(task->id());
    return absl::InternalError(absl::StrCat("WaitTask of ", what, ": ",
                                            DescribeExit(waited->result()),
                                            "; expected exit_code 0"));
  }
  driver::DestroyTaskRequest destroy;
  destroy.set_task_id(task->id());
  absl::Status destroyed =
      client_->DestroyTask(destroy, Rpc(absl::GetFlag(FLAGS_call_timeout)))
          .status();
  if (!destroyed.ok()) {
    Remove(task->id());
    return Annotate(destroyed, absl::StrCat("DestroyTask of ", what));
  }
  if (timed) figure.Add(Milliseconds(start, end));
  return absl::OkStatus();
}

absl::Status Bench::MeasureStart(int warmup, int repetitions, Figure& figure) {
  for (int i = 0; i < warmup + repetitions; ++i) {
    if (absl::Status done = StartOnce(i >= warmup, figure); !done.ok()) {
      return done;
    }
  }
  return absl::OkStatus();
}

absl::Status Bench::MeasureExec(int warmup, int repetitions, Figure& figure) {
  absl::StatusOr<std::string> task_id = Sleeper();
  if (!task_id.ok()) return task_id.status();
  driver::ExecTaskRequest request;
  request.set_task_id(*task_id);
  request.add_command("/bin/true");
  request.mutable_timeout()->set_seconds(
      absl::ToInt64Seconds(absl::GetFlag(FLAGS_call_timeout)));
  for (int i = 0; i < warmup + repetitions; ++i) {
    const host::CallOptions options = Rpc(absl::GetFlag(FLAGS_call_timeout));
    const Clock::time_point start = Clock::now();
    absl::StatusOr<driver::ExecTaskResponse> response =
        client_->ExecTask(request, options);
    const Clock::time_point end = Clock::now();
    const std::string what =
        absl::StrCat("ExecTask(/bin/true) into task ", *task_id);
    if (!response.ok()) return Annotate(response.status(), what);
    if (!ExitedZero(response->result())) {
      return absl::InternalError(
          absl::StrCat(what, ": ", DescribeExit(response->result()),
                       "; expected exit_code 0 (stderr: \"",
                       response->stderr().substr(0, 200), "\")"));
    }
    if (i >= warmup) figure.Add(Milliseconds(start, end));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Bench::StreamOnce(const std::string& task_id,
                                         absl::string_view subject,
                                         uint64_t bytes) {
  const std::string what =
      absl::StrCat("ExecTaskStreaming of `cat` in ", subject, " with ",
                   FormatBytes(bytes), " of stdin");
  const absl::Time deadline = absl::Now() + absl::GetFlag(FLAGS_stream_timeout);
  host::CallOptions options;
  options.deadline = deadline;
  options.canceller = interrupt_canceller;
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<host::ExecStream>> stream =
      client_->ExecTaskStreaming(options);
  if (!stream.ok()) return Annotate(stream.status(), what);
  driver::ExecTaskStreamingRequest setup;
  setup.mutable_setup()->set_task_id(task_id);
  setup.mutable_setup()->add_command("cat");
  if (absl::Status written = (*stream)->Write(setup); !written.ok()) {
    return Annotate(written, absl::StrCat(what, ": sending the setup"));
  }

  // One thread sends stdin while this one reads stdout, so that neither
  // side's flow control stops the other.
  uint64_t sent = 0;
  absl::Status send_status;
  std::thread sender([&] {
    driver::ExecTaskStreamingRequest request;
    while (sent < bytes) {
      const size_t size =
          static_cast<size_t>(std::min<uint64_t>(kFrameBytes, bytes - sent));
      std::string* frame = request.mutable_stdin();
      frame->resize(size);
      pattern_.Fill(sent, frame->data(), size);
      send_status = (*stream)->Write(request);
      if (!send_status.ok()) return;
      sent += size;
    }
    driver::ExecTaskStreamingRequest close;
    close.mutable_stdin_close();
    send_status = (*stream)->Write(close);
    if (send_status.ok()) send_status = (*stream)->WritesDone();
  });

  uint64_t received = 0;
  bool corrupt = false;
  std::string stderr_head;
  std::optional<driver::ExitResult> exit;
  absl::Status read_status;
  while (true) {
    absl::StatusOr<std::optional<driver::ExecTaskStreamingResponse>> response =
        (*stream)->Read(deadline);
    if (!response.ok()) {
      read_status = response.status();
      break;
    }
    if (!response->has_value()) break;
    const driver::ExecTaskStreamingResponse& frame = **response;
    switch (frame.frame_case()) {
      case driver::ExecTaskStreamingResponse::kStdout:
        if (!corrupt && !pattern_.Matches(received, frame.stdout())) {
          corrupt = true;
          LOG(ERROR) << what << ": stdout differs from stdin in the "
                     << frame.stdout().size() << " bytes at offset "
                     << received;
        }
        received += frame.stdout().size();
        break;
      case driver::ExecTaskStreamingResponse::kStderr:
        if (stderr_head.size() < 200) stderr_head += frame.stderr();
        break;
      case driver::ExecTaskStreamingResponse::kExit:
        exit = frame.exit();
        break;
      default:
        break;
    }
  }
  if (!read_status.ok()) (*stream)->Cancel();  // unblocks the sender
  sender.join();
  const Clock::time_point end = Clock::now();

  if (!read_status.ok()) {
    return Annotate(read_status,
                    absl::StrCat(what, ": reading stdout after ", received,
                                 " bytes (", sent, " sent)"));
  }
  if (!send_status.ok()) {
    return Annotate(send_status, absl::StrCat(what, ": sending stdin after ",
                                              sent, " bytes"));
  }
  std::vector<std::string> problems;
  if (!exit.has_value()) {
    problems.push_back("the call ended without an exit frame");
  } else if (!ExitedZero(*exit)) {
    problems.push_back(
        absl::StrCat(DescribeExit(*exit), "; expected exit_code 0"));
  }
  if (received != bytes) {
    problems.push_back(
        absl::StrCat("stdout carried ", received, " bytes; expected ", bytes));
  }
  if (corrupt) problems.push_back("stdout differs from stdin");
  if (!stderr_head.empty()) {
    problems.push_back(absl::StrCat("stderr \"", stderr_head.substr(0, 200),
                                    "\"; expected none"));
  }
  if (!problems.empty()) {
    return absl::DataLossError(
        absl::StrCat(what, ": ", absl::StrJoin(problems, "; ")));
  }
  const double seconds = Milliseconds(start, end) / 1000;
  return static_cast<double>(bytes) / seconds / 1e6;
}

absl::Status Bench::StreamRepeatedly(const std::string& task_id,
                                     absl::string_view subject, int warmup,
                                     int repetitions, uint64_t bytes,
                                     Figure& figure) {
  if (warmup > 0) {
    absl::StatusOr<double> rate = StreamOnce(
        task_id, subject, std::min<uint64_t>(bytes, uint64_t{16} << 20));
    if (!rate.ok()) return rate.status();
  }
  for (int i = 0; i < repetitions; ++i) {
    absl::StatusOr<double> rate = StreamOnce(task_id, subject, bytes);
    if (!rate.ok()) return rate.status();
    figure.Add(*rate);
  }
  return absl::OkStatus();
}

absl::Status Bench::MeasureStream(int warmup, int repetitions, uint64_t bytes,
                                  Figure& figure) {
  absl::StatusOr<std::string> task_id = Sleeper();
  if (!task_id.ok()) return task_id.status();
  return StreamRepeatedly(*task_id, absl::StrCat("task ", *task_id), warmup,
                          repetitions, bytes, figure);
}

absl::Status Bench::MeasureEchoStream(int warmup, int repetitions,
                                      uint64_t bytes, Figure& figure) {
  return StreamRepeatedly(
      kEchoTaskId,
      absl::StrCat("task ", kEchoTaskId, " of the gRPC echo server"), warmup,
      repetitions, bytes, figure);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseTags(
    const std::vector<std::string>& flags) {
  std::vector<std::pair<std::string, std::string>> tags;
  for (const std::string& flag : flags) {
    std::pair<std::string, std::string> tag =
        absl::StrSplit(flag, absl::MaxSplits('=', 1));
    if (tag.first.empty() || flag.find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tag_env: \"", flag, "\" is not of the form KEY=VALUE"));
    }
    tags.push_back(std::move(tag));
  }
  return tags;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "exec_driver_bench: FAILED: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

// --echo_server: echo_stream, against the echo server in a helper process.
int RunEcho(const std::vector<std::pair<std::string, std::string>>& tags,
            int warmup, int stream_repetitions, uint64_t stream_bytes) {
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return Fail(absl::InternalError(
        absl::StrCat("reading /proc/self/exe: ", error.message())));
  }
  TempDir dir(absl::GetFlag(FLAGS_tmp_dir));
  const std::string socket_path = dir.Join("echo.sock");
  absl::StatusOr<std::unique_ptr<Child>> server =
      Child::Start({self.string(), absl::StrCat("--serve_echo=", socket_path)});
  if (!server.ok()) {
    return Fail(Annotate(server.status(), "starting the gRPC echo server"));
  }
  absl::StatusOr<std::string> ready = (*server)->ReadLine(absl::Seconds(10));
  if (!ready.ok() || *ready != "ready") {
    return Fail(absl::InternalError(absl::StrCat(
        "the gRPC echo server (pid ", (*server)->pid(), ", ", self.string(),
        " --serve_echo=", socket_path, ") did not say ready: ",
        ready.ok() ? absl::StrCat("\"", *ready, "\"")
                   : std::string(ready.status().message()))));
  }
  std::printf("echo server %s (pid %d)\n", socket_path.c_str(),
              (*server)->pid());

  Figure figure("echo_stream", "MB/s");
  absl::Status status;
  {
    // As PluginProcess connects to a plugin once it is healthy.
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket_path, absl::Seconds(10));
    if (!channel.ok()) {
      return Fail(Annotate(channel.status(), "dialing the gRPC echo server"));
    }
    host::DriverClient::Options options;
    options.socket_path = socket_path;
    auto client = std::make_shared<host::DriverClient>(
        *channel, std::make_shared<host::PluginLifetime>("grpc-echo"), options);
    Bench bench(client, dir, tags);
    status = bench.MeasureEchoStream(warmup, stream_repetitions, stream_bytes,
                                     figure);
  }
  server->reset();  // closes its stdin: it shuts down, exits and is reaped
  if (!status.ok()) return Fail(status);
  std::printf("%s\n", figure.MedianLine().c_str());
  std::fflush(stdout);
  return 0;
}

// --serve_echo: the echo server until stdin ends.
int ServeEcho(const std::string& socket_path) {
  signal(SIGPIPE, SIG_IGN);
  EchoService service;
  UnixGrpcServer::Options options;
  options.socket_path = socket_path;
  options.services = {&service};
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
      UnixGrpcServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "exec_driver_bench --serve_echo: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char byte;
  while (true) {
    const ssize_t n = read(STDIN_FILENO, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  (*server)->Shutdown(absl::ZeroDuration());
  // The socket is gone and no call runs. Exit without destroying the server:
  // after long streams, grpc::Server's destructor (grpc_shutdown) can wait
  // up to 10 s for a gRPC poller thread in epoll_wait (gRPC 1.51).
  std::fflush(stderr);
  std::_Exit(0);
}

int Run(sigset_t signals) {
  const bool echo = absl::GetFlag(FLAGS_echo_server);
  const std::string binary = absl::GetFlag(FLAGS_driver);
  if (echo == !binary.empty()) {
    std::fprintf(stderr,
                 "exec_driver_bench: give either --driver=PATH or "
                 "--echo_server\n");
    return 2;
  }
  std::vector<std::string> figures = absl::GetFlag(FLAGS_figures);
  for (const std::string& figure : figures) {
    if (figure != "start" && figure != "exec" && figure != "stream" &&
        figure != "memory") {
      std::fprintf(stderr,
                   "exec_driver_bench: --figures: unknown figure \"%s\" "
                   "(start, exec, stream, memory)\n",
                   figure.c_str());
      return 2;
    }
  }
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  const int stream_repetitions = absl::GetFlag(FLAGS_stream_repetitions);
  const int64_t stream_bytes = absl::GetFlag(FLAGS_stream_bytes);
  if (warmup < 0 || repetitions < 1 || stream_repetitions < 1 ||
      stream_bytes < 1) {
    std::fprintf(stderr,
                 "exec_driver_bench: --warmup must be >= 0; --repetitions, "
                 "--stream_repetitions and --stream_bytes >= 1\n");
    return 2;
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> tags =
      ParseTags(absl::GetFlag(FLAGS_tag_env));
  if (!tags.ok()) {
    std::fprintf(stderr, "exec_driver_bench: %s\n",
                 std::string(tags.status().message()).c_str());
    return 2;
  }

  if (echo) {
    // The echo server inherits them. Before any thread.
    for (const auto& [key, value] : *tags) {
      setenv(key.c_str(), value.c_str(), 1);
    }
  }

  host::CallCanceller canceller;
  interrupt_canceller = &canceller;
  WatchSignals(signals);
  if (echo) {
    return RunEcho(*tags, warmup, stream_repetitions,
                   static_cast<uint64_t>(stream_bytes));
  }

  TempDir dir(absl::GetFlag(FLAGS_tmp_dir));
  for (const char* sub : {"state", "state/node", "state/node/tasks"}) {
    const std::string path = dir.Join(sub);
    if (mkdir(path.c_str(), 0755) != 0) {
      return Fail(absl::InternalError(
          absl::StrCat("cannot make ", path, ": ", strerror(errno))));
    }
  }
  host::LaunchOptions launch;
  launch.name = "bench";
  launch.binary = binary;
  launch.socket_dir = dir.Join("plugins");
  launch.env = *tags;
  absl::StatusOr<std::unique_ptr<host::PluginProcess>> plugin =
      host::PluginProcess::Launch(launch);
  if (!plugin.ok()) {
    return Fail(Annotate(plugin.status(),
                         absl::StrCat("launching the driver ", binary)));
  }
  std::printf("driver %s (pid %d)\n", binary.c_str(), (*plugin)->pid());
  std::shared_ptr<host::DriverClient> client = (*plugin)->client();

  plugin::v1::SetConfigRequest set_config;
  set_config.mutable_config();
  set_config.mutable_node()->set_node_id("exec-driver-bench");
  set_config.mutable_node()->set_runtime_dir(dir.path());
  set_config.mutable_node()->set_state_dir(dir.Join("state"));
  host::CallOptions options;
  options.deadline = absl::Now() + absl::GetFlag(FLAGS_call_timeout);
  options.canceller = interrupt_canceller;
  if (absl::Status configured = client->SetConfig(set_config, options).status();
      !configured.ok()) {
    return Fail(
        Annotate(configured, absl::StrCat("SetConfig of the driver ", binary)));
  }
  options.deadline = absl::Now() + absl::GetFlag(FLAGS_call_timeout);
  absl::StatusOr<driver::GetCapabilitiesResponse> capabilities =
      client->GetCapabilities({}, options);
  if (!capabilities.ok()) {
    return Fail(
        Annotate(capabilities.status(),
                 absl::StrCat("GetCapabilities of the driver ", binary)));
  }
  for (const std::string& figure : figures) {
    const driver::DriverCapabilities& can = capabilities->capabilities();
    if ((figure == "exec" && !can.exec()) ||
        (figure == "stream" && !can.exec_streaming())) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("the driver ", binary, " does not report the ",
                       figure == "exec" ? "exec" : "exec_streaming",
                       " capability needed for the ", figure, " figure")));
    }
  }

  std::vector<Figure> results;
  absl::Status status;
  {
    Bench bench(client, dir, *tags, (*plugin)->pid());
    for (const std::string& name : figures) {
      if (name == "start") {
        results.emplace_back("driver_start", "ms");
        status = bench.MeasureStart(warmup, repetitions, results.back());
      } else if (name == "exec") {
        results.emplace_back("driver_exec", "ms");
        status = bench.MeasureExec(warmup, repetitions, results.back());
      } else if (name == "memory") {
        results.emplace_back("task_memory", "kB");
        status = bench.MeasureMemory(absl::GetFlag(FLAGS_memory_tasks),
                                     results.back());
      } else {
        results.emplace_back("driver_stream", "MB/s");
        status = bench.MeasureStream(warmup, stream_repetitions,
                                     static_cast<uint64_t>(stream_bytes),
                                     results.back());
      }
      if (!status.ok()) break;
    }
  }  // the sleeper is destroyed here
  const host::PluginExit exit = (*plugin)->Stop();
  if (!status.ok()) return Fail(status);
  // Not what is measured (the conformance suite checks it): a warning.
  if (!exit.status_known || exit.exit_code != 0 || exit.signal != 0) {
    std::fprintf(
        stderr,
        "exec_driver_bench: WARNING: stopping the driver %s: it %s; "
        "expected an exit with code 0 within %s of Shutdown\n",
        binary.c_str(), exit.ToString().c_str(),
        absl::FormatDuration(host::PluginProcess::kDefaultStopGrace).c_str());
  }
  for (const Figure& figure : results) {
    std::printf("%s\n", figure.MedianLine().c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  // Before any thread: every thread inherits the mask, and WatchSignals's
  // thread receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::SetProgramUsageMessage(
      "Measures StartTask, ExecTask and ExecTaskStreaming of a driver plugin,\n"
      "or ExecTaskStreaming of a bare gRPC echo server.\n"
      "usage: exec_driver_bench --driver=PATH [flags]\n"
      "       exec_driver_bench --echo_server [flags]");
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  if (std::getenv("GLOG_minloglevel") == nullptr) {
    FLAGS_minloglevel = google::GLOG_WARNING;
  }
  google::InitGoogleLogging(argv[0]);
  const std::string serve_echo = absl::GetFlag(FLAGS_serve_echo);
  if (!serve_echo.empty()) {
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    return berth::bench::ServeEcho(serve_echo);
  }
  return berth::bench::Run(signals);
}
