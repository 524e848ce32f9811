// berth-node in-process: a NodeServer with the mock driver plugin and a fake
// berth-netns, driven over node.sock as the CLI drives it. Restart policies,
// stop and remove, recovery after a restart of the node, the network path
// (berth-netns' Prerun/Postrun or the driver's CreateNetwork), the times a
// task is recorded with, and stats that go on across a restart of the
// driver.

#include "services/node/node_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/proto_time.h"
#include "berth/network/v1/network.grpc.pb.h"
#include "berth/node/v1/node.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/node_test_client.h"
#include "services/node/task_isolation.h"
#include "services/node/task_manager.h"

namespace berth::node {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;

// berth-netns as the node sees it: Prerun answers with the namespace of
// whoever opens the path (the mock joins it: its own), Postrun is recorded;
// both can be made to fail.
class FakeNetns final : public network::v1::NetworkService::Service {
 public:
  grpc::Status Prerun(grpc::ServerContext*,
                      const network::v1::PrerunRequest* request,
                      network::v1::PrerunResponse* response) override {
    absl::MutexLock lock(&mu_);
    preruns_.push_back(request->allocation_id());
    network::v1::NetworkStatus* status = response->mutable_status();
    status->set_allocation_id(request->allocation_id());
    status->set_mode(request->mode());
    status->set_namespace_path("/proc/self/ns/net");
    return grpc::Status::OK;
  }
  grpc::Status Postrun(grpc::ServerContext*,
                       const network::v1::PostrunRequest* request,
                       network::v1::PostrunResponse*) override {
    absl::MutexLock lock(&mu_);
    if (failing_postruns_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "made to fail");
    }
    postruns_.push_back(request->allocation_id());
    return grpc::Status::OK;
  }
  grpc::Status ListNetworks(grpc::ServerContext*,
                            const network::v1::ListNetworksRequest*,
                            network::v1::ListNetworksResponse*) override {
    return grpc::Status::OK;
  }

  std::vector<std::string> preruns() const {
    absl::MutexLock lock(&mu_);
    return preruns_;
  }
  std::vector<std::string> postruns() const {
    absl::MutexLock lock(&mu_);
    return postruns_;
  }
  void set_failing_postruns(bool failing) {
    absl::MutexLock lock(&mu_);
    failing_postruns_ = failing;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> preruns_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> postruns_ ABSL_GUARDED_BY(mu_);
  bool failing_postruns_ ABSL_GUARDED_BY(mu_) = false;
};

class NodeServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UnixGrpcServer::Options netns;
    netns.socket_path = dir_.Join("netns.sock");
    netns.services = {&netns_};
    auto server = UnixGrpcServer::Start(netns);
    ASSERT_TRUE(server.ok()) << server.status();
    netns_server_ = *std::move(server);
  }

  void TearDown() override {
    if (node_ != nullptr) {
      // What the test left running goes with its driver's processes.
      for (const v1::Task& task : List(/*all=*/true)) {
        v1::RemoveTaskRequest request;
        request.set_task_id(task.id());
        request.set_force(true);
        v1::RemoveTaskResponse response;
        grpc::ClientContext context;
        (void)stub_->RemoveTask(&context, request, &response);
      }
    }
    StopNode();
    netns_server_->Shutdown(absl::Seconds(1));
  }

  // Starts a node whose one driver is the mock, with `mock_args`.
  void StartNode(std::vector<std::string> mock_args = {"--join_networks"}) {
    NodeServer::Options options;
    options.runtime_dir = dir_.Join("run");
    options.state_dir = dir_.Join("state");
    PluginSpec mock;
    mock.name = "mock";
    mock.binary = RunfilePath("plugins/examples/mock_driver/mock_driver");
    mock.args = std::move(mock_args);
    options.plugins = {mock};
    options.netns_socket = dir_.Join("netns.sock");
    options.node_id = "test";
    options.version = "test";
    options.plugin_options.min_backoff = absl::Milliseconds(50);
    options.plugin_options.health_interval = absl::Milliseconds(500);
    options.grace = absl::Seconds(1);
    if (configure_) configure_(options);
    auto node = NodeServer::BuildAndStart(std::move(options));
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    stub_ = v1::NodeService::NewStub(
        grpc::CreateChannel(absl::StrCat("unix:", node_->socket_path()),
                            grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(WaitFor([this] { return MockPid() > 0; }))
        << "the mock driver did not come up";
  }

  void StopNode() {
    stub_.reset();
    if (node_ != nullptr) node_->Shutdown();
    node_.reset();
  }

  int MockPid() {
    for (const v1::ComponentStatus& status : node_->plugins().Status()) {
      if (status.name() == "mock" && status.healthy()) return status.pid();
    }
    return 0;
  }

  static v1::TaskSpec Shell(const std::string& script) {
    return testing::ShellSpec("mock", script);
  }
  absl::StatusOr<v1::Task> Run(const v1::TaskSpec& spec) {
    return testing::RunTask(*stub_, spec);
  }
  v1::Task Inspect(const std::string& id) {
    return testing::InspectTask(*stub_, id);
  }
  std::vector<v1::Task> List(bool all) {
    return testing::ListTasks(*stub_, all);
  }

  bool InState(const std::string& id, v1::TaskState state) {
    return Inspect(id).state() == state;
  }

  grpc::Status Stop(const std::string& id) {
    v1::StopTaskRequest request;
    request.set_task_id(id);
    request.mutable_timeout()->set_seconds(5);
    v1::StopTaskResponse response;
    grpc::ClientContext context;
    return stub_->StopTask(&context, request, &response);
  }

  grpc::Status Remove(const std::string& id, bool force) {
    return testing::RemoveTask(*stub_, id, force);
  }

  std::string TaskDir(const std::string& id) const {
    return dir_.Join(absl::StrCat("state/node/tasks/", id));
  }

  // Changes the options of the nodes StartNode starts (limits).
  std::function<void(NodeServer::Options&)> configure_;
  ShortTempDir dir_;
  FakeNetns netns_;
  std::unique_ptr<UnixGrpcServer> netns_server_;
  std::unique_ptr<NodeServer> node_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
};

v1::RestartPolicy Policy(v1::RestartMode mode, uint32_t attempts) {
  v1::RestartPolicy policy;
  policy.set_mode(mode);
  policy.set_attempts(attempts);
  policy.mutable_delay()->set_nanos(10'000'000);  // 10 ms
  return policy;
}

TEST_F(NodeServerTest, WithoutAPolicyATaskRunsOnce) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(Shell("exit 3"));
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(
      WaitFor([&] { return InState(task->id(), v1::TASK_STATE_EXITED); }));
  const v1::Task done = Inspect(task->id());
  EXPECT_EQ(done.exit_result().exit_code(), 3);
  EXPECT_EQ(done.restarts(), 0u);
}

TEST_F(NodeServerTest, OnFailureRestartsUpToItsAttempts) {
  StartNode();
  v1::TaskSpec spec = Shell("echo run; exit 1");
  *spec.mutable_restart() = Policy(v1::RESTART_MODE_ON_FAILURE, 2);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task now = Inspect(task->id());
    return now.state() == v1::TASK_STATE_EXITED && now.restarts() == 2;
  })) << Inspect(task->id()).DebugString();
  EXPECT_EQ(Inspect(task->id()).exit_result().exit_code(), 1);
  // Every run's output is kept.
  EXPECT_EQ(node_->tasks().EarlierLogDirs(task->id()).size(), 2u);

  // A run that succeeds is not restarted.
  spec = Shell("exit 0");
  *spec.mutable_restart() = Policy(v1::RESTART_MODE_ON_FAILURE, 2);
  absl::StatusOr<v1::Task> fine = Run(spec);
  ASSERT_TRUE(fine.ok()) << fine.status();
  ASSERT_TRUE(
      WaitFor([&] { return InState(fine->id(), v1::TASK_STATE_EXITED); }));
  EXPECT_EQ(Inspect(fine->id()).restarts(), 0u);
}

