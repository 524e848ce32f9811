// Serve() as a host meets it: the mock driver binary, launched with and
// without the launch handshake's environment.

#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "berth/plugin/v1/plugin.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/proto_time.h"
#include "plugins/sdk/serve.h"
#include "plugins/sdk/testing.h"

namespace berth::plugin {
namespace {

using ::berth::plugin::testing::PathExists;
using ::berth::plugin::testing::PluginProcess;
using ::berth::plugin::testing::ReadFileOrEmpty;
using ::berth::plugin::testing::ShortTempDir;
using ::testing::HasSubstr;

class ServeTest : public ::testing::Test {
 protected:
  std::string Binary() const {
    return testing::RunfilePath("plugins/examples/mock_driver/mock_driver");
  }

  std::unique_ptr<PluginProcess> Launch(bool with_cookie,
                                        bool with_socket_dir = true) {
    PluginProcess::Options options;
    options.binary = Binary();
    options.with_cookie = with_cookie;
    if (with_socket_dir) options.socket_dir = dir_.Join("plugins");
    options.stderr_path = dir_.Join("stderr");
    absl::StatusOr<std::unique_ptr<PluginProcess>> process =
        PluginProcess::Launch(options);
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? *std::move(process) : nullptr;
  }

  // Reads and checks the handshake line; the socket path.
  std::string Handshake(PluginProcess& process) {
    absl::StatusOr<std::string> line = process.ReadStdoutLine();
    EXPECT_TRUE(line.ok()) << line.status() << "\n"
                           << ReadFileOrEmpty(dir_.Join("stderr"));
    if (!line.ok()) return "";
    absl::StatusOr<plugin::Handshake> handshake = ParseHandshake(*line);
    EXPECT_TRUE(handshake.ok()) << handshake.status();
    if (!handshake.ok()) return "";
    EXPECT_EQ(handshake->core_version, kCoreProtocolVersion);
    EXPECT_EQ(handshake->app_version, kAppProtocolVersion);
    return handshake->address;
  }

  ShortTempDir dir_;
};

TEST(DefaultStateDirTest, IsNextToTheSocketDirectory) {
  setenv(kSocketDirEnv, "/run/berth/plugins/", 1);
  EXPECT_EQ(DefaultStateDirNextToSockets("exec"), "/run/berth/exec-state");
  setenv(kSocketDirEnv, "/plugins", 1);
  EXPECT_EQ(DefaultStateDirNextToSockets("exec"), "/exec-state");
  setenv(kSocketDirEnv, "relative", 1);
  EXPECT_EQ(DefaultStateDirNextToSockets("exec"), "");
  unsetenv(kSocketDirEnv);
  EXPECT_EQ(DefaultStateDirNextToSockets("exec"), "");
}

TEST_F(ServeTest, RefusesToRunWithoutTheMagicCookie) {
  std::unique_ptr<PluginProcess> plugin = Launch(/*with_cookie=*/false);
  ASSERT_NE(plugin, nullptr);
  absl::StatusOr<int> status = plugin->Wait();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  EXPECT_THAT(ReadFileOrEmpty(dir_.Join("stderr")),
              HasSubstr(NotLaunchedByHostMessage(Binary())));
  EXPECT_FALSE(PathExists(dir_.Join("plugins/mock.sock")));
}

TEST_F(ServeTest, RefusesToRunWithoutASocketDirectory) {
  std::unique_ptr<PluginProcess> plugin =
      Launch(/*with_cookie=*/true, /*with_socket_dir=*/false);
  ASSERT_NE(plugin, nullptr);
  absl::StatusOr<int> status = plugin->Wait();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  EXPECT_THAT(ReadFileOrEmpty(dir_.Join("stderr")), HasSubstr(kSocketDirEnv));
}

TEST_F(ServeTest, ServesUntilShutdown) {
  std::unique_ptr<PluginProcess> plugin = Launch(/*with_cookie=*/true);
  ASSERT_NE(plugin, nullptr);
  const std::string socket = Handshake(*plugin);
  EXPECT_EQ(socket, dir_.Join("plugins/mock.sock"));
  EXPECT_TRUE(PathExists(socket));

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      testing::Dial(socket);
  ASSERT_TRUE(channel.ok()) << channel.status();
  {
    auto health = grpc::health::v1::Health::NewStub(*channel);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(kHealthServiceName);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok());
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
  auto stub = v1::PluginService::NewStub(*channel);
  {
    grpc::ClientContext context;
    v1::GetCapabilitiesResponse response;
    ASSERT_TRUE(stub->GetCapabilities(&context, {}, &response).ok());
    std::vector<std::string> packages;
    for (const v1::ApiVersion& version : response.api_versions()) {
      packages.push_back(version.package());
    }
    EXPECT_THAT(packages, ::testing::UnorderedElementsAre("berth.plugin.v1",
                                                          "berth.driver.v1"));
  }
  {
    grpc::ClientContext context;
    v1::GetPluginInfoResponse response;
    ASSERT_TRUE(stub->GetPluginInfo(&context, {}, &response).ok());
    EXPECT_EQ(response.name(), "mock");
    EXPECT_EQ(response.type(), v1::PLUGIN_TYPE_DRIVER);
  }
  {
    grpc::ClientContext context;
    v1::ShutdownRequest request;
    *request.mutable_grace_period() = ToProtoDuration(absl::Seconds(1));
    v1::ShutdownResponse response;
    ASSERT_TRUE(stub->Shutdown(&context, request, &response).ok());
  }
  absl::StatusOr<int> status = plugin->Wait();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(WIFEXITED(*status)) << "wait status " << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 0) << ReadFileOrEmpty(dir_.Join("stderr"));
  EXPECT_FALSE(PathExists(socket));
}

TEST_F(ServeTest, SigtermShutsDownCleanly) {
  std::unique_ptr<PluginProcess> plugin = Launch(/*with_cookie=*/true);
  ASSERT_NE(plugin, nullptr);
  const std::string socket = Handshake(*plugin);
  ASSERT_TRUE(PathExists(socket));
  plugin->Kill(SIGTERM);
  absl::StatusOr<int> status = plugin->Wait();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(WIFEXITED(*status)) << "wait status " << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_FALSE(PathExists(socket));
}

}  // namespace
}  // namespace berth::plugin
