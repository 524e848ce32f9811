// Health checks in a whole berth-node in-process (NodeServer with the mock
// driver, whose ExecTask runs the check): a task turning healthy, then
// unhealthy when the file its check tests goes, with Task.health in
// InspectTask and EVENT_TYPE_TASK_HEALTH events; each on_failure action
// (restart whatever the policy, stop, kill then the policy); the checks of
// a task recovered by a new node (not checked before its driver has
// recovered it); a driver without exec and a check without a test refused.
// Intervals are short; the tests wait for states, never for times.

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/proto_time.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/node/node_server.h"
#include "services/node/node_test_client.h"

namespace berth::node {
namespace {

using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The node's events, read on a thread of their own.
class EventLog {
 public:
  explicit EventLog(v1::NodeService::Stub& stub) {
    reader_ = stub.Events(&context_, v1::EventsRequest());
    thread_ = std::thread([this] {
      v1::EventsResponse event;
      while (reader_->Read(&event)) {
        absl::MutexLock lock(&mu_);
        events_.push_back(event);
      }
    });
  }
  ~EventLog() {
    context_.TryCancel();
    thread_.join();
    (void)reader_->Finish();
  }

  // The health_status annotations of `id`'s health events, in order.
  std::vector<std::string> HealthOf(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> statuses;
    for (const v1::EventsResponse& event : events_) {
      if (event.type() != v1::EVENT_TYPE_TASK_HEALTH || event.task_id() != id) {
        continue;
      }
      auto it = event.annotations().find("health_status");
      statuses.push_back(it == event.annotations().end() ? "(none)"
                                                         : it->second);
    }
    return statuses;
  }

  std::vector<v1::EventsResponse> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::EventsResponse>> reader_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<v1::EventsResponse> events_ ABSL_GUARDED_BY(mu_);
};

class NodeHealthTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (node_ != nullptr) {
      for (const v1::Task& task : testing::ListTasks(*stub_, /*all=*/true)) {
        (void)testing::RemoveTask(*stub_, task.id(), /*force=*/true);
      }
    }
    StopNode();
  }

