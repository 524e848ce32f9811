// The mock driver in-process, through the SDK's server on a Unix socket.

#include "plugins/examples/mock_driver/mock_driver.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/examples/mock_driver/task_state.h"
#include "plugins/sdk/plugin_server.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/testing.h"

namespace berth::mock {
namespace {

using ::berth::driver::v1::DriverService;
using ::berth::driver::v1::ExecTaskStreamingRequest;
using ::berth::driver::v1::ExecTaskStreamingResponse;
using ::berth::plugin::testing::PathExists;
using ::berth::plugin::testing::ReadFileOrEmpty;
using ::berth::plugin::testing::ShortTempDir;
using ::berth::plugin::testing::WaitFor;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

bool ProcessGone(pid_t pid) { return !PathExists(absl::StrCat("/proc/", pid)); }

// Whether the directory at `path` has no entries.
bool DirectoryIsEmpty(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return false;
  int entries = 0;
  while (dirent* entry = readdir(dir)) {
    if (std::string(entry->d_name) != "." &&
        std::string(entry->d_name) != "..") {
      ++entries;
    }
  }
  closedir(dir);
  return entries == 0;
}

// Whether a process has `word` as one of its arguments.
bool ProcessWithArgument(const std::string& word) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (dirent* entry = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    const std::string cmdline =
        ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cmdline"));
    for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
      if (arg == word) found = true;
    }
  }
  closedir(proc);
  return found;
}

// The size of the file at `path`; -1 if there is none.
int64_t FileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_size;
}

class MockDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ =
        std::make_unique<MockDriver>(MockDriverOptions{dir_.Join("state")});
    absl::StatusOr<std::unique_ptr<plugin::PluginServer>> server =
        plugin::PluginServer::Start(*driver_, {dir_.Join("mock.sock")});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        plugin::testing::Dial(server_->socket_path());
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = DriverService::NewStub(*channel);
  }

  void TearDown() override {
    // Leave no process behind, whatever the test did.
    for (const std::string& id : started_) {
      grpc::ClientContext context;
      driver::v1::DestroyTaskRequest request;
      request.set_task_id(id);
      request.set_force(true);
      driver::v1::DestroyTaskResponse response;
      stub_->DestroyTask(&context, request, &response);
    }
    server_.reset();
    driver_.reset();
  }

  grpc::Status Start(const std::string& id, const std::string& config_json,
                     driver::v1::StartTaskResponse* response = nullptr,
                     std::map<std::string, std::string> env = {}) {
    driver::v1::TaskConfig task = Config(id, config_json);
    for (const auto& [key, value] : env) (*task.mutable_env())[key] = value;
    return StartConfig(task, response);
  }

  grpc::Status StartConfig(const driver::v1::TaskConfig& task,
                           driver::v1::StartTaskResponse* response = nullptr) {
    driver::v1::StartTaskRequest request;
    *request.mutable_task() = task;
    driver::v1::StartTaskResponse ignored;
    grpc::ClientContext context;
    grpc::Status status = stub_->StartTask(
        &context, request, response != nullptr ? response : &ignored);
    if (status.ok()) started_.push_back(task.id());
    return status;
  }

  // A task `id` with `config_json` as its driver_config.
  static driver::v1::TaskConfig Config(const std::string& id,
                                       const std::string& config_json) {
    driver::v1::TaskConfig task;
    task.set_id(id);
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(
                    config_json, task.mutable_driver_config())
                    .ok())
        << config_json;
    return task;
  }

  // What the node does before StartTask: an empty task directory.
  std::string MakeTaskDir(const std::string& id) {
    const std::string tasks = dir_.Join("tasks");
    mkdir(tasks.c_str(), 0755);
    const std::string task_dir = absl::StrCat(tasks, "/", id);
    EXPECT_EQ(mkdir(task_dir.c_str(), 0755), 0) << task_dir;
    return task_dir;
  }

  grpc::Status Destroy(const std::string& id) {
    grpc::ClientContext context;
    driver::v1::DestroyTaskRequest request;
    request.set_task_id(id);
    request.set_force(true);
    driver::v1::DestroyTaskResponse response;
    return stub_->DestroyTask(&context, request, &response);
  }

  grpc::Status InspectStatus(const std::string& id) {
    grpc::ClientContext context;
    driver::v1::InspectTaskRequest request;
    request.set_task_id(id);
    driver::v1::InspectTaskResponse response;
    return stub_->InspectTask(&context, request, &response);
  }

  absl::StatusOr<driver::v1::ExitResult> Wait(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    driver::v1::WaitTaskRequest request;
    request.set_task_id(id);
    driver::v1::WaitTaskResponse response;
    grpc::Status status = stub_->WaitTask(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response.result();
  }

  grpc::Status Stop(const std::string& id, absl::Duration timeout,
                    const std::string& signal = "") {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;
    request.set_task_id(id);
    *request.mutable_timeout() = plugin::ToProtoDuration(timeout);
    request.set_signal(signal);
    driver::v1::StopTaskResponse response;
    return stub_->StopTask(&context, request, &response);
  }

  driver::v1::TaskStatus Inspect(const std::string& id) {
    grpc::ClientContext context;
    driver::v1::InspectTaskRequest request;
    request.set_task_id(id);
    driver::v1::InspectTaskResponse response;
    EXPECT_TRUE(stub_->InspectTask(&context, request, &response).ok());
    return response.status();
  }

  pid_t TaskPid(const std::string& id) {
    int pid = 0;
    EXPECT_TRUE(
        absl::SimpleAtoi(Inspect(id).driver_attributes().at("pid"), &pid));
    return pid;
  }

  ShortTempDir dir_;
  std::unique_ptr<MockDriver> driver_;
  std::unique_ptr<plugin::PluginServer> server_;
  std::unique_ptr<DriverService::Stub> stub_;
  std::vector<std::string> started_;
};