TEST_F(NodeServerTest, AlwaysRestartsUntilStopped) {
  StartNode();
  v1::TaskSpec spec = Shell("sleep 0.05");
  *spec.mutable_restart() = Policy(v1::RESTART_MODE_ALWAYS, 0);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(WaitFor([&] { return Inspect(task->id()).restarts() >= 2; }));
  ASSERT_TRUE(Stop(task->id()).ok());
  ASSERT_TRUE(
      WaitFor([&] { return InState(task->id(), v1::TASK_STATE_EXITED); }));
  const v1::Task stopped = Inspect(task->id());
  EXPECT_TRUE(stopped.stopped());
  // No run starts after the stop: the count stays.
  const uint32_t restarts = stopped.restarts();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Inspect(task->id()).restarts(), restarts);
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_EXITED);
}

// --max_tasks: every record counts, running or not; one more is refused
// naming the flag and its value, and nothing of it is kept.
TEST_F(NodeServerTest, TasksBeyondMaxTasksAreRefusedWithAClearError) {
  configure_ = [](NodeServer::Options& options) {
    options.task_options.max_tasks = 2;
  };
  StartNode();
  absl::StatusOr<v1::Task> ended = Run(Shell("exit 0"));
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_TRUE(
      WaitFor([&] { return InState(ended->id(), v1::TASK_STATE_EXITED); }));
  absl::StatusOr<v1::Task> running = Run(Shell("exec sleep 60"));
  ASSERT_TRUE(running.ok()) << running.status();
  absl::StatusOr<v1::Task> refused = Run(Shell("exit 0"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("berth-node holds 2 tasks, the most its --max_tasks "
                        "(2) allows"));
  EXPECT_EQ(List(/*all=*/true).size(), 2u);
  // A removed task makes room.
  ASSERT_TRUE(Remove(ended->id(), /*force=*/false).ok());
  absl::StatusOr<v1::Task> again = Run(Shell("exit 0"));
  EXPECT_TRUE(again.ok()) << again.status();
}

// --default_pids_limit: a spec without a process limit gets the node's,
// written into it (what inspect shows and every run gets); one with its own
// keeps it.
TEST_F(NodeServerTest, ASpecWithoutAPidsLimitGetsTheNodesDefault) {
  configure_ = [](NodeServer::Options& options) {
    options.task_options.default_pids_limit = 100;
  };
  StartNode();
  absl::StatusOr<v1::Task> plain = Run(Shell("exit 0"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->spec().resources().pids_limit(), 100u);
  EXPECT_EQ(Inspect(plain->id()).spec().resources().pids_limit(), 100u);
  v1::TaskSpec spec = Shell("exit 0");
  spec.mutable_resources()->set_pids_limit(50);
  absl::StatusOr<v1::Task> own = Run(spec);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(Inspect(own->id()).spec().resources().pids_limit(), 50u);
}

// --restart_history: a task restarted more often keeps the output of its
// last runs only; Task.restarts counts them all.
TEST_F(NodeServerTest, OnlyTheLastRunsOfARestartedTaskAreKept) {
  configure_ = [](NodeServer::Options& options) {
    options.task_options.restart_history = 2;
    options.task_options.restart_backoff.min_delay = absl::Milliseconds(10);
    options.task_options.restart_backoff.max_delay = absl::Milliseconds(20);
  };
  StartNode();
  v1::TaskSpec spec = Shell("echo run; exit 1");
  *spec.mutable_restart() = Policy(v1::RESTART_MODE_ON_FAILURE, 5);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(WaitFor([&] {
    const v1::Task now = Inspect(task->id());
    return now.state() == v1::TASK_STATE_EXITED && now.restarts() == 5;
  })) << Inspect(task->id()).DebugString();
  const std::vector<std::string> kept =
      node_->tasks().EarlierLogDirs(task->id());
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_THAT(kept[0], ::testing::EndsWith("/run-3"));
  EXPECT_THAT(kept[1], ::testing::EndsWith("/run-4"));
  EXPECT_FALSE(PathExists(
      dir_.Join(absl::StrCat("state/node/logs/", task->id(), "/run-0"))));
  EXPECT_EQ(Inspect(task->id()).restarts(), 5u);
}

// A RunTask larger than node.sock takes (4 MiB unless told otherwise) is
// refused by gRPC, naming the sizes; nothing of it is kept.
TEST_F(NodeServerTest, AnOverSizeSpecIsRefusedNamingTheSize) {
  StartNode();
  v1::TaskSpec spec = Shell("exit 0");
  (*spec.mutable_env())["BIG"] = std::string(5 << 20, 'x');
  absl::StatusOr<v1::Task> refused = Run(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat(4 << 20)));
  EXPECT_THAT(refused.status().message(), HasSubstr("larger than max"));
  EXPECT_TRUE(List(/*all=*/true).empty());
}

// The wrap of cpu.max's quota (millicores above ~1.8e14) is refused at
// RunTask, as a JSON spec would give it, naming the field and value; nothing
// is kept.
TEST_F(NodeServerTest, CpuMillicoresThatWouldWrapAreRefusedAtRunTask) {
  StartNode();
  v1::TaskSpec spec = Shell("exit 0");
  spec.mutable_resources()->set_cpu_millicores(184'467'440'737'096);
  absl::StatusOr<v1::Task> refused = Run(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.resources.cpu_millicores: 184467440737096 is "
                        "out of range"));
  EXPECT_TRUE(List(/*all=*/true).empty());
}

TEST_F(NodeServerTest, StopThenRemoveLeavesNothing) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(Shell("exec sleep 300"));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_TRUE(PathExists(TaskDir(task->id())));
  const grpc::Status running = Remove(task->id(), /*force=*/false);
  EXPECT_EQ(running.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(running.error_message(), HasSubstr("is running"));
  ASSERT_TRUE(Stop(task->id()).ok());
  const v1::Task stopped = Inspect(task->id());
  EXPECT_EQ(stopped.state(), v1::TASK_STATE_EXITED);
  EXPECT_EQ(stopped.exit_result().signal(), SIGTERM);
  // Stopping a stopped task is not an error.
  EXPECT_TRUE(Stop(task->id()).ok());
  ASSERT_TRUE(Remove(task->id(), /*force=*/false).ok());
  v1::InspectTaskRequest request;
  request.set_task_id(task->id());
  v1::InspectTaskResponse response;
  grpc::ClientContext context;
  EXPECT_EQ(stub_->InspectTask(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(PathExists(TaskDir(task->id())));
}

TEST_F(NodeServerTest, ForcedRemoveKillsARunningTask) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(Shell("exec sleep 300"));
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(Remove(task->id(), /*force=*/true).ok());
  EXPECT_TRUE(List(/*all=*/true).empty());
  EXPECT_FALSE(PathExists(TaskDir(task->id())));
}

TEST_F(NodeServerTest, TasksAreRecoveredAfterARestartOfTheNode) {
  StartNode();
  absl::StatusOr<v1::Task> running = Run(Shell("exec sleep 300"));
  ASSERT_TRUE(running.ok()) << running.status();
  // Ends while no node runs: the next one records its real exit.
  absl::StatusOr<v1::Task> ending = Run(Shell("sleep 1; exit 4"));
  ASSERT_TRUE(ending.ok()) << ending.status();
  StopNode();  // its plugin goes too; the tasks keep running
  absl::SleepFor(absl::Seconds(2));
  StartNode();
  ASSERT_TRUE(
      WaitFor([&] { return InState(ending->id(), v1::TASK_STATE_EXITED); }));
  EXPECT_EQ(Inspect(ending->id()).exit_result().exit_code(), 4);
  EXPECT_EQ(Inspect(running->id()).state(), v1::TASK_STATE_RUNNING);
  // The relaunched driver holds it again: it can be stopped.
  ASSERT_TRUE(Stop(running->id()).ok());
  EXPECT_EQ(Inspect(running->id()).exit_result().signal(), SIGTERM);
}

TEST_F(NodeServerTest, ATaskThatEndsAtOnceStartsBeforeItFinishes) {
  StartNode();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<v1::Task> task = Run(Shell("exit 0"));
    ASSERT_TRUE(task.ok()) << task.status();
    ASSERT_TRUE(
        WaitFor([&] { return InState(task->id(), v1::TASK_STATE_EXITED); }));
    const v1::Task done = Inspect(task->id());
    ASSERT_TRUE(done.has_started_at() && done.has_finished_at());
    EXPECT_LE(base::FromProtoTimestamp(done.started_at()),
              base::FromProtoTimestamp(done.finished_at()))
        << done.DebugString();
  }
}

