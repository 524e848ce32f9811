// The mock driver binary as a host runs it: killed (SIGKILL) and launched
// again, its tasks survive and RecoverTask takes them back, running or
// exited; a large exec transfer through it keeps every byte.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/testing.h"

namespace berth::mock {
namespace {

using ::berth::driver::v1::DriverService;
using ::berth::plugin::testing::PathExists;
using ::berth::plugin::testing::PluginProcess;
using ::berth::plugin::testing::ReadFileOrEmpty;
using ::berth::plugin::testing::ShortTempDir;
using ::berth::plugin::testing::WaitFor;

bool ProcessGone(pid_t pid) { return !PathExists(absl::StrCat("/proc/", pid)); }

class MockDriverBinaryTest : public ::testing::Test {
 protected:
  ~MockDriverBinaryTest() override {
    // Whatever happened, no task outlives the test.
    for (pid_t pid : task_pids_) kill(-pid, SIGKILL);
  }

  // Launches the plugin and connects to it.
  void Launch() {
    plugin_.reset();
    PluginProcess::Options options;
    options.binary = plugin::testing::RunfilePath(
        "plugins/examples/mock_driver/mock_driver");
    options.socket_dir = dir_.Join("plugins");
    options.stderr_path = dir_.Join(absl::StrCat("stderr.", ++launches_));
    absl::StatusOr<std::unique_ptr<PluginProcess>> process =
        PluginProcess::Launch(options);
    ASSERT_TRUE(process.ok()) << process.status();
    plugin_ = *std::move(process);
    absl::StatusOr<std::string> line = plugin_->ReadStdoutLine();
    ASSERT_TRUE(line.ok()) << line.status() << "\n"
                           << ReadFileOrEmpty(options.stderr_path);
    absl::StatusOr<plugin::Handshake> handshake = plugin::ParseHandshake(*line);
    ASSERT_TRUE(handshake.ok()) << handshake.status();
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        plugin::testing::Dial(handshake->address);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *channel;
    stub_ = DriverService::NewStub(channel_);
  }

  void KillPlugin() {
    plugin_->Kill(SIGKILL);
    absl::StatusOr<int> status = plugin_->Wait();
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_TRUE(WIFSIGNALED(*status));
  }

  // Starts `sleep 300` as task `id`; its handle.
  driver::v1::TaskHandle StartSleep(const std::string& id) {
    driver::v1::StartTaskRequest request;
    request.mutable_task()->set_id(id);
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(
                    R"({"command": "sleep", "args": ["300"]})",
                    request.mutable_task()->mutable_driver_config())
                    .ok());
    driver::v1::StartTaskResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->StartTask(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    task_pids_.insert(TaskPid(id));
    return response.handle();
  }

  pid_t TaskPid(const std::string& id) {
    grpc::ClientContext context;
    driver::v1::InspectTaskRequest request;
    request.set_task_id(id);
    driver::v1::InspectTaskResponse response;
    EXPECT_TRUE(stub_->InspectTask(&context, request, &response).ok());
    int pid = 0;
    EXPECT_TRUE(absl::SimpleAtoi(
        response.status().driver_attributes().at("pid"), &pid));
    return pid;
  }

  grpc::Status Recover(const driver::v1::TaskHandle& handle,
                       driver::v1::TaskStatus* status) {
    grpc::ClientContext context;
    driver::v1::RecoverTaskRequest request;
    *request.mutable_handle() = handle;
    driver::v1::RecoverTaskResponse response;
    grpc::Status result = stub_->RecoverTask(&context, request, &response);
    *status = response.status();
    return result;
  }

  void Destroy(const std::string& id) {
    grpc::ClientContext context;
    driver::v1::DestroyTaskRequest request;
    request.set_task_id(id);
    request.set_force(true);
    driver::v1::DestroyTaskResponse response;
    EXPECT_TRUE(stub_->DestroyTask(&context, request, &response).ok());
  }