TEST_F(MockDriverTest, WaitTaskReturnsTheExitCode) {
  ASSERT_TRUE(
      Start("t1", R"({"command": "/bin/sh", "args": ["-c", "exit 3"]})").ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code(), 3);
  EXPECT_EQ(result->signal(), 0);
  EXPECT_TRUE(result->has_exited_at());
  // Again, after the exit.
  EXPECT_EQ(Wait("t1")->exit_code(), 3);
  driver::v1::TaskStatus status = Inspect("t1");
  EXPECT_EQ(status.state(), driver::v1::TASK_STATE_EXITED);
  EXPECT_EQ(status.exit_result().exit_code(), 3);
  EXPECT_TRUE(PathExists(dir_.Join("state/t1.exit")));
}

TEST_F(MockDriverTest, MissingCommandIsInvalidArgumentNamingIt) {
  grpc::Status status = Start("t1", R"({"args": ["x"]})");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("command"), HasSubstr("t1")));
}

TEST_F(MockDriverTest, BadCommandOrKnobIsInvalidArgumentAndLeavesNothing) {
  grpc::Status missing = Start("t1", R"({"command": "no-such-program-x"})");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(missing.error_message(), HasSubstr("no-such-program-x"));

  grpc::Status not_executable = Start("t1", R"({"command": "/etc/hostname"})");
  EXPECT_EQ(not_executable.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(not_executable.error_message(),
              AllOf(HasSubstr("/etc/hostname"), HasSubstr("t1")));

  grpc::Status bad_exit =
      Start("t1", R"({"command": "/bin/true", "exit_code": 300})");
  EXPECT_EQ(bad_exit.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_exit.error_message(), HasSubstr("exit_code"));

  grpc::Status bad_stats =
      Start("t1", R"({"command": "/bin/true", "fake_stats": {"cpu": 1}})");
  EXPECT_EQ(bad_stats.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_stats.error_message(), HasSubstr("fake_stats.cpu"));

  grpc::ClientContext context;
  driver::v1::InspectTaskRequest request;
  request.set_task_id("t1");
  driver::v1::InspectTaskResponse response;
  EXPECT_EQ(stub_->InspectTask(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
}

TEST_F(MockDriverTest, UnknownTaskIsNotFoundNamingIt) {
  absl::StatusOr<driver::v1::ExitResult> waited = Wait("ghost");
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(waited.status().message(), HasSubstr("ghost"));
  grpc::Status stopped = Stop("ghost", absl::Seconds(1));
  EXPECT_EQ(stopped.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(stopped.error_message(), HasSubstr("ghost"));
  grpc::ClientContext context;
  driver::v1::SignalTaskRequest signal;
  signal.set_task_id("ghost");
  signal.set_signal("HUP");
  driver::v1::SignalTaskResponse signalled;
  grpc::Status status = stub_->SignalTask(&context, signal, &signalled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("ghost"));
}

TEST_F(MockDriverTest, ExitCodeKnobAndRunFor) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"],
                             "run_for": "100ms", "exit_code": 7})")
                  .ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code(), 7);
  EXPECT_EQ(result->signal(), 0);

  ASSERT_TRUE(Start("t2", R"({"command": "/bin/true", "exit_code": 12})").ok());
  EXPECT_EQ(Wait("t2")->exit_code(), 12);
}

TEST_F(MockDriverTest, StopTaskSendsTheSignal) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  const pid_t pid = TaskPid("t1");
  ASSERT_TRUE(Stop("t1", absl::Seconds(30)).ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->signal(), SIGTERM);
  EXPECT_EQ(result->exit_code(), 0);
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }));
  EXPECT_TRUE(Stop("t1", absl::Seconds(1)).ok()) << "stopping an exited task";
}

TEST_F(MockDriverTest, StopTaskKillsATaskThatIgnoresTheSignal) {
  ASSERT_TRUE(Start("t1", R"({"command": "/bin/sh",
      "args": ["-c", "trap '' TERM; echo ready; sleep 300"]})")
                  .ok());
  // SIGTERM is ignored once the task said so.
  ASSERT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(dir_.Join("state/tasks/t1/logs/stdout.log")) ==
           "ready\n";
  }));
  ASSERT_TRUE(Stop("t1", absl::Milliseconds(200), "SIGTERM").ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->signal(), SIGKILL);
}