TEST_F(NodeServerTest, BerthNetnsMakesTheNetworkOfADriverThatJoinsIt) {
  StartNode({"--join_networks"});
  v1::TaskSpec spec = Shell("exec sleep 300");
  spec.mutable_network()->set_mode(network::v1::NETWORK_MODE_NONE);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(netns_.preruns(), std::vector<std::string>{task->id()});
  EXPECT_EQ(Inspect(task->id()).network().namespace_path(),
            "/proc/self/ns/net");
  ASSERT_TRUE(Remove(task->id(), /*force=*/true).ok());
  EXPECT_EQ(netns_.postruns(), std::vector<std::string>{task->id()});
}

TEST_F(NodeServerTest, ADriverThatMakesItsNetworkIsAskedInsteadOfBerthNetns) {
  StartNode({"--must_create_network"});
  v1::TaskSpec spec = Shell("exec sleep 300");
  spec.mutable_network()->set_mode(network::v1::NETWORK_MODE_BRIDGE);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_TRUE(netns_.preruns().empty());
  // The mock's CreateNetwork: its record, its documentation address.
  const v1::Task running = Inspect(task->id());
  ASSERT_EQ(running.network().addresses_size(), 1);
  EXPECT_EQ(running.network().addresses(0).cidr(), "192.0.2.1/24");
  ASSERT_TRUE(Remove(task->id(), /*force=*/true).ok());
  EXPECT_TRUE(netns_.postruns().empty());
}

TEST_F(NodeServerTest, ADriverThatCannotJoinANamespaceIsRefusedAtOnce) {
  StartNode({});
  v1::TaskSpec spec = Shell("exit 0");
  spec.mutable_network()->set_mode(network::v1::NETWORK_MODE_NONE);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(task.status().message(),
              HasSubstr("spec.network: driver mock cannot join"));
  EXPECT_TRUE(List(/*all=*/true).empty());
  EXPECT_TRUE(netns_.preruns().empty());
}

// Isolation the mock does not claim is refused before anything is stored;
// less isolation than the default needs no claim.
TEST_F(NodeServerTest, IsolationTheDriverDoesNotClaimIsRefusedAtOnce) {
  StartNode();
  const std::string data = dir_.Join("data");
  ASSERT_EQ(mkdir(data.c_str(), 0755), 0);
  v1::TaskSpec spec = Shell("exit 0");
  driver::v1::Mount* mount = spec.mutable_isolation()->add_mounts();
  mount->set_type(driver::v1::MOUNT_TYPE_BIND);
  mount->set_source(data);
  mount->set_destination("/data");
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(task.status().message(),
              HasSubstr("spec.isolation.mounts: driver mock does not support "
                        "mounts (its capabilities claim no isolation.mounts)"));

  v1::TaskSpec seccomp = Shell("exit 0");
  seccomp.mutable_isolation()->mutable_seccomp()->set_type(
      driver::v1::SECCOMP_PROFILE_TYPE_RUNTIME_DEFAULT);
  EXPECT_THAT(Run(seccomp).status().message(),
              HasSubstr("spec.isolation.seccomp: driver mock"));
  EXPECT_TRUE(List(/*all=*/true).empty());

  v1::TaskSpec less = Shell("exit 0");
  less.mutable_isolation()->set_privileged(true);
  less.mutable_isolation()->set_allow_privilege_escalation(true);
  less.set_userns("host");
  absl::StatusOr<v1::Task> ran = Run(less);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_TRUE(
      WaitFor([&] { return InState(ran->id(), v1::TASK_STATE_EXITED); }));
}

// No driver gets a bind of berth's runtime directory, what is in it, or
// what holds it: refused for every driver, whatever it claims.
TEST_F(NodeServerTest, BerthsRuntimeDirectoryCannotBeMounted) {
  StartNode();
  for (const std::string& source :
       {dir_.Join("run"), node_->socket_path(), dir_.Join("state/node"),
        std::string("/")}) {
    v1::TaskSpec spec = Shell("exit 0");
    driver::v1::Mount* mount = spec.mutable_isolation()->add_mounts();
    mount->set_type(driver::v1::MOUNT_TYPE_BIND);
    mount->set_source(source);
    mount->set_destination("/x");
    absl::StatusOr<v1::Task> task = Run(spec);
    ASSERT_FALSE(task.ok()) << source;
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument)
        << source;
    EXPECT_THAT(task.status().message(),
                HasSubstr("spec.isolation.mounts[0].source: "))
        << source;
    EXPECT_THAT(task.status().message(), HasSubstr("berth's")) << source;
  }
  v1::TaskSpec spec = Shell("exit 0");
  auto* mount = spec.mutable_isolation()->add_mounts();
  mount->set_type(driver::v1::MOUNT_TYPE_BIND);
  mount->set_source(dir_.Join("run"));
  mount->set_destination("/x");
  EXPECT_THAT(Run(spec).status().message(),
              HasSubstr("is inside berth's runtime directory"));
  EXPECT_TRUE(List(/*all=*/true).empty());
}

TEST_F(NodeServerTest, StatsGoOnAcrossARestartOfTheDriver) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(Shell("exec sleep 300"));
  ASSERT_TRUE(task.ok()) << task.status();
  v1::TaskStatsRequest request;
  request.set_task_id(task->id());
  request.mutable_interval()->set_nanos(200'000'000);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  std::unique_ptr<grpc::ClientReader<v1::TaskStatsResponse>> stats =
      stub_->TaskStats(&context, request);
  v1::TaskStatsResponse sample;
  ASSERT_TRUE(stats->Read(&sample));
  const int first_pid = MockPid();
  ASSERT_GT(first_pid, 0);
  ASSERT_EQ(kill(first_pid, SIGKILL), 0);
  // Samples come again from the relaunched driver, on the same call.
  ASSERT_TRUE(stats->Read(&sample)) << stats->Finish().error_message();
  EXPECT_EQ(sample.usage().task_id(), task->id());
  EXPECT_NE(MockPid(), first_pid);
  context.TryCancel();
  (void)stats->Finish();
}