  // `mock_args`: the mock driver's flags (--recover_delay, --no_exec).
  void StartNode(std::vector<std::string> mock_args = {}) {
    NodeServer::Options options;
    options.runtime_dir = dir_.Join("run");
    options.state_dir = dir_.Join("state");
    PluginSpec mock;
    mock.name = "mock";
    mock.binary = RunfilePath("plugins/examples/mock_driver/mock_driver");
    mock.args = std::move(mock_args);
    options.plugins = {mock};
    options.node_id = "test";
    options.version = "test";
    options.plugin_options.min_backoff = absl::Milliseconds(50);
    options.plugin_options.health_interval = absl::Milliseconds(500);
    options.grace = absl::Seconds(1);
    auto node = NodeServer::BuildAndStart(std::move(options));
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    stub_ = v1::NodeService::NewStub(
        grpc::CreateChannel(absl::StrCat("unix:", node_->socket_path()),
                            grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(WaitFor([this] {
      for (const v1::ComponentStatus& status : node_->plugins().Status()) {
        if (status.name() == "mock" && status.healthy()) return true;
      }
      return false;
    })) << "the mock driver did not come up";
  }

  void StopNode() {
    stub_.reset();
    if (node_ != nullptr) node_->Shutdown();
    node_.reset();
  }

  // A long-running task whose check is `test -f <marker>`, every 100 ms,
  // unhealthy after `retries` failures.
  v1::TaskSpec Checked(uint32_t retries, v1::HealthFailureAction on_failure) {
    v1::TaskSpec spec = testing::ShellSpec("mock", "exec sleep 600");
    v1::HealthCheck& check = *spec.mutable_healthcheck();
    check.add_test("CMD-SHELL");
    check.add_test(absl::StrCat("echo checking; test -f ", Marker()));
    *check.mutable_interval() = base::ToProtoDuration(absl::Milliseconds(100));
    *check.mutable_timeout() = base::ToProtoDuration(absl::Seconds(10));
    check.set_retries(retries);
    check.set_on_failure(on_failure);
    return spec;
  }

  std::string Marker() const { return dir_.Join("healthy"); }
  void SetHealthy(bool healthy) {
    if (healthy) {
      std::ofstream(Marker()) << "ok\n";
    } else {
      unlink(Marker().c_str());
    }
  }

  v1::Task Inspect(const std::string& id) {
    return testing::InspectTask(*stub_, id);
  }
  bool HealthIs(const std::string& id, v1::HealthStatus status) {
    return Inspect(id).health().status() == status;
  }

  ShortTempDir dir_;
  std::unique_ptr<NodeServer> node_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
};

TEST_F(NodeHealthTest, HealthyThenUnhealthyThenHealthyWithEvents) {
  StartNode();
  EventLog events(*stub_);
  SetHealthy(true);
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, Checked(2, v1::HEALTH_FAILURE_ACTION_NONE));
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();

  ASSERT_TRUE(WaitFor([&] { return HealthIs(id, v1::HEALTH_STATUS_HEALTHY); }))
      << Inspect(id).DebugString();
  v1::Task healthy = Inspect(id);
  // The check in force, as the start recorded it.
  EXPECT_EQ(healthy.healthcheck().retries(), 2u);
  EXPECT_EQ(healthy.healthcheck().on_failure(), v1::HEALTH_FAILURE_ACTION_NONE);
  ASSERT_GT(healthy.health().log_size(), 0);
  const v1::HealthCheckResult& ok =
      healthy.health().log(healthy.health().log_size() - 1);
  EXPECT_EQ(ok.exit_code(), 0);
  EXPECT_EQ(ok.output(), "checking\n");
  EXPECT_LE(base::FromProtoTimestamp(ok.started_at()),
            base::FromProtoTimestamp(ok.finished_at()));

  SetHealthy(false);
  ASSERT_TRUE(WaitFor([&] {
    return HealthIs(id, v1::HEALTH_STATUS_UNHEALTHY);
  })) << Inspect(id).DebugString();
  const v1::Task unhealthy = Inspect(id);
  EXPECT_GE(unhealthy.health().failing_streak(), 2u);
  EXPECT_LE(unhealthy.health().log_size(), 5);
  EXPECT_EQ(
      unhealthy.health().log(unhealthy.health().log_size() - 1).exit_code(), 1);
  // on_failure none: it runs on, unrestarted.
  EXPECT_EQ(unhealthy.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(unhealthy.restarts(), 0u);

  SetHealthy(true);
  ASSERT_TRUE(WaitFor([&] { return HealthIs(id, v1::HEALTH_STATUS_HEALTHY); }));
  EXPECT_EQ(Inspect(id).health().failing_streak(), 0u);

  ASSERT_TRUE(WaitFor([&] { return events.HealthOf(id).size() >= 4; }));
  EXPECT_THAT(events.HealthOf(id),
              ElementsAre("starting", "healthy", "unhealthy", "healthy"));
  for (const v1::EventsResponse& event : events.events()) {
    if (event.type() == v1::EVENT_TYPE_TASK_HEALTH &&
        event.annotations().at("health_status") == "unhealthy") {
      EXPECT_THAT(event.message(), HasSubstr("unhealthy"));
    }
  }
}

TEST_F(NodeHealthTest, ATaskWithoutACheckHasNoHealth) {
  StartNode();
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, testing::ShellSpec("mock", "exec sleep 600"));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_FALSE(Inspect(task->id()).has_health());

  v1::TaskSpec none = testing::ShellSpec("mock", "exec sleep 600");
  none.mutable_healthcheck()->add_test("NONE");
  task = testing::RunTask(*stub_, none);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_FALSE(Inspect(task->id()).has_health());
}

TEST_F(NodeHealthTest, OnFailureRestartRestartsWhateverThePolicy) {
  StartNode();
  SetHealthy(false);
  v1::TaskSpec spec = Checked(1, v1::HEALTH_FAILURE_ACTION_RESTART);
  spec.mutable_restart()->set_mode(v1::RESTART_MODE_NEVER);
  *spec.mutable_restart()->mutable_delay() =
      base::ToProtoDuration(absl::Milliseconds(10));
  absl::StatusOr<v1::Task> task = testing::RunTask(*stub_, spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  ASSERT_TRUE(WaitFor([&] { return Inspect(id).restarts() >= 1; }))
      << Inspect(id).DebugString();
  // Healthy again in its new run, which keeps running.
  SetHealthy(true);
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task now = Inspect(id);
    return now.state() == v1::TASK_STATE_RUNNING &&
           now.health().status() == v1::HEALTH_STATUS_HEALTHY;
  })) << Inspect(id).DebugString();
  const v1::Task restarted = Inspect(id);
  EXPECT_FALSE(restarted.stopped());
  EXPECT_FALSE(restarted.has_exit_result()) << "a new run has no exit yet";
}