TEST_F(MockDriverTest, DestroyRunningTaskNeedsForce) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  const pid_t pid = TaskPid("t1");
  {
    grpc::ClientContext context;
    driver::v1::DestroyTaskRequest request;
    request.set_task_id("t1");
    driver::v1::DestroyTaskResponse response;
    grpc::Status status = stub_->DestroyTask(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("t1"));
  }
  EXPECT_FALSE(ProcessGone(pid));
  {
    grpc::ClientContext context;
    driver::v1::DestroyTaskRequest request;
    request.set_task_id("t1");
    request.set_force(true);
    driver::v1::DestroyTaskResponse response;
    ASSERT_TRUE(stub_->DestroyTask(&context, request, &response).ok());
  }
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }));
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
  EXPECT_FALSE(PathExists(dir_.Join("state/tasks/t1")));
  grpc::ClientContext context;
  driver::v1::InspectTaskRequest request;
  request.set_task_id("t1");
  driver::v1::InspectTaskResponse response;
  EXPECT_EQ(stub_->InspectTask(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(MockDriverTest, SignalTaskDeliversTheSignal) {
  const std::string marker = dir_.Join("usr1");
  ASSERT_TRUE(
      Start("t1", absl::StrCat(
                      R"({"command": "/bin/sh", "args": ["-c",
      "trap 'echo got >> )",
                      marker,
                      R"(' USR1; echo ready; while :; do sleep 0.01; done"]})"))
          .ok());
  // The trap is set once the task said so.
  ASSERT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(dir_.Join("state/tasks/t1/logs/stdout.log")) ==
           "ready\n";
  }));
  grpc::ClientContext context;
  driver::v1::SignalTaskRequest request;
  request.set_task_id("t1");
  request.set_signal("SIGUSR1");
  driver::v1::SignalTaskResponse response;
  ASSERT_TRUE(stub_->SignalTask(&context, request, &response).ok());
  EXPECT_TRUE(WaitFor([&] { return ReadFileOrEmpty(marker) == "got\n"; }));
}

TEST_F(MockDriverTest, TaskStatsMeasuresFromProc) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  grpc::ClientContext context;
  driver::v1::TaskStatsRequest request;
  request.set_task_id("t1");
  *request.mutable_interval() = plugin::ToProtoDuration(absl::Milliseconds(20));
  auto stream = stub_->TaskStats(&context, request);
  driver::v1::TaskStatsResponse first;
  ASSERT_TRUE(stream->Read(&first));
  const stats::v1::TaskResourceUsage& usage = first.usage();
  EXPECT_EQ(usage.task_id(), "t1");
  EXPECT_EQ(usage.backend(), stats::v1::BACKEND_PROCFS);
  EXPECT_THAT(usage.usage().cpu().measured(),
              Contains(stats::v1::CPU_FIELD_USER_MODE));
  EXPECT_THAT(usage.usage().memory().measured(),
              Contains(stats::v1::MEMORY_FIELD_RSS));
  EXPECT_GT(usage.usage().memory().rss(), 0);
  driver::v1::TaskStatsResponse second;
  ASSERT_TRUE(stream->Read(&second));
  EXPECT_THAT(second.usage().usage().cpu().measured(),
              Contains(stats::v1::CPU_FIELD_PERCENT))
      << "the second sample has a percent";
  context.TryCancel();
  while (stream->Read(&second)) {
  }
}

TEST_F(MockDriverTest, TaskStatsReportsFakeStats) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"],
      "fake_stats": {"cpu_percent": 50, "rss_bytes": 4096}})")
                  .ok());
  grpc::ClientContext context;
  driver::v1::TaskStatsRequest request;
  request.set_task_id("t1");
  auto stream = stub_->TaskStats(&context, request);
  driver::v1::TaskStatsResponse sample;
  ASSERT_TRUE(stream->Read(&sample));
  EXPECT_EQ(sample.usage().usage().cpu().percent(), 50);
  EXPECT_EQ(sample.usage().usage().memory().rss(), 4096);
  EXPECT_THAT(sample.usage().usage().cpu().measured(),
              Contains(stats::v1::CPU_FIELD_PERCENT));
  EXPECT_GE(sample.usage().usage().cpu().total_ticks(), 0);
  context.TryCancel();
  while (stream->Read(&sample)) {
  }
}

TEST_F(MockDriverTest, ExecTaskRunsWithTheTasksEnvironment) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})", nullptr,
                    {{"GREETING", "hello"}})
                  .ok());
  grpc::ClientContext context;
  driver::v1::ExecTaskRequest request;
  request.set_task_id("t1");
  for (const char* word :
       {"/bin/sh", "-c", "echo $GREETING; echo oops >&2; exit 4"}) {
    request.add_command(word);
  }
  driver::v1::ExecTaskResponse response;
  ASSERT_TRUE(stub_->ExecTask(&context, request, &response).ok());
  EXPECT_EQ(response.stdout(), "hello\n");
  EXPECT_EQ(response.stderr(), "oops\n");
  EXPECT_EQ(response.result().exit_code(), 4);
}

TEST_F(MockDriverTest, ExecTaskTimesOut) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  grpc::ClientContext context;
  driver::v1::ExecTaskRequest request;
  request.set_task_id("t1");
  request.add_command("sleep");
  request.add_command("300");
  *request.mutable_timeout() = plugin::ToProtoDuration(absl::Milliseconds(100));
  driver::v1::ExecTaskResponse response;
  grpc::Status status = stub_->ExecTask(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(), HasSubstr("t1"));
}

