// Tests of DriverClient against the fake plugin: calls, streams, and what
// every call and stream returns once the plugin is gone or the caller
// cancelled.

#include "plugins/host/driver_client.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "plugins/host/errors.h"
#include "plugins/host/plugin_process.h"
#include "plugins/host/testing/test_util.h"

namespace berth::plugin::host {
namespace {

using ::berth::plugin::host::testing::CapturingLogSink;
using ::berth::plugin::host::testing::ChildProcesses;
using ::berth::plugin::host::testing::FakePluginOptions;
using ::berth::plugin::host::testing::ProcessExists;
using ::berth::plugin::host::testing::ShortTempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Kills the process like a crash would (not through PluginProcess) and
// returns once it has ended (its pidfd is readable); it is not reaped.
void CrashAndWait(pid_t pid) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  ASSERT_GE(pidfd, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  pollfd fd = {pidfd, POLLIN, 0};
  ASSERT_EQ(poll(&fd, 1, -1), 1);
  close(pidfd);
}

driver::v1::TaskStatsRequest StatsRequest(const std::string& task_id,
                                          absl::Duration interval) {
  driver::v1::TaskStatsRequest request;
  request.set_task_id(task_id);
  *request.mutable_interval() =
      google::protobuf::util::TimeUtil::NanosecondsToDuration(
          absl::ToInt64Nanoseconds(interval));
  return request;
}

driver::v1::WaitTaskRequest WaitRequest(const std::string& task_id) {
  driver::v1::WaitTaskRequest request;
  request.set_task_id(task_id);
  return request;
}

driver::v1::InspectTaskRequest InspectRequest(const std::string& task_id) {
  driver::v1::InspectTaskRequest request;
  request.set_task_id(task_id);
  return request;
}

class DriverClientTest : public ::testing::Test {
 protected:
  void SetUp() override { Launch({}); }

  void TearDown() override {
    plugin_.reset();
    EXPECT_THAT(ChildProcesses(), IsEmpty());
  }

  void Launch(std::vector<std::string> args) {
    plugin_.reset();
    absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
        PluginProcess::Launch(
            FakePluginOptions(dir_.path(), "drv", std::move(args)));
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    plugin_ = std::move(*plugin);
    client_ = plugin_->client();
  }

  ShortTempDir dir_;
  std::unique_ptr<PluginProcess> plugin_;
  std::shared_ptr<DriverClient> client_;
};

TEST_F(DriverClientTest, UnaryCallsReachThePlugin) {
  driver::v1::StartTaskRequest start;
  start.mutable_task()->set_id("t1");
  absl::StatusOr<driver::v1::StartTaskResponse> started =
      client_->StartTask(start);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->handle().config().id(), "t1");
  EXPECT_EQ(started->handle().state(), driver::v1::TASK_STATE_RUNNING);

  absl::StatusOr<driver::v1::InspectTaskResponse> inspected =
      client_->InspectTask(InspectRequest("t1"));
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  EXPECT_EQ(inspected->status().id(), "t1");