// ValidateTaskSpec, before anything is persisted: errors name the field.
TEST(ValidateTaskSpecTest, ValidAndInvalidSpecs) {
  struct Case {
    std::string name;
    std::function<void(v1::TaskSpec&)> change;
    std::string error;  // empty: valid
  };
  const Case cases[] = {
      {"minimal", [](v1::TaskSpec&) {}, ""},
      {"named", [](v1::TaskSpec& s) { s.set_name("web-1.a_b"); }, ""},
      {"no driver", [](v1::TaskSpec& s) { s.clear_driver(); },
       "spec.driver is required"},
      {"bad name", [](v1::TaskSpec& s) { s.set_name("-web"); },
       "spec.name: \"-web\" is not a valid name"},
      {"long name", [](v1::TaskSpec& s) { s.set_name(std::string(129, 'a')); },
       "is not a valid name"},
      {"cni without a network",
       [](v1::TaskSpec& s) {
         s.mutable_network()->set_mode(network::v1::NETWORK_MODE_CNI);
       },
       "spec.network.cni_network is required"},
      {"cni network for bridge",
       [](v1::TaskSpec& s) {
         s.mutable_network()->set_mode(network::v1::NETWORK_MODE_BRIDGE);
         s.mutable_network()->set_cni_network("x");
       },
       "spec.network.cni_network is only for NETWORK_MODE_CNI"},
      {"port 0",
       [](v1::TaskSpec& s) {
         s.mutable_network()->set_mode(network::v1::NETWORK_MODE_BRIDGE);
         s.mutable_network()->add_port_mappings()->set_container_port(80);
       },
       "spec.network.port_mappings[0]: ports must be 1..65535"},
      {"ports on the host network",
       [](v1::TaskSpec& s) {
         s.mutable_network()->set_mode(network::v1::NETWORK_MODE_HOST);
         auto* port = s.mutable_network()->add_port_mappings();
         port->set_host_port(8080);
         port->set_container_port(80);
       },
       "port mappings need bridge or CNI networking"},
      {"bridge ports",
       [](v1::TaskSpec& s) {
         s.mutable_network()->set_mode(network::v1::NETWORK_MODE_BRIDGE);
         auto* port = s.mutable_network()->add_port_mappings();
         port->set_host_port(8080);
         port->set_container_port(80);
       },
       ""},
      {"negative restart delay",
       [](v1::TaskSpec& s) {
         s.mutable_restart()->mutable_delay()->set_seconds(-1);
       },
       "spec.restart.delay must not be negative"},
      {"too little cpu",
       [](v1::TaskSpec& s) { s.mutable_resources()->set_cpu_millicores(5); },
       "spec.resources.cpu_millicores: at least 10"},
      // Integers that would wrap where drivers convert them (cpu.max's
      // quota wrapped above ~1.8e14 millicores).
      {"a million cpus",
       [](v1::TaskSpec& s) {
         s.mutable_resources()->set_cpu_millicores(1'000'000'000);
       },
       ""},
      {"cpu millicores that would wrap",
       [](v1::TaskSpec& s) {
         s.mutable_resources()->set_cpu_millicores(184'467'440'737'096);
       },
       "spec.resources.cpu_millicores: 184467440737096 is out of range (10 "
       "to 1000000000"},
      {"cpu shares of 1",
       [](v1::TaskSpec& s) { s.mutable_resources()->set_cpu_shares(1); },
       "spec.resources.cpu_shares: 1 is out of range (2 to 262144"},
      {"cpu shares too large",
       [](v1::TaskSpec& s) {
         s.mutable_resources()->set_cpu_shares(UINT64_MAX);
       },
       "spec.resources.cpu_shares: 18446744073709551615 is out of range"},
      {"largest cpu shares",
       [](v1::TaskSpec& s) { s.mutable_resources()->set_cpu_shares(262144); },
       ""},
      {"memory above int64",
       [](v1::TaskSpec& s) {
         s.mutable_resources()->set_memory_bytes(uint64_t{1} << 63);
       },
       "spec.resources.memory_bytes: 9223372036854775808 is out of range"},
      {"pids above the kernel's",
       [](v1::TaskSpec& s) { s.mutable_resources()->set_pids_limit(4194305); },
       "spec.resources.pids_limit: 4194305 is out of range"},
      {"log file size above int64",
       [](v1::TaskSpec& s) {
         s.mutable_logs()->set_max_file_bytes(UINT64_MAX);
       },
       "spec.logs.max_file_bytes: 18446744073709551615 is out of range"},
      {"too many log files",
       [](v1::TaskSpec& s) { s.mutable_logs()->set_max_files(UINT32_MAX); },
       "spec.logs.max_files: 4294967295 is out of range"},
      {"restart delay of a century",
       [](v1::TaskSpec& s) {
         s.mutable_restart()->mutable_delay()->set_seconds(3'153'600'000);
       },
       "spec.restart.delay: 876000h is above the most allowed, 24h"},
      {"restart delay with nanos out of range",
       [](v1::TaskSpec& s) {
         s.mutable_restart()->mutable_delay()->set_nanos(INT32_MAX);
       },
       "spec.restart.delay: {seconds: 0, nanos: 2147483647} is not a "
       "duration"},
      {"stop timeout of the wrong sign",
       [](v1::TaskSpec& s) {
         s.mutable_stop_timeout()->set_seconds(INT64_MAX);
         s.mutable_stop_timeout()->set_nanos(-1);
       },
       "spec.stop_timeout: {seconds: 9223372036854775807, nanos: -1} is not "
       "a duration"},
      {"health interval too long",
       [](v1::TaskSpec& s) {
         s.mutable_healthcheck()->mutable_interval()->set_seconds(INT64_MAX);
       },
       "spec.healthcheck.interval: "},
      {"labels",
       [](v1::TaskSpec& s) {
         (*s.mutable_labels())["app"] = "web";
         (*s.mutable_labels())["com.example/tier"] = "";
       },
       ""},
      {"empty label key",
       [](v1::TaskSpec& s) { (*s.mutable_labels())[""] = "x"; },
       "spec.labels[\"\"]: a label's key is not empty"},
      {"label key with =",
       [](v1::TaskSpec& s) { (*s.mutable_labels())["a=b"] = "x"; },
       "spec.labels[\"a=b\"]: a label's key holds no '='"},
      {"label value with NUL",
       [](v1::TaskSpec& s) {
         (*s.mutable_labels())["a"] = std::string("x\0y", 3);
       },
       "spec.labels[\"a\"]: holds a NUL byte"},
      {"too many labels",
       [](v1::TaskSpec& s) {
         for (int i = 0; i <= kMaxLabels; ++i) {
           (*s.mutable_labels())[absl::StrCat("k", i)] = "v";
         }
       },
       "spec.labels: 257 labels; at most 256"},
      {"label value too long",
       [](v1::TaskSpec& s) {
         (*s.mutable_labels())["a"] = std::string(kMaxLabelValue + 1, 'v');
       },
       "a label's value is at most 4096 bytes"},
      {"hostname", [](v1::TaskSpec& s) { s.set_hostname("web-1.example"); },
       ""},
      {"hostname with _", [](v1::TaskSpec& s) { s.set_hostname("web_1"); },
       "spec.hostname: \"web_1\" is not a valid host name"},
      {"hostname too long",
       [](v1::TaskSpec& s) { s.set_hostname(std::string(64, 'h')); },
       "spec.hostname: \"hhhh"},
      {"hostname ending with -",
       [](v1::TaskSpec& s) { s.set_hostname("web-"); },
       "spec.hostname: \"web-\" is not a valid host name"},
      {"extra hosts",
       [](v1::TaskSpec& s) {
         auto* v4 = s.add_extra_hosts();
         v4->set_hostname("db.internal");
         v4->set_ip("192.0.2.10");
         auto* v6 = s.add_extra_hosts();
         v6->set_hostname("v6");
         v6->set_ip("2001:db8::1");
       },
       ""},
      {"extra host without a name",
       [](v1::TaskSpec& s) { s.add_extra_hosts()->set_ip("192.0.2.10"); },
       "spec.extra_hosts[0].hostname: \"\" is not a valid host name"},
      {"extra host with a bad ip",
       [](v1::TaskSpec& s) {
         auto* entry = s.add_extra_hosts();
         entry->set_hostname("db");
         entry->set_ip("192.0.2.300");
       },
       "spec.extra_hosts[0].ip: \"192.0.2.300\" is not an IPv4 or IPv6 "
       "address"},
      {"ulimits",
       [](v1::TaskSpec& s) {
         auto* nofile = s.add_ulimits();
         nofile->set_type("RLIMIT_NOFILE");
         nofile->set_soft(1024);
         nofile->set_hard(4096);
         auto* core = s.add_ulimits();
         core->set_type("core");
         core->set_soft(UINT64_MAX);
         core->set_hard(UINT64_MAX);
       },
       ""},
      {"unknown ulimit",
       [](v1::TaskSpec& s) { s.add_ulimits()->set_type("RLIMIT_FOO"); },
       "spec.ulimits[0].type: \"RLIMIT_FOO\" is not a resource limit"},
      {"soft above hard",
       [](v1::TaskSpec& s) {
         auto* limit = s.add_ulimits();
         limit->set_type("nofile");
         limit->set_soft(10);
         limit->set_hard(5);
       },
       "spec.ulimits[0]: RLIMIT_NOFILE: the soft limit 10 is above the hard "
       "limit 5"},
      {"ulimit twice",
       [](v1::TaskSpec& s) {
         s.add_ulimits()->set_type("nproc");
         s.add_ulimits()->set_type("RLIMIT_NPROC");
       },
       "spec.ulimits[1]: RLIMIT_NPROC is given more than once"},
      {"stop signal", [](v1::TaskSpec& s) { s.set_stop_signal("SIGQUIT"); },
       ""},
      {"stop signal by number",
       [](v1::TaskSpec& s) { s.set_stop_signal("10"); }, ""},
      {"unknown stop signal",
       [](v1::TaskSpec& s) { s.set_stop_signal("SIGFOO"); },
       "spec.stop_signal: \"SIGFOO\" is not a signal"},
      {"stop signal 0", [](v1::TaskSpec& s) { s.set_stop_signal("0"); },
       "spec.stop_signal: \"0\" is not a signal"},
      {"negative stop timeout",
       [](v1::TaskSpec& s) { s.mutable_stop_timeout()->set_seconds(-1); },
       "spec.stop_timeout: -1s is negative"},
      {"stop timeout too long",
       [](v1::TaskSpec& s) {
         s.mutable_stop_timeout()->set_seconds(25 * 3600);
       },
       "spec.stop_timeout: 25h is more than 24h"},
      {"health check",
       [](v1::TaskSpec& s) {
         s.mutable_healthcheck()->add_test("CMD-SHELL");
         s.mutable_healthcheck()->add_test("true");
       },
       ""},
      {"health check of an unknown kind",
       [](v1::TaskSpec& s) { s.mutable_healthcheck()->add_test("RUN"); },
       "spec.healthcheck.test"},
      {"negative health interval",
       [](v1::TaskSpec& s) {
         s.mutable_healthcheck()->add_test("NONE");
         s.mutable_healthcheck()->mutable_interval()->set_seconds(-2);
       },
       "spec.healthcheck.interval"},
  };
  for (const Case& c : cases) {
    v1::TaskSpec spec;
    spec.set_driver("mock");
    c.change(spec);
    const absl::Status status = ValidateTaskSpec(spec);
    if (c.error.empty()) {
      EXPECT_TRUE(status.ok()) << c.name << ": " << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(status.message(), HasSubstr(c.error)) << c.name;
    }
  }
}

using AttachStream = grpc::ClientReaderWriter<driver::v1::AttachTaskRequest,
                                              driver::v1::AttachTaskResponse>;

driver::v1::AttachTaskRequest AttachSetup(const std::string& ref, bool stdin) {
  driver::v1::AttachTaskRequest request;
  request.mutable_setup()->set_task_id(ref);
  request.mutable_setup()->set_stdin(stdin);
  return request;
}

// The status of an AttachTask call that sends only its setup.
grpc::Status AttachOnce(v1::NodeService::Stub& stub, const std::string& ref) {
  grpc::ClientContext context;
  std::unique_ptr<AttachStream> stream = stub.AttachTask(&context);
  stream->Write(AttachSetup(ref, false));
  stream->WritesDone();
  driver::v1::AttachTaskResponse response;
  while (stream->Read(&response)) {
  }
  return stream->Finish();
}

// The status of a TaskLogs call (without follow) on `id`.
grpc::Status LogsOnce(v1::NodeService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::TaskLogsRequest request;
  request.set_task_id(id);
  std::unique_ptr<grpc::ClientReader<v1::TaskLogsResponse>> logs =
      stub.TaskLogs(&context, request);
  v1::TaskLogsResponse response;
  while (logs->Read(&response)) {
  }
  return logs->Finish();
}

// --max_streams_per_client: one more stream of a client that holds as many
// as allowed is refused, whichever call it is, naming the flag and its
// value; unary calls go on; a cancelled stream's place is free again.
TEST_F(NodeServerTest, StreamsOfOneClientAreBoundedWithAClearError) {
  configure_ = [](NodeServer::Options& options) {
    options.max_streams_per_client = 3;
  };
  StartNode({"--join_networks", "--attach"});
  absl::StatusOr<v1::Task> task = Run(Shell("echo hello"));
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(
      WaitFor([&] { return InState(task->id(), v1::TASK_STATE_EXITED); }));
  ASSERT_TRUE(LogsOnce(*stub_, task->id()).ok());

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::EventsResponse>>> events;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    events.push_back(stub_->Events(contexts.back().get(), v1::EventsRequest()));
    // The node sends headers once subscribed: the stream holds its place.
    events.back()->WaitForInitialMetadata();
  }
  const grpc::Status logs = LogsOnce(*stub_, task->id());
  EXPECT_EQ(logs.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << logs.error_message();
  EXPECT_THAT(logs.error_message(), HasSubstr("has 3 streaming calls open"));
  EXPECT_THAT(logs.error_message(), HasSubstr("--max_streams_per_client (3)"));
  EXPECT_THAT(logs.error_message(), HasSubstr("TaskLogs"));
  // The callback calls too, before their first message.
  const grpc::Status attach = AttachOnce(*stub_, task->id());
  EXPECT_EQ(attach.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << attach.error_message();
  EXPECT_THAT(attach.error_message(),
              HasSubstr("--max_streams_per_client (3)"));
  {
    grpc::ClientContext context;
    std::unique_ptr<
        grpc::ClientReaderWriter<driver::v1::ExecTaskStreamingRequest,
                                 driver::v1::ExecTaskStreamingResponse>>
        exec = stub_->ExecTaskStreaming(&context);
    driver::v1::ExecTaskStreamingResponse response;
    while (exec->Read(&response)) {
    }
    const grpc::Status refused = exec->Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << refused.error_message();
  }
  // Unary calls are not streams.
  EXPECT_EQ(List(/*all=*/true).size(), 1u);
  // Another client (a connection of its own) has its own streams.
  {
    auto other = v1::NodeService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("unix:", node_->socket_path()),
        grpc::InsecureChannelCredentials(), UnixChannelArguments()));
    const grpc::Status theirs = LogsOnce(*other, task->id());
    EXPECT_TRUE(theirs.ok()) << theirs.error_message();
  }
  // The error names the client by its connection and who connected.
  EXPECT_THAT(logs.error_message(), HasSubstr("this client (fd:"));
  EXPECT_THAT(logs.error_message(), HasSubstr(absl::StrCat("uid ", geteuid())));

  // One stream cancelled: its place is free again.
  contexts[0]->TryCancel();
  v1::EventsResponse event;
  while (events[0]->Read(&event)) {
  }
  (void)events[0]->Finish();
  EXPECT_TRUE(WaitFor([&] { return LogsOnce(*stub_, task->id()).ok(); }));
  for (size_t i = 1; i < contexts.size(); ++i) {
    contexts[i]->TryCancel();
    while (events[i]->Read(&event)) {
    }
    (void)events[i]->Finish();
  }
}

TEST_F(NodeServerTest, AttachRelaysBothWaysThenSendsTheRunsExit) {
  StartNode({"--join_networks", "--attach"});
  const std::string go = dir_.Join("go");
  v1::TaskSpec spec = Shell(
      absl::StrCat("while [ ! -e ", go, " ]; do sleep 0.05; done; exit 3"));
  spec.set_name("echoer");
  spec.set_stdin_open(true);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();

  grpc::ClientContext context;
  std::unique_ptr<AttachStream> stream = stub_->AttachTask(&context);
  // By name, as `berth attach echoer`.
  ASSERT_TRUE(stream->Write(AttachSetup("echoer", true)));
  driver::v1::AttachTaskRequest input;
  input.set_stdin("hello\n");
  ASSERT_TRUE(stream->Write(input));
  driver::v1::AttachTaskResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.stdout(), "hello\n");

  // The task ends: the driver's stream ends, and the node's last frame is
  // the run's exit.
  { std::ofstream touch(go); }
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_exit()) << response.DebugString();
  EXPECT_EQ(response.exit().exit_code(), 3);
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_EXITED);
}