// An ExecTaskStreaming call whose output a thread collects.
class ExecCall {
 public:
  ExecCall(DriverService::Stub* stub, const std::string& task_id,
           std::vector<std::string> command, bool tty,
           plugin::TerminalSize size = {}) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    stream_ = stub->ExecTaskStreaming(&context_);
    ExecTaskStreamingRequest setup;
    setup.mutable_setup()->set_task_id(task_id);
    for (std::string& word : command) setup.mutable_setup()->add_command(word);
    setup.mutable_setup()->set_tty(tty);
    setup.mutable_setup()->mutable_terminal_size()->set_rows(size.rows);
    setup.mutable_setup()->mutable_terminal_size()->set_columns(size.columns);
    stream_->Write(setup);
    reader_ = std::thread([this] {
      ExecTaskStreamingResponse response;
      while (stream_->Read(&response)) {
        absl::MutexLock lock(&mu_);
        if (response.has_exit()) {
          exit_ = response.exit();
          has_exit_ = true;
        } else if (has_exit_) {
          output_after_exit_ = true;
        }
        out_ += response.stdout();
        err_ += response.stderr();
      }
    });
  }
  ~ExecCall() {
    if (reader_.joinable()) {
      context_.TryCancel();
      reader_.join();
    }
  }

  void Stdin(const std::string& data) {
    ExecTaskStreamingRequest request;
    request.set_stdin(data);
    stream_->Write(request);
  }
  void Resize(uint32_t rows, uint32_t columns) {
    ExecTaskStreamingRequest request;
    request.mutable_resize()->set_rows(rows);
    request.mutable_resize()->set_columns(columns);
    stream_->Write(request);
  }
  void CloseStdin() {
    ExecTaskStreamingRequest request;
    request.mutable_stdin_close();
    stream_->Write(request);
  }
  std::string out() {
    absl::MutexLock lock(&mu_);
    return out_;
  }
  void Cancel() { context_.TryCancel(); }
  // Half-closes, waits for the end; the call's status.
  grpc::Status Finish() {
    stream_->WritesDone();
    reader_.join();
    return stream_->Finish();
  }
  std::string err() {
    absl::MutexLock lock(&mu_);
    return err_;
  }
  bool has_exit() {
    absl::MutexLock lock(&mu_);
    return has_exit_;
  }
  bool output_after_exit() {
    absl::MutexLock lock(&mu_);
    return output_after_exit_;
  }
  driver::v1::ExitResult exit() {
    absl::MutexLock lock(&mu_);
    return exit_;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ExecTaskStreamingRequest,
                                           ExecTaskStreamingResponse>>
      stream_;
  std::thread reader_;
  absl::Mutex mu_;
  std::string out_ ABSL_GUARDED_BY(mu_);
  std::string err_ ABSL_GUARDED_BY(mu_);
  bool has_exit_ ABSL_GUARDED_BY(mu_) = false;
  bool output_after_exit_ ABSL_GUARDED_BY(mu_) = false;
  driver::v1::ExitResult exit_ ABSL_GUARDED_BY(mu_);
};

TEST_F(MockDriverTest, ExecStreamingStdoutStderrAndExitCode) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  ExecCall call(stub_.get(), "t1",
                {"/bin/sh", "-c", "echo out; echo err >&2; exit 43"}, false);
  ASSERT_TRUE(call.Finish().ok());
  EXPECT_EQ(call.out(), "out\n");
  EXPECT_EQ(call.err(), "err\n");
  ASSERT_TRUE(call.has_exit());
  EXPECT_EQ(call.exit().exit_code(), 43);
  EXPECT_FALSE(call.output_after_exit());
}

TEST_F(MockDriverTest, ExecStreamingCatsStdinUntilItsEnd) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  ExecCall call(stub_.get(), "t1", {"cat"}, false);
  std::string sent;
  for (int i = 0; i < 100; ++i) {
    const std::string chunk =
        absl::StrCat("chunk ", i, std::string(1000, '-'), "\n");
    sent += chunk;
    call.Stdin(chunk);
  }
  call.CloseStdin();
  ASSERT_TRUE(call.Finish().ok());
  EXPECT_EQ(call.out(), sent);
  EXPECT_EQ(call.exit().exit_code(), 0);
}

TEST_F(MockDriverTest, ExecStreamingWithATerminal) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  ExecCall call(stub_.get(), "t1", {"/bin/sh"}, true, {30, 100});
  call.Stdin("stty size; printf 'a\\nb\\n'\n");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(call.out(), "30 100\r\n") &&
           absl::StrContains(call.out(), "a\r\nb\r\n");
  })) << call.out();
  // A resize is applied before long: ask until stty sees it.
  call.Resize(40, 120);
  ASSERT_TRUE(WaitFor([&] {
    call.Stdin("stty size\n");
    return WaitFor([&] { return absl::StrContains(call.out(), "40 120\r\n"); },
                   absl::Milliseconds(200));
  })) << call.out();
  call.Stdin("exit 5\n");
  ASSERT_TRUE(call.Finish().ok());
  EXPECT_EQ(call.exit().exit_code(), 5);
}

TEST_F(MockDriverTest, CancellingExecStreamingKillsTheCommand) {
  ASSERT_TRUE(Start("t1", R"({"command": "sleep", "args": ["300"]})").ok());
  ExecCall call(stub_.get(), "t1", {"/bin/sh", "-c", "echo $$; exec sleep 300"},
                false);
  pid_t pid = 0;
  ASSERT_TRUE(WaitFor([&] {
    return absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(call.out()),
                            &pid) &&
           absl::EndsWith(call.out(), "\n");
  }));
  ASSERT_FALSE(ProcessGone(pid));
  call.Cancel();
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }));
}

