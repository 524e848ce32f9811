// The mock driver in-process, through the SDK's server on a Unix socket.

#include "plugins/examples/mock_driver/mock_driver.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
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
    driver::v1::StartTaskRequest request;
    request.mutable_task()->set_id(id);
    EXPECT_TRUE(
        google::protobuf::util::JsonStringToMessage(
            config_json, request.mutable_task()->mutable_driver_config())
            .ok())
        << config_json;
    for (const auto& [key, value] : env) {
      (*request.mutable_task()->mutable_env())[key] = value;
    }
    driver::v1::StartTaskResponse ignored;
    grpc::ClientContext context;
    grpc::Status status = stub_->StartTask(
        &context, request, response != nullptr ? response : &ignored);
    if (status.ok()) started_.push_back(id);
    return status;
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
    return ReadFileOrEmpty(dir_.Join("state/t1.stdout")) == "ready\n";
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
  EXPECT_FALSE(PathExists(dir_.Join("state/t1.stdout")));
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
    return ReadFileOrEmpty(dir_.Join("state/t1.stdout")) == "ready\n";
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

  request.set_allocation_id("../t1");
  const absl::Status bad = driver.CreateNetwork(request).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("allocation_id"));
}

}  // namespace
}  // namespace berth::mock