TEST_F(NodeHealthTest, OnFailureStopStopsItForGood) {
  StartNode();
  SetHealthy(false);
  v1::TaskSpec spec = Checked(1, v1::HEALTH_FAILURE_ACTION_STOP);
  spec.mutable_restart()->set_mode(v1::RESTART_MODE_ALWAYS);
  spec.set_stop_signal("SIGINT");  // stopped as StopTask stops it
  absl::StatusOr<v1::Task> task = testing::RunTask(*stub_, spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  const v1::Task stopped = Inspect(id);
  EXPECT_EQ(stopped.state(), v1::TASK_STATE_EXITED);
  EXPECT_TRUE(stopped.stopped());
  EXPECT_EQ(stopped.exit_result().signal(), SIGINT);
  EXPECT_EQ(stopped.restarts(), 0u) << "restart always does not apply";
  EXPECT_EQ(stopped.health().status(), v1::HEALTH_STATUS_UNHEALTHY);
}

TEST_F(NodeHealthTest, OnFailureKillLeavesItToThePolicy) {
  StartNode();
  SetHealthy(false);
  // Policy never: killed, it stays exited.
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, Checked(1, v1::HEALTH_FAILURE_ACTION_KILL));
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(node_->tasks().AwaitFinished(task->id(), absl::Seconds(30)));
  const v1::Task killed = Inspect(task->id());
  EXPECT_EQ(killed.exit_result().signal(), SIGKILL);
  EXPECT_FALSE(killed.stopped());
  EXPECT_EQ(killed.restarts(), 0u);

  // Policy on-failure: a kill is a failure, so it restarts.
  v1::TaskSpec spec = Checked(1, v1::HEALTH_FAILURE_ACTION_KILL);
  spec.mutable_restart()->set_mode(v1::RESTART_MODE_ON_FAILURE);
  *spec.mutable_restart()->mutable_delay() =
      base::ToProtoDuration(absl::Milliseconds(10));
  task = testing::RunTask(*stub_, spec);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(WaitFor([&] { return Inspect(task->id()).restarts() >= 1; }))
      << Inspect(task->id()).DebugString();
}

TEST_F(NodeHealthTest, ARecoveredTaskIsCheckedAgain) {
  StartNode();
  SetHealthy(true);
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, Checked(1, v1::HEALTH_FAILURE_ACTION_NONE));
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  ASSERT_TRUE(WaitFor([&] { return HealthIs(id, v1::HEALTH_STATUS_HEALTHY); }));
  StopNode();  // the task keeps running
  const absl::Time restarted_at = absl::Now();
  StartNode();
  // Checked by the new node: a result begun after its start, then the
  // file's removal seen.
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task now = Inspect(id);
    const int n = now.health().log_size();
    return n > 0 && base::FromProtoTimestamp(
                        now.health().log(n - 1).started_at()) > restarted_at;
  })) << Inspect(id).DebugString();
  EXPECT_EQ(Inspect(id).state(), v1::TASK_STATE_RUNNING);
  SetHealthy(false);
  ASSERT_TRUE(WaitFor([&] {
    return HealthIs(id, v1::HEALTH_STATUS_UNHEALTHY);
  })) << Inspect(id).DebugString();
}