TEST_F(MockDriverTest, RecoverRefusesAReusedPid) {
  driver::v1::StartTaskResponse started;
  ASSERT_TRUE(
      Start("t1", R"({"command": "sleep", "args": ["300"]})", &started).ok());
  absl::StatusOr<HandleState> state =
      DecodeTaskState(started.handle().driver_state());
  ASSERT_TRUE(state.ok()) << state.status();

  // Another instance of the driver, as after a restart.
  MockDriver restarted(MockDriverOptions{dir_.Join("state")});
  {
    HandleState forged = *state;
    forged.task_start_ticks += 1;  // as if pid task_pid were another process
    driver::v1::TaskHandle handle = started.handle();
    handle.set_driver_state(EncodeTaskState(forged));
    absl::StatusOr<driver::v1::TaskStatus> recovered =
        restarted.RecoverTask(handle);
    EXPECT_EQ(recovered.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(recovered.status().message(),
                AllOf(HasSubstr("t1"), HasSubstr("reused"),
                      HasSubstr(absl::StrCat(state->task_pid))));
  }
  {
    HandleState forged = *state;
    forged.monitor_start_ticks += 1;
    driver::v1::TaskHandle handle = started.handle();
    handle.set_driver_state(EncodeTaskState(forged));
    absl::StatusOr<driver::v1::TaskStatus> recovered =
        restarted.RecoverTask(handle);
    EXPECT_EQ(recovered.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(recovered.status().message(), HasSubstr("monitor"));
  }
  {
    driver::v1::TaskHandle handle = started.handle();
    handle.set_driver_state("monitor_pid=1\n");
    absl::StatusOr<driver::v1::TaskStatus> recovered =
        restarted.RecoverTask(handle);
    EXPECT_EQ(recovered.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(recovered.status().message(), HasSubstr("driver_state"));
  }
  // The genuine handle is recovered.
  absl::StatusOr<driver::v1::TaskStatus> recovered =
      restarted.RecoverTask(started.handle());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), driver::v1::TASK_STATE_RUNNING);
  ASSERT_TRUE(restarted.StopTask("t1", absl::Seconds(30), SIGTERM).ok());
  EXPECT_EQ(restarted.InspectTask("t1")->exit_result().signal(), SIGTERM);
}

// InspectTask carries the handle StartTask returned (for a node that never
// got that reply), and another instance of the driver recovers the task
// from it; with no_handle_of it carries none.
TEST_F(MockDriverTest, InspectTaskGivesTheHandleStartTaskReturned) {
  driver::v1::StartTaskResponse started;
  ASSERT_TRUE(Start("t1", R"({"command": "/bin/sh", "args": ["-c", "exit 4"]})",
                    &started)
                  .ok());
  ASSERT_TRUE(Wait("t1").ok());
  grpc::ClientContext context;
  driver::v1::InspectTaskRequest request;
  request.set_task_id("t1");
  driver::v1::InspectTaskResponse inspected;
  ASSERT_TRUE(stub_->InspectTask(&context, request, &inspected).ok());
  ASSERT_TRUE(inspected.has_handle());
  const driver::v1::TaskHandle& handle = inspected.handle();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      handle.config(), started.handle().config()))
      << handle.config().DebugString();
  EXPECT_EQ(handle.version(), started.handle().version());
  EXPECT_EQ(handle.driver_state(), started.handle().driver_state());
  EXPECT_EQ(handle.state(), driver::v1::TASK_STATE_EXITED);
  EXPECT_EQ(driver_->HandleOf("nope").status().code(),
            absl::StatusCode::kNotFound);

  MockDriver restarted(MockDriverOptions{dir_.Join("state")});
  absl::StatusOr<driver::v1::TaskStatus> recovered =
      restarted.RecoverTask(handle);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->exit_result().exit_code(), 4);

  MockDriverOptions without;
  without.default_state_dir = dir_.Join("state");
  without.no_handle_of = true;
  MockDriver old(without);
  ASSERT_TRUE(old.RecoverTask(handle).ok());
  EXPECT_EQ(old.HandleOf("t1").status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST_F(MockDriverTest, StateDirectoryFollowsSetConfig) {
  EXPECT_EQ(driver_->state_dir(), dir_.Join("state"));
  plugin::v1::NodeContext node;
  node.set_state_dir(dir_.Join("node"));
  ASSERT_TRUE(driver_->SetConfig({}, node).ok());
  EXPECT_EQ(driver_->state_dir(), dir_.Join("node/mock"));
  ASSERT_TRUE(Start("t1", R"({"command": "/bin/true"})").ok());
  ASSERT_TRUE(Wait("t1").ok());
  EXPECT_TRUE(PathExists(dir_.Join("node/mock/t1.exit")));
}

// ---- Task directory, output and working directory (driver contract).

TEST_F(MockDriverTest, OutputGoesToTheTaskDirectoryRotated) {
  const std::string task_dir = MakeTaskDir("t1");
  driver::v1::TaskConfig task =
      Config("t1", R"({"command": "/bin/sh", "args": ["-c",
          "seq 1 3000; echo oops >&2"]})");
  task.set_task_dir(task_dir);
  task.mutable_logs()->set_max_file_bytes(1000);
  task.mutable_logs()->set_max_files(3);
  ASSERT_TRUE(StartConfig(task).ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code(), 0);

  // All of it is there once WaitTask returned.
  std::string printed;
  for (int i = 1; i <= 3000; ++i) absl::StrAppend(&printed, i, "\n");
  const std::string logs = task_dir + "/logs";
  const int64_t current = FileSize(logs + "/stdout.log");
  EXPECT_GT(current, 0);
  EXPECT_LE(current, 1000);
  std::string kept;
  for (int i = 3; i >= 1; --i) {
    const std::string rotated = absl::StrCat(logs, "/stdout.log.", i);
    EXPECT_EQ(FileSize(rotated), 1000) << rotated;
    kept += ReadFileOrEmpty(rotated);
  }
  kept += ReadFileOrEmpty(logs + "/stdout.log");
  EXPECT_FALSE(PathExists(logs + "/stdout.log.4"));
  EXPECT_EQ(kept.size(), 3000 + current);
  EXPECT_TRUE(absl::EndsWith(printed, kept)) << "kept in order";
  EXPECT_EQ(ReadFileOrEmpty(logs + "/stderr.log"), "oops\n");
  EXPECT_FALSE(PathExists(logs + "/stderr.log.1"));
  EXPECT_EQ(Inspect("t1").driver_attributes().at("stdout_path"),
            logs + "/stdout.log");
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.stdout")));

  // DestroyTask removes what the driver made there, and only that.
  ASSERT_TRUE(Start("t2", R"({"command": "/bin/true"})").ok());  // unrelated
  ASSERT_TRUE(Destroy("t1").ok());
  EXPECT_FALSE(PathExists(logs));
  EXPECT_TRUE(PathExists(dir_.Join("state/tasks/t2/logs/stdout.log")));
}