  ShortTempDir dir_;
  int launches_ = 0;
  std::unique_ptr<PluginProcess> plugin_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<DriverService::Stub> stub_;
  std::set<pid_t> task_pids_;
};

TEST_F(MockDriverBinaryTest, RunningTaskSurvivesThePluginAndIsRecovered) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  const driver::v1::TaskHandle handle = StartSleep("t1");
  const pid_t pid = TaskPid("t1");
  ASSERT_NO_FATAL_FAILURE(KillPlugin());
  EXPECT_FALSE(ProcessGone(pid)) << "the task outlives its plugin";

  ASSERT_NO_FATAL_FAILURE(Launch());
  driver::v1::TaskStatus status;
  grpc::Status recovered = Recover(handle, &status);
  ASSERT_TRUE(recovered.ok()) << recovered.error_message() << "\n"
                              << ReadFileOrEmpty(dir_.Join("stderr.2"));
  EXPECT_EQ(status.state(), driver::v1::TASK_STATE_RUNNING);
  EXPECT_EQ(status.driver_attributes().at("pid"), absl::StrCat(pid));

  {
    grpc::ClientContext context;
    driver::v1::StopTaskRequest request;
    request.set_task_id("t1");
    *request.mutable_timeout() = plugin::ToProtoDuration(absl::Seconds(30));
    driver::v1::StopTaskResponse response;
    ASSERT_TRUE(stub_->StopTask(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    driver::v1::WaitTaskRequest request;
    request.set_task_id("t1");
    driver::v1::WaitTaskResponse response;
    ASSERT_TRUE(stub_->WaitTask(&context, request, &response).ok());
    EXPECT_EQ(response.result().signal(), SIGTERM);
  }
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }));
  Destroy("t1");
}

TEST_F(MockDriverBinaryTest, TasksKeepRunningAfterAShutdownCall) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  const driver::v1::TaskHandle handle = StartSleep("t1");
  const pid_t pid = TaskPid("t1");
  {
    auto plugin_stub = plugin::v1::PluginService::NewStub(channel_);
    grpc::ClientContext context;
    plugin::v1::ShutdownRequest request;
    *request.mutable_grace_period() =
        plugin::ToProtoDuration(absl::ZeroDuration());
    plugin::v1::ShutdownResponse response;
    ASSERT_TRUE(plugin_stub->Shutdown(&context, request, &response).ok());
  }
  absl::StatusOr<int> exit = plugin_->Wait();
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_TRUE(WIFEXITED(*exit));
  EXPECT_EQ(WEXITSTATUS(*exit), 0);
  EXPECT_FALSE(ProcessGone(pid));

  ASSERT_NO_FATAL_FAILURE(Launch());
  driver::v1::TaskStatus status;
  grpc::Status recovered = Recover(handle, &status);
  ASSERT_TRUE(recovered.ok()) << recovered.error_message();
  EXPECT_EQ(status.state(), driver::v1::TASK_STATE_RUNNING);
  Destroy("t1");
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }));
}

TEST_F(MockDriverBinaryTest, ExitWhileThePluginWasDownIsReported) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  const driver::v1::TaskHandle handle = StartSleep("t1");
  const pid_t pid = TaskPid("t1");
  ASSERT_NO_FATAL_FAILURE(KillPlugin());

  ASSERT_EQ(kill(pid, SIGUSR2), 0);
  // Its monitor records the exit, with nobody to tell.
  ASSERT_TRUE(
      WaitFor([&] { return PathExists(dir_.Join("mock-state/t1.exit")); }));

  ASSERT_NO_FATAL_FAILURE(Launch());
  driver::v1::TaskStatus status;
  grpc::Status recovered = Recover(handle, &status);
  ASSERT_TRUE(recovered.ok()) << recovered.error_message();
  EXPECT_EQ(status.state(), driver::v1::TASK_STATE_EXITED);
  EXPECT_EQ(status.exit_result().signal(), SIGUSR2);
  EXPECT_TRUE(status.exit_result().has_exited_at());
  Destroy("t1");
  EXPECT_FALSE(PathExists(dir_.Join("mock-state/t1.exit")));
}