TEST_F(NodeServerTest, AttachCancelledByTheCallerLeavesTheTaskRunning) {
  StartNode({"--join_networks", "--attach"});
  absl::StatusOr<v1::Task> task = Run(Shell("sleep 30"));
  ASSERT_TRUE(task.ok()) << task.status();
  grpc::ClientContext context;
  std::unique_ptr<AttachStream> stream = stub_->AttachTask(&context);
  ASSERT_TRUE(stream->Write(AttachSetup(task->id().substr(0, 8), false)));
  context.TryCancel();
  driver::v1::AttachTaskResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_RUNNING);
  // And it can be attached to again.
  grpc::ClientContext again;
  std::unique_ptr<AttachStream> second = stub_->AttachTask(&again);
  ASSERT_TRUE(second->Write(AttachSetup(task->id(), true)));
  driver::v1::AttachTaskRequest input;
  input.set_stdin("again");
  ASSERT_TRUE(second->Write(input));
  // The mock's echo refuses stdin of a task without stdin_open.
  while (second->Read(&response)) {
  }
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("without stdin_open"));
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_RUNNING);
}

// An attached caller that has its stdin echoed by the mock: true once
// `text` came back (the node holds the call's place by then).
bool Echoes(AttachStream* stream, const std::string& ref,
            const std::string& text) {
  if (!stream->Write(AttachSetup(ref, true))) return false;
  driver::v1::AttachTaskRequest input;
  input.set_stdin(text);
  if (!stream->Write(input)) return false;
  driver::v1::AttachTaskResponse response;
  return stream->Read(&response) && response.stdout() == text;
}