TEST_F(MockDriverTest, DefaultLimitsKeepOneFileAndOutputWrittenJustBeforeExit) {
  const std::string task_dir = MakeTaskDir("t1");
  driver::v1::TaskConfig task =
      Config("t1", R"({"command": "/bin/sh", "args": ["-c",
          "head -c 300000 /dev/zero; exit 3"]})");
  task.set_task_dir(task_dir);
  ASSERT_TRUE(StartConfig(task).ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code(), 3);
  EXPECT_EQ(FileSize(task_dir + "/logs/stdout.log"), 300000);
  EXPECT_FALSE(PathExists(task_dir + "/logs/stdout.log.1"));
  EXPECT_EQ(FileSize(task_dir + "/logs/stderr.log"), 0);
}

TEST_F(MockDriverTest, ExitIsRecordedWhileAnEscapedProcessHoldsTheOutput) {
  // A process in a session of its own keeps stdout open after the main
  // process exits: the exit is still recorded (after a bounded drain).
  const std::string marker = absl::StrCat("307.", getpid());
  const std::string pid_file = dir_.Join("escaped");
  ASSERT_TRUE(
      Start("t1",
            absl::StrCat(R"({"command": "/bin/sh", "args": ["-c",
      "setsid /bin/sh -c 'echo $$ > )",
                         pid_file, R"(; exec sleep )", marker,
                         R"(' & while [ ! -s )", pid_file,
                         R"( ]; do sleep 0.01; done; echo out; exit 4"]})"))
          .ok());
  absl::StatusOr<driver::v1::ExitResult> result = Wait("t1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code(), 4);
  EXPECT_EQ(ReadFileOrEmpty(dir_.Join("state/tasks/t1/logs/stdout.log")),
            "out\n");
  pid_t escaped = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::StripTrailingAsciiWhitespace(ReadFileOrEmpty(pid_file)), &escaped));
  ASSERT_GT(escaped, 0);
  EXPECT_TRUE(WaitFor([&] {
    return absl::StrContains(
        ReadFileOrEmpty(absl::StrCat("/proc/", escaped, "/cmdline")), marker);
  })) << "still running, holding the output";
  kill(escaped, SIGKILL);
}

TEST_F(MockDriverTest, AMissingTaskDirectoryIsMadeAndDestroyRemovesIt) {
  const std::string task_dir = dir_.Join("tasks/deep/t1");
  driver::v1::TaskConfig task =
      Config("t1", R"({"command": "/bin/sh", "args": ["-c", "pwd"]})");
  task.set_task_dir(task_dir);
  ASSERT_TRUE(StartConfig(task).ok());
  ASSERT_TRUE(Wait("t1").ok());
  EXPECT_EQ(ReadFileOrEmpty(task_dir + "/logs/stdout.log"), task_dir + "\n");
  ASSERT_TRUE(Destroy("t1").ok());
  EXPECT_FALSE(PathExists(task_dir));
}

TEST_F(MockDriverTest, WithoutATaskDirectoryTheDriverKeepsOneInItsState) {
  ASSERT_TRUE(
      Start("t1", R"({"command": "/bin/sh", "args": ["-c", "pwd; echo x>f"]})")
          .ok());
  ASSERT_TRUE(Wait("t1").ok());
  const std::string task_dir = dir_.Join("state/tasks/t1");
  EXPECT_EQ(ReadFileOrEmpty(task_dir + "/logs/stdout.log"), task_dir + "\n");
  EXPECT_EQ(ReadFileOrEmpty(task_dir + "/f"), "x\n");
  EXPECT_EQ(Inspect("t1").driver_attributes().at("task_dir"), task_dir);
  ASSERT_TRUE(Destroy("t1").ok());
  EXPECT_FALSE(PathExists(task_dir));
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
}

TEST_F(MockDriverTest, WorkDirIsMadeInTheTaskDirectoryAndExecsRunThere) {
  const std::string task_dir = MakeTaskDir("t1");
  driver::v1::TaskConfig task =
      Config("t1", R"({"command": "/bin/sh", "work_dir": "a/b",
          "args": ["-c", "pwd; exec sleep 300"]})");
  task.set_task_dir(task_dir);
  ASSERT_TRUE(StartConfig(task).ok());
  const std::string work_dir = task_dir + "/a/b";
  EXPECT_TRUE(WaitFor([&] {
    return ReadFileOrEmpty(task_dir + "/logs/stdout.log") == work_dir + "\n";
  })) << ReadFileOrEmpty(task_dir + "/logs/stdout.log");
  EXPECT_EQ(Inspect("t1").driver_attributes().at("work_dir"), work_dir);

  grpc::ClientContext context;
  driver::v1::ExecTaskRequest request;
  request.set_task_id("t1");
  request.add_command("pwd");
  driver::v1::ExecTaskResponse response;
  ASSERT_TRUE(stub_->ExecTask(&context, request, &response).ok());
  EXPECT_EQ(response.stdout(), work_dir + "\n");
  ExecCall call(stub_.get(), "t1", {"pwd"}, false);
  ASSERT_TRUE(call.Finish().ok());
  EXPECT_EQ(call.out(), work_dir + "\n");

  ASSERT_TRUE(Destroy("t1").ok());
  EXPECT_FALSE(PathExists(task_dir + "/a")) << "the driver made it";
  EXPECT_FALSE(PathExists(task_dir + "/logs"));
}