  absl::StatusOr<driver::v1::GetCapabilitiesResponse> capabilities =
      client_->GetCapabilities();
  ASSERT_TRUE(capabilities.ok()) << capabilities.status();
  EXPECT_TRUE(capabilities->capabilities().stats());
}

TEST_F(DriverClientTest, PluginErrorsKeepTheirCodeAndNameTheTask) {
  absl::StatusOr<driver::v1::InspectTaskResponse> inspected =
      client_->InspectTask(InspectRequest("missing"));
  EXPECT_EQ(inspected.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(inspected.status().message(),
              HasSubstr("plugin drv: DriverService.InspectTask (task "
                        "missing): task missing not found"));
  EXPECT_FALSE(IsPluginShutdown(inspected.status()));
  // An RPC the plugin does not implement.
  absl::StatusOr<driver::v1::SignalTaskResponse> signalled =
      client_->SignalTask(driver::v1::SignalTaskRequest());
  EXPECT_EQ(signalled.status().code(), absl::StatusCode::kUnimplemented);
}

TEST_F(DriverClientTest, TaskStatsStreamsSamples) {
  absl::StatusOr<std::unique_ptr<TaskStatsStream>> stream =
      client_->TaskStats(StatsRequest("t1", absl::Milliseconds(10)));
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> usage =
        (*stream)->Next();
    ASSERT_TRUE(usage.ok()) << usage.status();
    ASSERT_TRUE(usage->has_value());
    EXPECT_EQ((*usage)->task_id(), "t1");
  }
}

TEST_F(DriverClientTest, KilledPluginEndsAnOpenTaskStatsStreamWithShutdown) {
  absl::StatusOr<std::unique_ptr<TaskStatsStream>> stream =
      client_->TaskStats(StatsRequest("t1", absl::Milliseconds(10)));
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> usage =
      (*stream)->Next();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_TRUE(usage->has_value());

  ASSERT_EQ(kill(plugin_->pid(), SIGKILL), 0);
  // Samples already on their way may come first; then the end. Each Next()
  // gets 1 s: a stream that noticed later would end DEADLINE_EXCEEDED.
  for (int i = 0; i < 10000 && usage.ok(); ++i) {
    usage = (*stream)->Next(absl::Now() + absl::Seconds(1));
    if (usage.ok()) {
      ASSERT_TRUE(usage->has_value());
    }
  }
  EXPECT_TRUE(IsPluginShutdown(usage.status())) << usage.status();
  EXPECT_THAT(usage.status().message(), HasSubstr("plugin drv"));
  // And so does every later Next().
  EXPECT_TRUE(IsPluginShutdown((*stream)->Next().status()));
  const std::optional<PluginExit> exit =
      plugin_->Wait(absl::InfiniteDuration());
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
}

TEST_F(DriverClientTest, EveryCallAfterThePluginWasKilledIsShutdown) {
  plugin_->Kill();
  const CallOptions options;
  EXPECT_TRUE(IsPluginShutdown(client_->GetPluginInfo().status()));
  EXPECT_TRUE(IsPluginShutdown(client_->GetPluginCapabilities().status()));
  EXPECT_TRUE(IsPluginShutdown(client_->GetConfigSchema().status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->SetConfig(plugin::v1::SetConfigRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(client_->Shutdown().status()));
  EXPECT_TRUE(IsPluginShutdown(client_->GetCapabilities().status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->StartTask(driver::v1::StartTaskRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(client_->WaitTask(WaitRequest("t1")).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->StopTask(driver::v1::StopTaskRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->DestroyTask(driver::v1::DestroyTaskRequest()).status()));
  EXPECT_TRUE(
      IsPluginShutdown(client_->InspectTask(InspectRequest("t1")).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->RecoverTask(driver::v1::RecoverTaskRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->SignalTask(driver::v1::SignalTaskRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->ExecTask(driver::v1::ExecTaskRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->CreateNetwork(driver::v1::CreateNetworkRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->DestroyNetwork(driver::v1::DestroyNetworkRequest()).status()));
  EXPECT_TRUE(IsPluginShutdown(client_->Fingerprint().status()));
  EXPECT_TRUE(IsPluginShutdown(client_->TaskEvents().status()));
  EXPECT_TRUE(IsPluginShutdown(
      client_->TaskStats(StatsRequest("t1", absl::Seconds(1))).status()));
  EXPECT_TRUE(IsPluginShutdown(client_->ExecTaskStreaming(options).status()));
  EXPECT_TRUE(IsPluginShutdown(client_->AttachTask(options).status()));
}

TEST_F(DriverClientTest, CallRightAfterACrashIsShutdown) {
  // The host may not have seen the exit yet when the call goes out: the call
  // fails UNAVAILABLE and the client finds out why.
  CrashAndWait(plugin_->pid());
  absl::StatusOr<driver::v1::InspectTaskResponse> inspected =
      client_->InspectTask(InspectRequest("t1"));
  EXPECT_TRUE(IsPluginShutdown(inspected.status())) << inspected.status();
  EXPECT_THAT(inspected.status().message(), HasSubstr("task t1"));
}

TEST_F(DriverClientTest, PluginThatExitsOnItsOwnMakesCallsShutdown) {
  ASSERT_TRUE(client_->Shutdown().ok());
  const std::optional<PluginExit> exit =
      plugin_->Wait(absl::InfiniteDuration());
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  absl::Status status = client_->InspectTask(InspectRequest("t1")).status();
  EXPECT_TRUE(IsPluginShutdown(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("exited with code 0"));
}

TEST_F(DriverClientTest, BlockedCallEndsWithShutdownWhenThePluginDies) {
  absl::StatusOr<driver::v1::WaitTaskResponse> waited;
  std::thread waiter([&] { waited = client_->WaitTask(WaitRequest("t1")); });
  CrashAndWait(plugin_->pid());
  waiter.join();
  EXPECT_TRUE(IsPluginShutdown(waited.status())) << waited.status();
}

TEST_F(DriverClientTest, StopMakesCallsInFlightShutdown) {
  absl::StatusOr<driver::v1::WaitTaskResponse> waited;
  std::thread waiter([&] { waited = client_->WaitTask(WaitRequest("t1")); });
  const PluginExit exit = plugin_->Stop();
  waiter.join();
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_TRUE(IsPluginShutdown(waited.status())) << waited.status();
}

TEST_F(DriverClientTest, PluginThatClosesItsSocketIsShutdown) {
  Launch({"--shutdown=close_socket"});
  absl::StatusOr<std::unique_ptr<TaskEventsStream>> events =
      client_->TaskEvents();
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_TRUE(client_->Shutdown().ok());
  // The stream ends as the plugin stops serving; its process lives on.
  absl::StatusOr<std::optional<driver::v1::TaskEventsResponse>> event =
      (*events)->Next();
  EXPECT_TRUE(IsPluginShutdown(event.status())) << event.status();
  EXPECT_THAT(event.status().message(), HasSubstr("no longer accepts"));
  EXPECT_TRUE(ProcessExists(plugin_->pid()));
  EXPECT_TRUE(
      IsPluginShutdown(client_->InspectTask(InspectRequest("t1")).status()));
  plugin_->Kill();
}

TEST_F(DriverClientTest, CallerCancelledStreamIsCancelledAndQuiet) {
  CapturingLogSink warnings(google::GLOG_WARNING);
  absl::StatusOr<std::unique_ptr<TaskStatsStream>> stream =
      client_->TaskStats(StatsRequest("t1", absl::Hours(1)));
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> first =
      (*stream)->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  // The next sample is an hour away: Next() blocks until cancelled.
  absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> second;
  std::thread reader([&] { second = (*stream)->Next(); });
  (*stream)->Cancel();
  reader.join();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kCancelled)
      << second.status();
  EXPECT_FALSE(IsPluginShutdown(second.status()));
  EXPECT_EQ((*stream)->Next().status().code(), absl::StatusCode::kCancelled);
  // The plugin is fine.
  EXPECT_TRUE(client_->InspectTask(InspectRequest("t1")).ok());
  EXPECT_THAT(warnings.messages(), IsEmpty());
}

TEST_F(DriverClientTest, CallerCancelledUnaryCallIsCancelledAndQuiet) {
  CapturingLogSink warnings(google::GLOG_WARNING);
  CallCanceller canceller;
  CallOptions options;
  options.canceller = &canceller;
  absl::StatusOr<driver::v1::WaitTaskResponse> waited;
  std::thread waiter(
      [&] { waited = client_->WaitTask(WaitRequest("t1"), options); });
  canceller.Cancel();
  waiter.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kCancelled)
      << waited.status();
  // A call given a cancelled canceller does not even start.
  EXPECT_EQ(client_->InspectTask(InspectRequest("t1"), options).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(client_->InspectTask(InspectRequest("t1")).ok());
  EXPECT_THAT(warnings.messages(), IsEmpty());
}

TEST_F(DriverClientTest, CallerDeadlineIsDeadlineExceeded) {
  CapturingLogSink warnings(google::GLOG_WARNING);
  CallOptions options;
  options.deadline = absl::Now() + absl::Milliseconds(100);
  absl::StatusOr<driver::v1::WaitTaskResponse> waited =
      client_->WaitTask(WaitRequest("t1"), options);
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded)
      << waited.status();
  EXPECT_TRUE(client_->InspectTask(InspectRequest("t1")).ok());
  EXPECT_THAT(warnings.messages(), IsEmpty());
}

TEST_F(DriverClientTest, NextDeadlineEndsTheStreamWithDeadlineExceeded) {
  absl::StatusOr<std::unique_ptr<TaskStatsStream>> stream =
      client_->TaskStats(StatsRequest("t1", absl::Hours(1)));
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE((*stream)->Next().ok());
  absl::StatusOr<std::optional<stats::v1::TaskResourceUsage>> next =
      (*stream)->Next(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded)
      << next.status();
  EXPECT_EQ((*stream)->Next().status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(DriverClientTest, FingerprintStreamsAndCancels) {
  absl::StatusOr<std::unique_ptr<FingerprintStream>> stream =
      client_->Fingerprint();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<std::optional<driver::v1::FingerprintResponse>> fingerprint =
      (*stream)->Next();
  ASSERT_TRUE(fingerprint.ok()) << fingerprint.status();
  ASSERT_TRUE(fingerprint->has_value());
  EXPECT_EQ((*fingerprint)->health(), driver::v1::HEALTH_STATE_HEALTHY);
  (*stream)->Cancel();
  EXPECT_EQ((*stream)->Next().status().code(), absl::StatusCode::kCancelled);
}

TEST_F(DriverClientTest, StreamDestroyedUnreadIsCancelledQuietly) {
  CapturingLogSink warnings(google::GLOG_WARNING);
  {
    absl::StatusOr<std::unique_ptr<TaskEventsStream>> events =
        client_->TaskEvents();
    ASSERT_TRUE(events.ok()) << events.status();
  }
  EXPECT_TRUE(client_->InspectTask(InspectRequest("t1")).ok());
  EXPECT_THAT(warnings.messages(), IsEmpty());
}

driver::v1::ExecTaskStreamingRequest ExecSetupRequest(
    const std::string& task_id) {
  driver::v1::ExecTaskStreamingRequest request;
  request.mutable_setup()->set_task_id(task_id);
  request.mutable_setup()->add_command("cat");
  return request;
}

driver::v1::ExecTaskStreamingRequest Stdin(const std::string& data) {
  driver::v1::ExecTaskStreamingRequest request;
  request.set_stdin(data);
  return request;
}

TEST_F(DriverClientTest, ExecStreamCarriesStdinStdoutAndTheExit) {
  absl::StatusOr<std::unique_ptr<ExecStream>> exec =
      client_->ExecTaskStreaming();
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Write(ExecSetupRequest("t1")).ok());
  ASSERT_TRUE((*exec)->Write(Stdin("hello")).ok());
  driver::v1::ExecTaskStreamingRequest close;
  close.mutable_stdin_close();
  ASSERT_TRUE((*exec)->Write(close).ok());
  absl::StatusOr<std::optional<driver::v1::ExecTaskStreamingResponse>> out =
      (*exec)->Read();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->has_value());
  EXPECT_EQ((*out)->stdout(), "hello");
  out = (*exec)->Read();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->has_value());
  ASSERT_TRUE((*out)->has_exit());
  EXPECT_EQ((*out)->exit().exit_code(), 0);
  out = (*exec)->Read();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->has_value());
  EXPECT_TRUE((*exec)->Finish().ok());
}

TEST_F(DriverClientTest, ExecStreamIsShutdownWhenThePluginDies) {
  absl::StatusOr<std::unique_ptr<ExecStream>> exec =
      client_->ExecTaskStreaming();
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Write(ExecSetupRequest("t1")).ok());
  ASSERT_TRUE((*exec)->Write(Stdin("ping")).ok());
  absl::StatusOr<std::optional<driver::v1::ExecTaskStreamingResponse>> out =
      (*exec)->Read();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->has_value());
  CrashAndWait(plugin_->pid());
  out = (*exec)->Read(absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(IsPluginShutdown(out.status())) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("task t1"));
  EXPECT_TRUE(IsPluginShutdown((*exec)->Write(Stdin("more"))));
  EXPECT_TRUE(IsPluginShutdown((*exec)->Finish()));
}

TEST_F(DriverClientTest, ExecStreamCancelledByTheCaller) {
  CapturingLogSink warnings(google::GLOG_WARNING);
  absl::StatusOr<std::unique_ptr<ExecStream>> exec =
      client_->ExecTaskStreaming();
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Write(ExecSetupRequest("t1")).ok());
  (*exec)->Cancel();
  EXPECT_EQ((*exec)->Read().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ((*exec)->Write(Stdin("late")).code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(client_->InspectTask(InspectRequest("t1")).ok());
  EXPECT_THAT(warnings.messages(), IsEmpty());
}

TEST_F(DriverClientTest, AttachStreamCarriesThePluginsAnswerNamingTheTask) {
  // This plugin does not serve AttachTask: its error comes back as the
  // stream's, named as every other.
  absl::StatusOr<std::unique_ptr<AttachStream>> attach = client_->AttachTask();
  ASSERT_TRUE(attach.ok()) << attach.status();
  driver::v1::AttachTaskRequest setup;
  setup.mutable_setup()->set_task_id("t1");
  ASSERT_TRUE((*attach)->Write(setup).ok());
  absl::StatusOr<std::optional<driver::v1::AttachTaskResponse>> out =
      (*attach)->Read();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented)
      << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("AttachTask (task t1)"));
  EXPECT_EQ((*attach)->Finish().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace berth::plugin::host
