// Tests of PluginProcess: launch, handshake, health, stderr forwarding, stop
// and reattach, against the fake plugin (//plugins/host/testing:fake_plugin).

#include "plugins/host/plugin_process.h"

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/errors.h"
#include "plugins/host/reattach_config.h"
#include "plugins/host/testing/test_util.h"
#include "plugins/sdk/handshake.h"

namespace berth::plugin::host {
namespace {

using ::berth::plugin::host::testing::CapturingLogSink;
using ::berth::plugin::host::testing::ChildProcesses;
using ::berth::plugin::host::testing::FakePluginOptions;
using ::berth::plugin::host::testing::FakePluginPath;
using ::berth::plugin::host::testing::ProcessExists;
using ::berth::plugin::host::testing::ShortTempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PluginProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Nothing left behind: no child process (not even a zombie) and, in the
    // socket directory, no socket.
    EXPECT_THAT(ChildProcesses(), IsEmpty());
    EXPECT_THAT(dir_.Entries(), IsEmpty());
  }

  LaunchOptions Options(const std::string& name,
                        std::vector<std::string> args = {}) {
    return FakePluginOptions(dir_.path(), name, std::move(args));
  }

  ShortTempDir dir_;
};

TEST_F(PluginProcessTest, LaunchesAndSeesHealthAndCapabilities) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("alpha"));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_GT((*plugin)->pid(), 0);
  EXPECT_TRUE((*plugin)->launched());
  EXPECT_EQ((*plugin)->socket_path(), dir_.Join("alpha.sock"));
  EXPECT_EQ((*plugin)->binary(), FakePluginPath());
  // The leftover check of TearDown sees a child when there is one.
  EXPECT_THAT(ChildProcesses(), Contains((*plugin)->pid()));

  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(kHealthServiceName);
  grpc::health::v1::HealthCheckResponse health;
  ASSERT_TRUE(grpc::health::v1::Health::NewStub((*plugin)->channel())
                  ->Check(&context, request, &health)
                  .ok());
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  std::shared_ptr<DriverClient> client = (*plugin)->client();
  absl::StatusOr<plugin::v1::GetCapabilitiesResponse> apis =
      client->GetPluginCapabilities();
  ASSERT_TRUE(apis.ok()) << apis.status();
  std::vector<std::string> packages;
  for (const auto& api : apis->api_versions())
    packages.push_back(api.package());
  EXPECT_THAT(packages, Contains("berth.driver.v1"));
  absl::StatusOr<plugin::v1::GetPluginInfoResponse> info =
      client->GetPluginInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "alpha");
  EXPECT_EQ(info->type(), plugin::v1::PLUGIN_TYPE_DRIVER);
}

TEST_F(PluginProcessTest, NoHandshakeTimesOutNamingTheBinary) {
  LaunchOptions options = Options("mute", {"--handshake=none"});
  options.start_timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(options);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(plugin.status().message(), HasSubstr("plugin mute"));
  EXPECT_THAT(plugin.status().message(), HasSubstr(FakePluginPath()));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("printed no handshake line within 500ms"));
}

TEST_F(PluginProcessTest, BadHandshakeLineIsQuoted) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("rude", {"--handshake=bad"}));
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(), HasSubstr(FakePluginPath()));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("\"hello from a plugin that does not shake hands\""));
}

TEST_F(PluginProcessTest, EarlyExitIsReportedAtOnceWithItsCodeAndStderr) {
  LaunchOptions options = Options(
      "quitter", {"--exit_at_once=3", "--stderr_lines=first words,last words"});
  // Far longer than the test may take: an error that waited for it would be
  // a timeout, not the exit.
  options.start_timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(options);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(), HasSubstr(FakePluginPath()));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("exited with code 3 before printing its handshake"));
  EXPECT_THAT(plugin.status().message(), HasSubstr("last words"));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("exiting at once with code 3"));
}

TEST_F(PluginProcessTest, WrongAppVersionNamesTheVersions) {
  LaunchOptions options = Options("future", {"--app_version=7"});
  options.app_protocol_versions = {1, 2};
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(options);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(), HasSubstr(FakePluginPath()));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("speaks app protocol version 7; this host accepts "
                        "1, 2"));
}

TEST_F(PluginProcessTest, WrongCoreVersionIsRefused) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("core", {"--core_version=2"}));
  ASSERT_FALSE(plugin.ok());
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("speaks handshake core version 2; this host speaks 1"));
}

TEST_F(PluginProcessTest, StderrAndStdoutAreForwardedWithThePrefix) {
  CapturingLogSink sink(google::GLOG_INFO);
  LaunchOptions options = Options(
      "talker", {"--stderr_lines=hello from the plugin", "--print_env"});
  options.env = {{"SOME_VARIABLE", "x"}};
  options.app_protocol_versions = {1, 2};
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(options);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  // Once the plugin has exited, everything it wrote has been forwarded.
  (*plugin)->Stop();
  const std::vector<std::string> messages = sink.messages();
  EXPECT_THAT(messages, Contains("[plugin talker] hello from the plugin"));
  EXPECT_THAT(messages, Contains(absl::StrCat("[plugin talker] ", kSocketDirEnv,
                                              "=", dir_.path())));
  EXPECT_THAT(messages, Contains(absl::StrCat("[plugin talker] ",
                                              kProtocolVersionsEnv, "=1,2")));
  EXPECT_THAT(messages,
              Contains("[plugin talker] stdout: fake plugin: handshake "
                       "printed"));
}