TEST_F(MockDriverBinaryTest, OutputKeepsFlowingWhileThePluginIsDown) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  // As the node hands it over: an empty directory.
  const std::string task_dir = dir_.Join("t1");
  ASSERT_EQ(mkdir(task_dir.c_str(), 0755), 0);
  driver::v1::StartTaskRequest request;
  driver::v1::TaskConfig& task = *request.mutable_task();
  task.set_id("t1");
  task.set_task_dir(task_dir);
  task.mutable_logs()->set_max_file_bytes(4);
  task.mutable_logs()->set_max_files(1);
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"command": "/bin/sh", "work_dir": "w", "args": ["-c",
                      "echo one; while [ ! -e go ]; do sleep 0.01; done;
                       echo two; echo three; exit 5"]})",
                  task.mutable_driver_config())
                  .ok());
  driver::v1::TaskHandle handle;
  {
    driver::v1::StartTaskResponse response;
    grpc::ClientContext context;
    grpc::Status status = stub_->StartTask(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    handle = response.handle();
    task_pids_.insert(TaskPid("t1"));
  }
  const std::string logs = task_dir + "/logs";
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFileOrEmpty(logs + "/stdout.log") == "one\n"; }));
  ASSERT_NO_FATAL_FAILURE(KillPlugin());

  // The monitor still copies the output, rotating it, and records the exit.
  const int go = open((task_dir + "/w/go").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(go, 0);
  close(go);
  ASSERT_TRUE(
      WaitFor([&] { return PathExists(dir_.Join("mock-state/t1.exit")); }));
  // 4 bytes a file, one rotated file kept: "one\n" was dropped.
  EXPECT_EQ(ReadFileOrEmpty(logs + "/stdout.log.1"), "thre");
  EXPECT_EQ(ReadFileOrEmpty(logs + "/stdout.log"), "e\n");
  EXPECT_FALSE(PathExists(logs + "/stdout.log.2"));

  ASSERT_NO_FATAL_FAILURE(Launch());
  driver::v1::TaskStatus status;
  grpc::Status recovered = Recover(handle, &status);
  ASSERT_TRUE(recovered.ok()) << recovered.error_message();
  EXPECT_EQ(status.state(), driver::v1::TASK_STATE_EXITED);
  EXPECT_EQ(status.exit_result().exit_code(), 5);
  Destroy("t1");
  EXPECT_FALSE(PathExists(logs));
  EXPECT_FALSE(PathExists(task_dir + "/w")) << "the driver made it";
}

uint64_t Fnv1a(uint64_t hash, absl::string_view data) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

TEST_F(MockDriverBinaryTest, LargeExecTransferThroughCatKeepsEveryByte) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  StartSleep("t1");
  grpc::ClientContext context;
  auto stream = stub_->ExecTaskStreaming(&context);
  driver::v1::ExecTaskStreamingRequest request;
  request.mutable_setup()->set_task_id("t1");
  request.mutable_setup()->add_command("cat");
  ASSERT_TRUE(stream->Write(request));
  constexpr size_t kTotal = 32 << 20;
  uint64_t sent_hash = 14695981039346656037ULL;
  std::thread writer([&] {
    driver::v1::ExecTaskStreamingRequest chunk;
    std::string data(32 << 10, 'z');
    for (size_t sent = 0; sent < kTotal; sent += data.size()) {
      for (size_t i = 0; i < data.size(); i += 512) {
        data[i] = static_cast<char>((sent + i) >> 9);
      }
      sent_hash = Fnv1a(sent_hash, data);
      chunk.set_stdin(data);
      if (!stream->Write(chunk)) break;
    }
    driver::v1::ExecTaskStreamingRequest close;
    close.mutable_stdin_close();
    stream->Write(close);
    stream->WritesDone();
  });
  uint64_t received_hash = 14695981039346656037ULL;
  size_t received = 0;
  bool exited = false;
  bool output_after_exit = false;
  driver::v1::ExecTaskStreamingResponse response;
  while (stream->Read(&response)) {
    output_after_exit = output_after_exit || exited;
    received += response.stdout().size();
    received_hash = Fnv1a(received_hash, response.stdout());
    if (response.has_exit()) {
      exited = true;
      EXPECT_EQ(response.exit().exit_code(), 0);
    }
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(received, kTotal);
  EXPECT_EQ(received_hash, sent_hash);
  EXPECT_TRUE(exited);
  EXPECT_FALSE(output_after_exit);
  Destroy("t1");
}

}  // namespace
}  // namespace berth::mock