TEST_F(NodeServerTest, AttachesToOneTaskAreBoundedWithAClearError) {
  StartNode({"--join_networks", "--attach"});
  v1::TaskSpec spec = Shell("sleep 60");
  spec.set_stdin_open(true);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const int max = 32;  // NodeServiceImpl::kMaxAttachesPerTask
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<AttachStream>> streams;
  for (int i = 0; i < max; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub_->AttachTask(contexts.back().get()));
    ASSERT_TRUE(Echoes(streams.back().get(), task->id(), absl::StrCat(i)))
        << "attach " << i;
  }
  grpc::Status refused = AttachOnce(*stub_, task->id());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
  EXPECT_THAT(refused.error_message(),
              HasSubstr(absl::StrCat("task ", task->id(), " has ", max,
                                     " callers attached")));
  // One caller goes: its place is free again.
  contexts[0]->TryCancel();
  driver::v1::AttachTaskResponse response;
  while (streams[0]->Read(&response)) {
  }
  (void)streams[0]->Finish();
  bool attached = false;
  for (int i = 0; i < 100 && !attached; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<AttachStream> stream = stub_->AttachTask(&context);
    attached = Echoes(stream.get(), task->id(), "again");
    context.TryCancel();
    while (stream->Read(&response)) {
    }
    (void)stream->Finish();
    if (!attached) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(attached);
  for (size_t i = 1; i < contexts.size(); ++i) contexts[i]->TryCancel();
  for (size_t i = 1; i < streams.size(); ++i) {
    while (streams[i]->Read(&response)) {
    }
    (void)streams[i]->Finish();
  }
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_RUNNING);
}

// Callers that send stdin without ever reading their output: the driver
// stops taking their stdin, and the node holds them back without holding
// one of gRPC's threads each (those serve every other attach and exec): a
// new caller is still served.
TEST_F(NodeServerTest, CallersFloodingStdinDoNotStallOtherAttaches) {
  StartNode({"--join_networks", "--attach"});
  v1::TaskSpec spec = Shell("sleep 60");
  spec.set_stdin_open(true);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  constexpr int kFlooders = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<AttachStream>> streams;
  std::vector<std::thread> writers;
  for (int i = 0; i < kFlooders; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub_->AttachTask(contexts.back().get()));
    ASSERT_TRUE(streams.back()->Write(AttachSetup(task->id(), true)));
    writers.emplace_back([stream = streams.back().get()] {
      driver::v1::AttachTaskRequest input;
      input.set_stdin(std::string(64 * 1024, 'x'));
      // 16 MiB each, or until cancelled.
      for (int n = 0; n < 256 && stream->Write(input); ++n) {
      }
    });
  }
  // Long enough for every flooder's stdin to back up to the node.
  absl::SleepFor(absl::Seconds(2));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  std::unique_ptr<AttachStream> stream = stub_->AttachTask(&context);
  EXPECT_TRUE(Echoes(stream.get(), task->id(), "still served"));
  context.TryCancel();
  driver::v1::AttachTaskResponse response;
  while (stream->Read(&response)) {
  }
  (void)stream->Finish();
  for (auto& c : contexts) c->TryCancel();
  for (std::thread& writer : writers) writer.join();
  for (auto& s : streams) {
    while (s->Read(&response)) {
    }
    (void)s->Finish();
  }
  EXPECT_EQ(Inspect(task->id()).state(), v1::TASK_STATE_RUNNING);
}

// The same for exec: commands that do not read the stdin their callers
// flood leave a new exec served.
TEST_F(NodeServerTest, ExecCallersFloodingStdinDoNotStallOtherExecs) {
  StartNode({"--join_networks"});
  absl::StatusOr<v1::Task> task = Run(Shell("sleep 60"));
  ASSERT_TRUE(task.ok()) << task.status();
  using ExecStream =
      grpc::ClientReaderWriter<driver::v1::ExecTaskStreamingRequest,
                               driver::v1::ExecTaskStreamingResponse>;
  auto setup = [&](std::vector<std::string> command) {
    driver::v1::ExecTaskStreamingRequest request;
    request.mutable_setup()->set_task_id(task->id());
    for (std::string& word : command) {
      request.mutable_setup()->add_command(std::move(word));
    }
    return request;
  };
  constexpr int kFlooders = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<ExecStream>> streams;
  std::vector<std::thread> writers;
  for (int i = 0; i < kFlooders; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub_->ExecTaskStreaming(contexts.back().get()));
    ASSERT_TRUE(streams.back()->Write(setup({"sleep", "60"})));
    writers.emplace_back([stream = streams.back().get()] {
      driver::v1::ExecTaskStreamingRequest input;
      input.set_stdin(std::string(32 * 1024, 'x'));
      for (int n = 0; n < 512 && stream->Write(input); ++n) {
      }
    });
  }
  absl::SleepFor(absl::Seconds(2));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  std::unique_ptr<ExecStream> stream = stub_->ExecTaskStreaming(&context);
  ASSERT_TRUE(stream->Write(setup({"echo", "still served"})));
  stream->WritesDone();
  std::string out;
  driver::v1::ExecTaskStreamingResponse response;
  while (stream->Read(&response)) out += response.stdout();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(out, "still served\n");
  for (auto& c : contexts) c->TryCancel();
  for (std::thread& writer : writers) writer.join();
  for (auto& s : streams) {
    while (s->Read(&response)) {
    }
    (void)s->Finish();
  }
}