TEST_F(PluginProcessTest, StopSendsShutdownAndThePluginExitsZero) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("polite"));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  const pid_t pid = (*plugin)->pid();
  const PluginExit exit = (*plugin)->Stop();
  EXPECT_TRUE(exit.status_known);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_FALSE(ProcessExists(pid));
  // Idempotent.
  const PluginExit again = (*plugin)->Stop();
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.signal, 0);
  ASSERT_TRUE((*plugin)->exit_status().has_value());
  EXPECT_TRUE(IsPluginShutdown((*plugin)->client()->GetPluginInfo().status()));
}

TEST_F(PluginProcessTest, PluginIgnoringShutdownIsKilledAfterTheDeadline) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("stubborn", {"--shutdown=ignore"}));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  const pid_t pid = (*plugin)->pid();
  const PluginExit exit = (*plugin)->Stop(absl::Milliseconds(500));
  EXPECT_TRUE(exit.status_known);
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_FALSE(ProcessExists(pid));
}

TEST_F(PluginProcessTest, KillKillsAndCleansUp) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("victim"));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  const PluginExit exit = (*plugin)->Kill();
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_FALSE(ProcessExists((*plugin)->pid()));
  EXPECT_TRUE((*plugin)->lifetime()->gone());
}

TEST_F(PluginProcessTest, ReattachesToARunningPlugin) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> launched =
      PluginProcess::Launch(Options("durable"));
  ASSERT_TRUE(launched.ok()) << launched.status();
  // What the node would persist and read back after a restart.
  absl::StatusOr<ReattachConfig> config =
      ReattachConfig::Parse((*launched)->reattach_config().Serialize());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->pid, (*launched)->pid());
  EXPECT_EQ(config->socket_path, (*launched)->socket_path());

  absl::StatusOr<std::unique_ptr<PluginProcess>> reattached =
      PluginProcess::Reattach(*config);
  ASSERT_TRUE(reattached.ok()) << reattached.status();
  EXPECT_FALSE((*reattached)->launched());
  EXPECT_EQ((*reattached)->pid(), (*launched)->pid());
  absl::StatusOr<plugin::v1::GetPluginInfoResponse> info =
      (*reattached)->client()->GetPluginInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "durable");

  // Stopping it through the reattached one: its exit is seen through the
  // pidfd (status unknown: not its child); the launcher reaps it.
  const PluginExit exit = (*reattached)->Stop();
  EXPECT_FALSE(exit.status_known);
  const std::optional<PluginExit> reaped =
      (*launched)->Wait(absl::InfiniteDuration());
  ASSERT_TRUE(reaped.has_value());
  EXPECT_TRUE(reaped->status_known);
  EXPECT_EQ(reaped->exit_code, 0);
}

TEST_F(PluginProcessTest, ReattachWithAnotherStartTimeIsAReusedPid) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> launched =
      PluginProcess::Launch(Options("recycled"));
  ASSERT_TRUE(launched.ok()) << launched.status();
  ReattachConfig config = (*launched)->reattach_config();
  const uint64_t real = config.start_time;
  config.start_time = real + 1;
  absl::StatusOr<std::unique_ptr<PluginProcess>> reattached =
      PluginProcess::Reattach(config);
  ASSERT_FALSE(reattached.ok());
  EXPECT_EQ(reattached.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reattached.status().message(),
            absl::StrCat("plugin recycled: pid ", config.pid,
                         " was reused (start time ", real, ", expected ",
                         real + 1, ")"));
  // The process that has the pid now is left alone.
  EXPECT_TRUE(ProcessExists(config.pid));
  EXPECT_TRUE((*launched)->client()->GetPluginInfo().ok());
}

TEST_F(PluginProcessTest, ReattachToAnExitedPluginFails) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> launched =
      PluginProcess::Launch(Options("gone"));
  ASSERT_TRUE(launched.ok()) << launched.status();
  const ReattachConfig config = (*launched)->reattach_config();
  (*launched)->Stop();
  absl::StatusOr<std::unique_ptr<PluginProcess>> reattached =
      PluginProcess::Reattach(config);
  ASSERT_FALSE(reattached.ok());
  EXPECT_EQ(reattached.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reattached.status().message(),
              HasSubstr(absl::StrCat("plugin gone: pid ", config.pid)));
}

TEST_F(PluginProcessTest, MissingBinaryIsNamed) {
  LaunchOptions options = Options("nobody");
  options.binary = dir_.Join("no-such-plugin");
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(options);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(plugin.status().message(), HasSubstr(options.binary));
}

TEST_F(PluginProcessTest, SocketOutsideTheDirectoryIsRefused) {
  ShortTempDir elsewhere;
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin = PluginProcess::Launch(
      Options("stray",
              {absl::StrCat("--socket_path=", elsewhere.Join("stray.sock"))}));
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      plugin.status().message(),
      HasSubstr(absl::StrCat(elsewhere.Join("stray.sock"),
                             " outside the socket directory ", dir_.path())));
}

TEST_F(PluginProcessTest, PluginNotServingIsRefusedNamingTheSocket) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("sick", {"--health=not_serving"}));
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(), HasSubstr(FakePluginPath()));
  EXPECT_THAT(plugin.status().message(), HasSubstr(dir_.Join("sick.sock")));
  EXPECT_THAT(plugin.status().message(), HasSubstr("NOT_SERVING"));
}

TEST_F(PluginProcessTest, PluginNotSpeakingTheDriverApiIsRefused) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("alien", {"--driver_api=false"}));
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("does not speak berth.driver.v1 (it speaks: "
                        "berth.plugin.v1 r0)"));
}

TEST_F(PluginProcessTest, PluginSlowToServeAfterItsHandshakeIsWaitedFor) {
  absl::StatusOr<std::unique_ptr<PluginProcess>> plugin =
      PluginProcess::Launch(Options("slow", {"--serve_delay=300ms"}));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_TRUE((*plugin)->client()->GetPluginInfo().ok());
}

}  // namespace
}  // namespace berth::plugin::host