// A new node's driver (relaunched, knowing no task) recovers the running
// task slowly (the mock's --recover_delay); its checks, every 100 ms, one
// failure enough for on_failure kill, must not run before: an ExecTask the
// driver cannot do yet says nothing of the task.
TEST_F(NodeHealthTest, ChecksWaitForTheDriverToRecoverTheTask) {
  StartNode();
  SetHealthy(true);
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, Checked(1, v1::HEALTH_FAILURE_ACTION_KILL));
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  ASSERT_TRUE(WaitFor([&] { return HealthIs(id, v1::HEALTH_STATUS_HEALTHY); }));
  StopNode();  // the task keeps running; the driver goes with the node
  const absl::Time restarted_at = absl::Now();
  StartNode({"--recover_delay=2s"});
  // The first check of the new node's (the log keeps the earlier ones
  // until 5 newer have come) ran once the driver had the task again: it
  // passed. Before the fix, the checks of the 2 s that RecoverTask took
  // failed (-1, the mock knowing no such task) and the kill followed.
  v1::HealthCheckResult first;
  ASSERT_TRUE(WaitFor(
      [&] {
        const v1::Task now = Inspect(id);
        for (const v1::HealthCheckResult& result : now.health().log()) {
          if (base::FromProtoTimestamp(result.started_at()) > restarted_at) {
            first = result;
            return true;
          }
        }
        return false;
      },
      absl::Seconds(60)))
      << Inspect(id).DebugString();
  EXPECT_EQ(first.exit_code(), 0) << first.DebugString();
  EXPECT_EQ(first.output(), "checking\n");
  const v1::Task now = Inspect(id);
  EXPECT_EQ(now.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(now.health().status(), v1::HEALTH_STATUS_HEALTHY);
  for (const v1::HealthCheckResult& result : now.health().log()) {
    EXPECT_EQ(result.exit_code(), 0) << result.DebugString();
  }
  // Still checked: the file's removal seen, the kill done.
  SetHealthy(false);
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  EXPECT_EQ(Inspect(id).exit_result().signal(), SIGKILL);
}

// Each check is an exec in the task: a driver that cannot exec is refused a
// task with a check, naming the field and the driver, rather than every
// check failing.
TEST_F(NodeHealthTest, ADriverWithoutExecIsRefusedATaskWithACheck) {
  StartNode({"--no_exec"});
  absl::StatusOr<v1::Task> task =
      testing::RunTask(*stub_, Checked(3, v1::HEALTH_FAILURE_ACTION_NONE));
  EXPECT_EQ(task.status().code(), absl::StatusCode::kFailedPrecondition)
      << task.status();
  EXPECT_THAT(task.status().message(), HasSubstr("spec.healthcheck"));
  EXPECT_THAT(task.status().message(), HasSubstr("\"mock\""));
  EXPECT_THAT(task.status().message(), HasSubstr("exec"));
  EXPECT_TRUE(testing::ListTasks(*stub_, /*all=*/true).empty())
      << "nothing of it stays";

  // Without a check, or with ["NONE"], it runs.
  v1::TaskSpec none = testing::ShellSpec("mock", "exec sleep 600");
  none.mutable_healthcheck()->add_test("NONE");
  task = testing::RunTask(*stub_, none);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_FALSE(Inspect(task->id()).has_healthcheck());
}

// A check's settings without a test change an image's HEALTHCHECK; a task
// without an image has none to change.
TEST_F(NodeHealthTest, ACheckWithoutATestNeedsAnImage) {
  StartNode();
  v1::TaskSpec spec = testing::ShellSpec("mock", "exec sleep 600");
  *spec.mutable_healthcheck()->mutable_interval() =
      base::ToProtoDuration(absl::Seconds(1));
  absl::StatusOr<v1::Task> task = testing::RunTask(*stub_, spec);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument)
      << task.status();
  EXPECT_THAT(task.status().message(), HasSubstr("spec.healthcheck.test"));
  EXPECT_THAT(task.status().message(), HasSubstr("no image"));
  EXPECT_TRUE(testing::ListTasks(*stub_, /*all=*/true).empty())
      << "refused before it is created";

  // An empty check is no check.
  spec.mutable_healthcheck()->Clear();
  task = testing::RunTask(*stub_, spec);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_FALSE(Inspect(task->id()).has_healthcheck());
}

}  // namespace
}  // namespace berth::node