TEST_F(NodeServerTest, AttachRefusesATaskThatIsNotRunning) {
  StartNode({"--join_networks", "--attach"});
  v1::TaskSpec spec = Shell("exit 0");
  spec.set_name("done");
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(
      WaitFor([&] { return InState(task->id(), v1::TASK_STATE_EXITED); }));
  const grpc::Status status = AttachOnce(*stub_, "done");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("task ", task->id(),
                                     " (done) is not running "
                                     "(TASK_STATE_EXITED)")));
  EXPECT_EQ(AttachOnce(*stub_, "nosuchtask").error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(NodeServerTest, ADriverWithoutAttachRefusesAttachAndInteractiveTasks) {
  StartNode();
  absl::StatusOr<v1::Task> task = Run(Shell("sleep 30"));
  ASSERT_TRUE(task.ok()) << task.status();
  const grpc::Status status = AttachOnce(*stub_, task->id());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr("driver mock does not support attaching to tasks"));

  v1::TaskSpec tty = Shell("sh");
  tty.set_tty(true);
  absl::StatusOr<v1::Task> refused = Run(tty);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.tty: driver mock does not support interactive "
                        "tasks (its capabilities claim no attach)"));
  v1::TaskSpec ulimits = Shell("true");
  ulimits.add_ulimits()->set_type("nofile");
  refused = Run(ulimits);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.ulimits: driver mock does not support resource "
                        "limits"));
}

TEST_F(NodeServerTest, StopUsesTheSpecsStopSignalWhenTheRequestHasNone) {
  StartNode();
  v1::TaskSpec spec = Shell("trap 'exit 7' USR1; while :; do sleep 0.05; done");
  spec.set_stop_signal("SIGUSR1");
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  v1::StopTaskRequest request;
  request.set_task_id(task->id());
  v1::StopTaskResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->StopTask(&context, request, &response).ok());
  // SIGUSR1 reached the shell: its trap ran (exit 7), or, when the stop
  // came before the shell had set the trap, the signal killed it. SIGTERM,
  // the default, would have killed it with 15.
  const driver::v1::ExitResult& exit = response.task().exit_result();
  EXPECT_TRUE((exit.exit_code() == 7 && exit.signal() == 0) ||
              exit.signal() == SIGUSR1)
      << response.task().DebugString();
}

TEST_F(NodeServerTest, TheHealthCheckInForceIsTheSpecsWithDefaults) {
  StartNode();
  v1::TaskSpec spec = Shell("sleep 30");
  spec.mutable_healthcheck()->add_test("CMD");
  spec.mutable_healthcheck()->add_test("true");
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const v1::HealthCheck& check = task->healthcheck();
  EXPECT_EQ(check.test_size(), 2);
  EXPECT_EQ(check.interval().seconds(), 30);
  EXPECT_EQ(check.timeout().seconds(), 30);
  EXPECT_EQ(check.retries(), 3u);

  v1::TaskSpec none = Shell("sleep 30");
  none.mutable_healthcheck()->add_test("NONE");
  absl::StatusOr<v1::Task> unchecked = Run(none);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_FALSE(unchecked->has_healthcheck());
}

TEST(ResolveStopSettingsTest, RequestThenSpecThenImageThenDefaults) {
  internal::TaskRecord record;
  absl::Duration timeout = -absl::Seconds(1);
  std::string signal;
  ResolveStopSettings(record, &timeout, &signal);
  EXPECT_EQ(timeout, absl::Seconds(5));
  EXPECT_EQ(signal, "SIGTERM");

  record.mutable_image()->mutable_config()->set_stop_signal("SIGQUIT");
  timeout = -absl::Seconds(1);
  signal.clear();
  ResolveStopSettings(record, &timeout, &signal);
  EXPECT_EQ(signal, "SIGQUIT");

  v1::TaskSpec& spec = *record.mutable_task()->mutable_spec();
  spec.set_stop_signal("SIGINT");
  spec.mutable_stop_timeout()->set_seconds(42);
  timeout = -absl::Seconds(1);
  signal.clear();
  ResolveStopSettings(record, &timeout, &signal);
  EXPECT_EQ(signal, "SIGINT");
  EXPECT_EQ(timeout, absl::Seconds(42));

  // What the request says wins.
  timeout = absl::ZeroDuration();
  signal = "SIGKILL";
  ResolveStopSettings(record, &timeout, &signal);
  EXPECT_EQ(signal, "SIGKILL");
  EXPECT_EQ(timeout, absl::ZeroDuration());

  // An image's StopSignal that names no signal is not sent.
  internal::TaskRecord bad;
  bad.mutable_image()->mutable_config()->set_stop_signal("SIGNOPE");
  signal.clear();
  ResolveStopSettings(bad, &timeout, &signal);
  EXPECT_EQ(signal, "SIGTERM");
}

// --- Starts whose outcome the node did not see (issue 18, tools/chaos F1,
// F4, F6): the driver may have started the run although no reply came.

// The lines of `path`; none when it is missing.
int LinesOf(const std::string& path) {
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// The mock starts the task, then dies (SIGKILL) before its reply: the node
// asks the relaunched mock, which knows the task from the handle it kept,
// and records that one run (exit code and all) instead of a start that
// never happened. Before, the task was FAILED "plugin mock is shut down"
// although its program had run.
TEST_F(NodeServerTest, AStartWhoseReplyDiedWithTheDriverIsAdopted) {
  const std::string trigger = dir_.Join("die-after-start");
  StartNode({"--keep_handles", absl::StrCat("--die_after_start=", trigger)});
  const int first_mock = MockPid();
  std::ofstream(trigger) << "once\n";
  const std::string marker = dir_.Join("marker");
  absl::StatusOr<v1::Task> task =
      Run(Shell(absl::StrCat("echo ran >> ", marker, "; exit 3")));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_NE(access(trigger.c_str(), F_OK), 0)
      << "the mock did not die after the start";
  const std::string id = task->id();
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  const v1::Task ended = Inspect(id);
  EXPECT_EQ(ended.state(), v1::TASK_STATE_EXITED) << ended.DebugString();
  EXPECT_EQ(ended.exit_result().exit_code(), 3);
  EXPECT_EQ(ended.restarts(), 0u);
  EXPECT_TRUE(ended.has_started_at());
  EXPECT_TRUE(ended.error().empty()) << ended.error();
  EXPECT_EQ(LinesOf(marker), 1) << "the task ran more than once";
  EXPECT_NE(MockPid(), first_mock);
}

// The same death with a driver that cannot find the task again (no kept
// handle): NOT_FOUND, so the start failed as before, named, and nothing of
// it stays (its directory removed).
TEST_F(NodeServerTest, AStartTheRelaunchedDriverDoesNotKnowFails) {
  const std::string trigger = dir_.Join("die-after-start");
  StartNode({absl::StrCat("--die_after_start=", trigger)});
  std::ofstream(trigger) << "once\n";
  const std::string marker = dir_.Join("marker");
  absl::StatusOr<v1::Task> task =
      Run(Shell(absl::StrCat("echo ran >> ", marker)));
  ASSERT_FALSE(task.ok());
  EXPECT_THAT(task.status().message(), HasSubstr("plugin mock is shut down"));
  std::vector<v1::Task> tasks = List(/*all=*/true);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].state(), v1::TASK_STATE_FAILED);
  EXPECT_FALSE(tasks[0].has_started_at());
  EXPECT_NE(access(TaskDir(tasks[0].id()).c_str(), F_OK), 0)
      << TaskDir(tasks[0].id()) << " stayed";
}

// The node stops while the mock holds StartTask's reply (the task runs):
// the record says the start was interrupted. The next node finds the run at
// the (relaunched) driver and adopts it rather than destroying it and
// starting it again: one run, still running, stoppable.
TEST_F(NodeServerTest, ARunStartedUnderADeadNodeIsAdoptedNotRunAgain) {
  StartNode({"--keep_handles", "--start_reply_delay=5s"});
  const std::string marker = dir_.Join("marker");
  const v1::TaskSpec spec =
      Shell(absl::StrCat("echo ran >> ", marker, "; exec sleep 600"));
  absl::StatusOr<v1::Task> interrupted;
  std::thread run([&, socket = node_->socket_path()] {
    auto stub = v1::NodeService::NewStub(grpc::CreateChannel(
        absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials()));
    interrupted = testing::RunTask(*stub, spec);
  });
  ASSERT_TRUE(WaitFor([&] { return LinesOf(marker) == 1; }));
  StopNode();
  run.join();
  ASSERT_FALSE(interrupted.ok());
  EXPECT_THAT(interrupted.status().message(), HasSubstr("shutting down"));

  StartNode({"--keep_handles"});
  std::vector<v1::Task> tasks = List(/*all=*/true);
  ASSERT_EQ(tasks.size(), 1u);
  const std::string id = tasks[0].id();
  ASSERT_TRUE(WaitFor([&] { return InState(id, v1::TASK_STATE_RUNNING); }))
      << Inspect(id).DebugString();
  EXPECT_EQ(Inspect(id).restarts(), 0u);
  EXPECT_TRUE(Stop(id).ok());
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  const v1::Task ended = Inspect(id);
  EXPECT_EQ(ended.state(), v1::TASK_STATE_EXITED) << ended.DebugString();
  EXPECT_NE(ended.exit_result().signal(), 0) << ended.DebugString();
  EXPECT_EQ(LinesOf(marker), 1) << "the task ran more than once";
}