TEST_F(MockDriverTest, WorkDirMayBeAnAbsolutePathInsideOrAnExistingOne) {
  const std::string task_dir = MakeTaskDir("t1");
  ASSERT_EQ(mkdir((task_dir + "/kept").c_str(), 0755), 0);
  driver::v1::TaskConfig task =
      Config("t1", absl::StrCat(R"({"command": "/bin/sh", "args": ["-c", "pwd"],
          "work_dir": ")",
                                task_dir, R"(/kept/./"})"));
  task.set_task_dir(task_dir);
  ASSERT_TRUE(StartConfig(task).ok());
  ASSERT_TRUE(Wait("t1").ok());
  EXPECT_EQ(ReadFileOrEmpty(task_dir + "/logs/stdout.log"),
            task_dir + "/kept\n");
  ASSERT_TRUE(Destroy("t1").ok());
  EXPECT_TRUE(PathExists(task_dir + "/kept")) << "not the driver's";
}

TEST_F(MockDriverTest, WorkDirOutsideTheTaskDirectoryIsRefusedLeavingNothing) {
  const std::string task_dir = MakeTaskDir("t1");
  for (const std::string& work_dir :
       {std::string("../x"), std::string("a/../../x"), dir_.Join("x"),
        std::string("/")}) {
    driver::v1::TaskConfig task =
        Config("t1", absl::StrCat(R"({"command": "/bin/true", "work_dir": ")",
                                  work_dir, R"("})"));
    task.set_task_dir(task_dir);
    grpc::Status status = StartConfig(task);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << work_dir;
    EXPECT_THAT(status.error_message(),
                AllOf(HasSubstr("driver_config.work_dir"), HasSubstr("t1")));
    EXPECT_EQ(InspectStatus("t1").error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_FALSE(PathExists(dir_.Join("tasks/x")));
  EXPECT_FALSE(PathExists(dir_.Join("x")));
  EXPECT_FALSE(PathExists(task_dir + "/logs"));
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
}

TEST_F(MockDriverTest, AFailedStartRemovesWhatItMade) {
  const std::string task_dir = MakeTaskDir("t1");
  driver::v1::TaskConfig task =
      Config("t1", R"({"command": "/bin/true", "work_dir": "made/here"})");
  task.set_task_dir(task_dir);
  // A path with a slash is not looked up: the exec fails, in the working
  // directory, once the directories are made.
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "./not-there");
  grpc::Status status = StartConfig(task);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not-there"));
  EXPECT_EQ(InspectStatus("t1").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(PathExists(task_dir));
  EXPECT_FALSE(PathExists(task_dir + "/logs"));
  EXPECT_FALSE(PathExists(task_dir + "/made"));
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
}

TEST_F(MockDriverTest, GroupNetworkIsRefusedNamingTheFieldLeavingNothing) {
  const std::string task_dir = MakeTaskDir("t1");
  const std::string marker = absl::StrCat("309.", getpid());
  for (driver::v1::NetworkIsolationMode mode :
       {driver::v1::NETWORK_ISOLATION_MODE_GROUP,
        driver::v1::NETWORK_ISOLATION_MODE_TASK}) {
    driver::v1::TaskConfig task = Config(
        "t1",
        absl::StrCat(R"({"command": "sleep", "args": [")", marker, R"("]})"));
    task.set_task_dir(task_dir);
    task.mutable_network()->set_mode(mode);
    task.mutable_network()->set_namespace_path("/var/run/netns/berth-t1");
    grpc::Status status = StartConfig(task);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                AllOf(HasSubstr("network.mode"), HasSubstr("t1")));
    EXPECT_EQ(InspectStatus("t1").error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_FALSE(ProcessWithArgument(marker));
  EXPECT_TRUE(DirectoryIsEmpty(task_dir));
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.exit")));
  EXPECT_FALSE(PathExists(dir_.Join("state/tasks")));
  EXPECT_THAT(driver_->Capabilities().network_isolation_modes(),
              ::testing::ElementsAre(driver::v1::NETWORK_ISOLATION_MODE_HOST));

  // The host's network is fine.
  driver::v1::TaskConfig host = Config("t1", R"({"command": "/bin/true"})");
  host.set_task_dir(task_dir);
  host.mutable_network()->set_mode(driver::v1::NETWORK_ISOLATION_MODE_HOST);
  ASSERT_TRUE(StartConfig(host).ok());
  EXPECT_TRUE(Wait("t1").ok());
}

TEST_F(MockDriverTest, RecoverRefusesAHandleNamingDirectoriesOutsideTheTask) {
  driver::v1::StartTaskResponse started;
  ASSERT_TRUE(
      Start("t1", R"({"command": "sleep", "args": ["300"]})", &started).ok());
  absl::StatusOr<HandleState> state =
      DecodeTaskState(started.handle().driver_state());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->task_dir, dir_.Join("state/tasks/t1"));
  EXPECT_TRUE(state->made_task_dir);
  MockDriver restarted(MockDriverOptions{dir_.Join("state")});
  for (auto forge : std::vector<std::function<void(HandleState*)>>{
           [](HandleState* s) { s->made_work_dir = "/etc"; },
           [](HandleState* s) { s->task_dir = "/"; },
           [](HandleState* s) { s->task_dir += "/../.."; },
       }) {
    HandleState forged = *state;
    forge(&forged);
    driver::v1::TaskHandle handle = started.handle();
    handle.set_driver_state(EncodeTaskState(forged));
    absl::StatusOr<driver::v1::TaskStatus> recovered =
        restarted.RecoverTask(handle);
    EXPECT_EQ(recovered.status().code(), absl::StatusCode::kInvalidArgument)
        << EncodeTaskState(forged);
    EXPECT_THAT(recovered.status().message(), HasSubstr("driver_state"));
  }
}

// Without must_create_network the host's network hook does the work:
// CreateNetwork is not served and the capabilities do not ask for it.
TEST(MockDriverNetworkTest, NotServedUnlessConfigured) {
  ShortTempDir dir;
  MockDriver driver(MockDriverOptions{dir.Join("state")});
  EXPECT_FALSE(driver.Capabilities().must_create_network());
  driver::v1::CreateNetworkRequest request;
  request.set_allocation_id("t1");
  EXPECT_TRUE(absl::IsUnimplemented(driver.CreateNetwork(request).status()));
}

TEST(MockDriverNetworkTest, CreateIsIdempotentAndDestroyRemovesTheRecord) {
  ShortTempDir dir;
  MockDriver driver(MockDriverOptions{dir.Join("state"),
                                      /*must_create_network=*/true});
  const driver::v1::DriverCapabilities caps = driver.Capabilities();
  EXPECT_TRUE(caps.must_create_network());
  EXPECT_THAT(caps.network_isolation_modes(),
              Contains(driver::v1::NETWORK_ISOLATION_MODE_GROUP));

  driver::v1::CreateNetworkRequest request;
  request.set_allocation_id("t1");
  request.set_hostname("web");
  absl::StatusOr<driver::v1::CreateNetworkResponse> made =
      driver.CreateNetwork(request);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->created());
  EXPECT_EQ(made->status().allocation_id(), "t1");
  ASSERT_EQ(made->status().addresses_size(), 1);
  EXPECT_EQ(made->status().addresses(0).cidr(), "192.0.2.1/24");
  const std::string record = dir.Join("state/networks/t1");
  EXPECT_EQ(ReadFileOrEmpty(record), "web\n");

  made = driver.CreateNetwork(request);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_FALSE(made->created());  // a repeated call

  ASSERT_TRUE(driver.DestroyNetwork("t1").ok());
  EXPECT_FALSE(PathExists(record));
  EXPECT_TRUE(driver.DestroyNetwork("t1").ok());  // unknown: not an error

  // A task of the group runs (on the host's network).
  driver::v1::TaskConfig task;
  task.set_id("t1");
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "/bin/true");
  task.mutable_network()->set_mode(driver::v1::NETWORK_ISOLATION_MODE_GROUP);
  ASSERT_TRUE(driver.StartTask(task).ok());
  ASSERT_TRUE(driver.StopTask("t1", absl::Seconds(30), SIGTERM).ok());
  ASSERT_TRUE(driver.DestroyTask("t1", /*force=*/true).ok());

  request.set_allocation_id("../t1");
  const absl::Status bad = driver.CreateNetwork(request).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("allocation_id"));
}

