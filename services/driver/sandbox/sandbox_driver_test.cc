// The driver in-process without berth-proxy: its fingerprint, capabilities
// and a start that cannot reach the proxy. The whole path (agent, proxy,
// shim) is covered by :conformance_test.

#include "services/driver/sandbox/sandbox_driver.h"

#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::sandbox_driver {
namespace {

namespace dv1 = ::berth::driver::v1;

SandboxDriverOptions Options(const testing::ShortTempDir& dir) {
  SandboxDriverOptions options;
  options.agent_path = testing::RunfilePath("services/agent/berth-agent");
  options.shim_path = testing::RunfilePath("services/shim/berth-shim");
  options.init_path =
      testing::RunfilePath("services/driver/exec/init/berth-task-init");
  options.proxy_socket = dir.Join("proxy.sock");
  options.state_dir = dir.Join("state");
  return options;
}

TEST(SandboxDriverTest, HealthyWithTheBinariesAndAProxySocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces)";
  testing::ShortTempDir dir;
  const dv1::FingerprintResponse fingerprint =
      SandboxDriver(Options(dir)).Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_HEALTHY)
      << fingerprint.health_description();
  EXPECT_EQ(fingerprint.attributes().at("driver.sandbox.proxy_socket"),
            dir.Join("proxy.sock"));
}

TEST(SandboxDriverTest, UnhealthyNamingAMissingBinary) {
  testing::ShortTempDir dir;
  SandboxDriverOptions options = Options(dir);
  options.shim_path = dir.Join("no-such-shim");
  const dv1::FingerprintResponse fingerprint = SandboxDriver(options).Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_UNHEALTHY);
  EXPECT_TRUE(absl::StrContains(fingerprint.health_description(),
                                "berth-shim not found"))
      << fingerprint.health_description();
  EXPECT_TRUE(
      absl::StrContains(fingerprint.health_description(), "--shim_path"))
      << fingerprint.health_description();
}

TEST(SandboxDriverTest, UnhealthyWithoutAProxySocket) {
  testing::ShortTempDir dir;
  SandboxDriverOptions options = Options(dir);
  options.proxy_socket.clear();
  SandboxDriver driver(options);
  const dv1::FingerprintResponse fingerprint = driver.Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_UNHEALTHY);
  EXPECT_TRUE(
      absl::StrContains(fingerprint.health_description(), "proxy_socket"))
      << fingerprint.health_description();

  // SetConfig's NodeContext.proxy_socket is enough.
  if (geteuid() == 0) {
    plugin::v1::NodeContext node;
    node.set_proxy_socket(dir.Join("proxy.sock"));
    ASSERT_TRUE(driver.SetConfig({}, node).ok());
    EXPECT_EQ(driver.Probe().health(), dv1::HEALTH_STATE_HEALTHY)
        << driver.Probe().health_description();
  }
}

TEST(SandboxDriverTest, Capabilities) {
  testing::ShortTempDir dir;
  const dv1::DriverCapabilities capabilities =
      SandboxDriver(Options(dir)).Capabilities();
  EXPECT_TRUE(capabilities.send_signals());
  EXPECT_TRUE(capabilities.exec());
  EXPECT_TRUE(capabilities.exec_streaming());
  EXPECT_TRUE(capabilities.exec_tty());
  EXPECT_TRUE(capabilities.attach());
  EXPECT_TRUE(capabilities.rlimits());
  EXPECT_EQ(capabilities.fs_isolation(), dv1::FS_ISOLATION_CHROOT);
  ASSERT_EQ(capabilities.network_isolation_modes_size(), 2);
  EXPECT_TRUE(capabilities.recover());
  EXPECT_TRUE(capabilities.stats());
  // What the task's processes get from their agent (issue 15).
  const dv1::IsolationCapabilities& isolation = capabilities.isolation();
  EXPECT_TRUE(isolation.own_root());
  EXPECT_TRUE(isolation.image_rootfs());
  EXPECT_TRUE(isolation.mounts());
  EXPECT_TRUE(isolation.capabilities());
  EXPECT_TRUE(isolation.no_new_privileges());
  EXPECT_TRUE(isolation.seccomp());
  EXPECT_TRUE(isolation.masked_paths());
  EXPECT_TRUE(isolation.user_namespaces());
}

// Maps that cannot be applied are refused before anything is made (the
// checks are the exec driver's: services/driver/common/user_namespace.h).
TEST(SandboxDriverTest, BadUserNamespaceRefusedNamingTheField) {
  testing::ShortTempDir dir;
  SandboxDriver driver(Options(dir));
  dv1::TaskConfig task;
  task.set_id("bad-userns");
  task.set_task_dir(dir.Join("task"));
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "/bin/true");
  dv1::UserNamespace& userns =
      *task.mutable_isolation()->mutable_user_namespace();
  dv1::IdMapping* uid = userns.add_uid_mappings();
  uid->set_container_id(1);  // the task's root unmapped
  uid->set_host_id(3500000);
  uid->set_size(65536);
  dv1::IdMapping* gid = userns.add_gid_mappings();
  gid->set_container_id(0);
  gid->set_host_id(3500000);
  gid->set_size(65536);
  absl::StatusOr<dv1::StartTaskResponse> started = driver.StartTask(task);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(started.status().message(),
                                "isolation.user_namespace.uid_mappings"))
      << started.status();
  EXPECT_FALSE(testing::PathExists(dir.Join("task")));
}

TEST(SandboxDriverTest, StartWithoutTheProxyFailsAndLeavesNothing) {
  testing::ShortTempDir dir;
  SandboxDriverOptions options = Options(dir);
  options.proxy_socket.clear();
  SandboxDriver driver(options);
  dv1::TaskConfig task;
  task.set_id("no-proxy");
  task.set_task_dir(dir.Join("task"));
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "/bin/true");
  absl::StatusOr<dv1::StartTaskResponse> started = driver.StartTask(task);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(started.status().message(), "no-proxy"))
      << started.status();
  EXPECT_FALSE(testing::PathExists(dir.Join("task")));
  EXPECT_EQ(driver.InspectTask("no-proxy").status().code(),
            absl::StatusCode::kNotFound);
}

// A pids limit the sandbox's own init and agent would use up is refused at
// once, naming the field, before anything is made.
TEST(SandboxDriverTest, APidsLimitTooSmallForTheAgentIsRefused) {
  testing::ShortTempDir dir;
  SandboxDriver driver(Options(dir));
  dv1::TaskConfig task;
  task.set_id("few-pids");
  task.set_task_dir(dir.Join("task"));
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "/bin/true");
  task.mutable_resources()->set_pids_limit(kMinSandboxPids - 1);
  absl::StatusOr<dv1::StartTaskResponse> started = driver.StartTask(task);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(started.status().message(),
                                "few-pids: resources.pids_limit 31"))
      << started.status();
  EXPECT_FALSE(testing::PathExists(dir.Join("task")));
}

}  // namespace
}  // namespace berth::sandbox_driver