// The node stops while a task waits to restart (RESTARTING stored): the
// driver still holds the run that ended, which the next node must not adopt
// as the next run. It keeps that run's output, starts run 1 (not run 0
// again) and the policy's attempts count on from there: two runs in all.
TEST_F(NodeServerTest, ATaskWaitingToRestartUnderADeadNodeRestartsOnce) {
  StartNode({"--keep_handles"});
  const std::string marker = dir_.Join("marker");
  v1::TaskSpec spec = Shell(absl::StrCat("echo ran >> ", marker, "; exit 1"));
  *spec.mutable_restart() = Policy(v1::RESTART_MODE_ON_FAILURE, 1);
  spec.mutable_restart()->mutable_delay()->set_seconds(600);
  absl::StatusOr<v1::Task> task = Run(spec);
  ASSERT_TRUE(task.ok()) << task.status();
  const std::string id = task->id();
  ASSERT_TRUE(WaitFor([&] { return InState(id, v1::TASK_STATE_RESTARTING); }))
      << Inspect(id).DebugString();
  StopNode();

  StartNode({"--keep_handles"});
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  const v1::Task ended = Inspect(id);
  EXPECT_EQ(ended.state(), v1::TASK_STATE_EXITED) << ended.DebugString();
  EXPECT_EQ(ended.exit_result().exit_code(), 1);
  EXPECT_EQ(ended.restarts(), 1u);
  EXPECT_EQ(LinesOf(marker), 2);
  EXPECT_EQ(node_->tasks().EarlierLogDirs(id).size(), 1u);
}

// A run adopted from a start cut off by the driver's death, and the driver
// killed again later (tools/chaos F7). The script waits for `go` so that the
// run outlives the kills, then writes `ended` and exits 3.
class AdoptedRunTest : public NodeServerTest {
 protected:
  // Runs the task under a mock with `mock_args` that dies after the start
  // and finds the run again from the handle it kept: the run is adopted.
  std::string RunAdopted(std::vector<std::string> mock_args) {
    const std::string trigger = dir_.Join("die-after-start");
    mock_args.push_back("--keep_handles");
    mock_args.push_back(absl::StrCat("--die_after_start=", trigger));
    StartNode(mock_args);
    std::ofstream(trigger) << "once\n";
    absl::StatusOr<v1::Task> task = Run(Shell(absl::StrCat(
        "echo ran >> ", marker_, "; while [ ! -e ", go_,
        " ]; do sleep 0.1; done; echo ended >> ", marker_, "; exit 3")));
    EXPECT_TRUE(task.ok()) << task.status();
    EXPECT_NE(access(trigger.c_str(), F_OK), 0)
        << "the mock did not die after the start";
    if (!task.ok()) return "";
    EXPECT_TRUE(InState(task->id(), v1::TASK_STATE_RUNNING))
        << Inspect(task->id()).DebugString();
    return task->id();
  }

  // Makes the mock forget the handle it kept (from now on it knows the run
  // only from the node's handle, through RecoverTask, as the sandbox driver
  // does), then kills it and waits for its relaunch.
  void ForgetAndRestartTheMock(const std::string& id) {
    const std::string kept =
        dir_.Join(absl::StrCat("state/mock/", id, ".handle"));
    ASSERT_EQ(unlink(kept.c_str()), 0) << kept;
    const int pid = MockPid();
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_TRUE(WaitFor([&] {
      const int now = MockPid();
      return now > 0 && now != pid;
    })) << "the mock was not relaunched";
  }

  // Lets the task end, and waits for it.
  void LetItEnd(const std::string& id) {
    std::ofstream(go_) << "go\n";
    EXPECT_TRUE(WaitFor([&] { return LinesOf(marker_) == 2; }));
    EXPECT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  }

  const std::string marker_ = dir_.Join("marker");
  const std::string go_ = dir_.Join("go");
};

// The adopted run carries the handle the relaunched mock gave in
// InspectTask: after the mock's next restart it is recovered and ends with
// its real exit code. Before, the node held no handle for it and the task
// was FAILED "could not recover the task: ... handle.config.id is required".
TEST_F(AdoptedRunTest, IsRecoveredAfterTheDriversNextRestart) {
  const std::string id = RunAdopted({});
  ASSERT_FALSE(id.empty());
  ForgetAndRestartTheMock(id);
  LetItEnd(id);
  const v1::Task ended = Inspect(id);
  EXPECT_EQ(ended.state(), v1::TASK_STATE_EXITED) << ended.DebugString();
  EXPECT_EQ(ended.exit_result().exit_code(), 3);
  EXPECT_TRUE(ended.error().empty()) << ended.error();
  EXPECT_EQ(LinesOf(marker_), 2) << "the task ran more than once";
}

// A driver that gives no handle (no HandleOf): the node cannot recover the
// adopted run after the driver's restart, and says why instead of sending
// RecoverTask an empty handle.
TEST_F(AdoptedRunTest, WithoutAHandleFailsNamingWhy) {
  const std::string id = RunAdopted({"--no_handle_of"});
  ASSERT_FALSE(id.empty());
  ForgetAndRestartTheMock(id);
  ASSERT_TRUE(node_->tasks().AwaitFinished(id, absl::Seconds(30)));
  const v1::Task failed = Inspect(id);
  EXPECT_EQ(failed.state(), v1::TASK_STATE_FAILED) << failed.DebugString();
  EXPECT_THAT(failed.error(),
              ::testing::AllOf(HasSubstr(id), HasSubstr("driver mock"),
                               HasSubstr("adopted without a handle"),
                               HasSubstr("HandleOf")));
  EXPECT_THAT(failed.error(),
              ::testing::Not(HasSubstr("handle.config.id is required")));
  LetItEnd(id);  // nothing may stay running
}

// A run adopted without a handle (the driver gave none then) takes the one
// the driver gives later: a node restarted with a mock that gives handles
// stores it on recovery, and the run survives the mock's next restart.
TEST_F(AdoptedRunTest, AHandleGivenLaterIsStored) {
  const std::string id = RunAdopted({"--no_handle_of"});
  ASSERT_FALSE(id.empty());
  StopNode();
  berth::testing::CapturingLogSink log(google::GLOG_INFO);
  StartNode({"--keep_handles"});
  // Taken when the recovering node finds the driver knows the task.
  ASSERT_TRUE(WaitFor([&] {
    for (const std::string& message : log.messages()) {
      if (absl::StrContains(message,
                            absl::StrCat("task ", id, ": its handle taken"))) {
        return true;
      }
    }
    return false;
  })) << "the node did not take the handle";
  EXPECT_TRUE(InState(id, v1::TASK_STATE_RUNNING)) << Inspect(id).DebugString();
  ForgetAndRestartTheMock(id);
  LetItEnd(id);
  const v1::Task ended = Inspect(id);
  EXPECT_EQ(ended.state(), v1::TASK_STATE_EXITED) << ended.DebugString();
  EXPECT_EQ(ended.exit_result().exit_code(), 3);
  EXPECT_EQ(LinesOf(marker_), 2) << "the task ran more than once";
}

}  // namespace
}  // namespace berth::node