// With must_create_network the mock lists GROUP: it joins namespace_path
// (its own networks have none: those tasks stay on the host's network).
TEST(MockDriverNetworkTest, GroupTaskJoinsTheNamespaceItIsGiven) {
  ShortTempDir dir;
  MockDriver driver(MockDriverOptions{dir.Join("state"),
                                      /*must_create_network=*/true});
  driver::v1::TaskConfig task;
  task.set_id("t1");
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "readlink");
  *(*task.mutable_driver_config()->mutable_fields())["args"]
       .mutable_list_value()
       ->add_values() = [] {
    google::protobuf::Value arg;
    arg.set_string_value("/proc/self/ns/net");
    return arg;
  }();
  task.mutable_network()->set_mode(driver::v1::NETWORK_ISOLATION_MODE_GROUP);

  // A missing namespace: refused naming the field, nothing left.
  task.mutable_network()->set_namespace_path(dir.Join("no-such-netns"));
  absl::Status refused = driver.StartTask(task).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("network.namespace_path"));
  EXPECT_TRUE(absl::IsNotFound(driver.InspectTask("t1").status()));
  EXPECT_FALSE(PathExists(dir.Join("state/tasks/t1")));

  // A namespace of a child of ours.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    const char status = unshare(CLONE_NEWNET) == 0 ? 0 : 1;
    (void)!write(ready[1], &status, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char status = 1;
  ASSERT_EQ(read(ready[0], &status, 1), 1);
  close(ready[0]);
  auto reap = [&] {
    kill(holder, SIGKILL);
    waitpid(holder, nullptr, 0);
  };
  if (status != 0) {
    reap();
    GTEST_SKIP() << "cannot make a network namespace (needs CAP_SYS_ADMIN)";
  }
  const std::string netns = absl::StrCat("/proc/", holder, "/ns/net");
  char link[64] = {};
  ASSERT_GT(readlink(netns.c_str(), link, sizeof(link) - 1), 0);
  task.mutable_network()->set_namespace_path(netns);
  ASSERT_TRUE(driver.StartTask(task).ok());
  absl::StatusOr<driver::v1::ExitResult> result = driver.WaitTask("t1", {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFileOrEmpty(dir.Join("state/tasks/t1/logs/stdout.log")),
            absl::StrCat(link, "\n"));
  ASSERT_TRUE(driver.DestroyTask("t1", /*force=*/true).ok());
  reap();
}

}  // namespace
}  // namespace berth::mock
