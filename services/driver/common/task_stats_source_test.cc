#include "services/driver/common/task_stats_source.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/test_util.h"

namespace berth::driver_common {
namespace {

namespace sv1 = ::berth::stats::v1;
using ::berth::testing::ShortTempDir;

// A berth-stats that keeps its registrations in a map and answers
// GetTaskStats for a registered task with a sample of backend PROCFS, which
// the in-process cgroup collector never gives: a test tells where a sample
// came from.
class FakeStats final : public sv1::StatsService::Service {
 public:
  grpc::Status RegisterTask(grpc::ServerContext*,
                            const sv1::RegisterTaskRequest* request,
                            sv1::RegisterTaskResponse*) override {
    absl::MutexLock lock(&mu_);
    ++registrations_;
    if (!tasks_.emplace(request->task_id(), request->cgroup_path()).second) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, request->task_id());
    }
    return grpc::Status::OK;
  }
  grpc::Status UnregisterTask(grpc::ServerContext*,
                              const sv1::UnregisterTaskRequest* request,
                              sv1::UnregisterTaskResponse*) override {
    absl::MutexLock lock(&mu_);
    if (tasks_.erase(request->task_id()) == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, request->task_id());
    }
    return grpc::Status::OK;
  }
  grpc::Status GetTaskStats(grpc::ServerContext*,
                            const sv1::GetTaskStatsRequest* request,
                            sv1::GetTaskStatsResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (tasks_.count(request->task_id()) == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, request->task_id());
    }
    response->mutable_usage()->set_task_id(request->task_id());
    response->mutable_usage()->set_backend(sv1::BACKEND_PROCFS);
    return grpc::Status::OK;
  }

  // What berth-stats does when it restarts.
  void Forget() {
    absl::MutexLock lock(&mu_);
    tasks_.clear();
  }
  std::map<std::string, std::string> tasks() {
    absl::MutexLock lock(&mu_);
    return tasks_;
  }
  int registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> tasks_ ABSL_GUARDED_BY(mu_);
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
};

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

class TaskStatsSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UnixGrpcServer::Options options;
    options.socket_path = runtime_.Join("stats.sock");
    options.services = {&fake_};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);

    // A cgroup v2 tree with the task's cgroup "/berth/t1".
    ASSERT_EQ(mkdir(cgroups_.Join("berth").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(cgroups_.Join("berth/t1").c_str(), 0755), 0);
    WriteFile(cgroups_.Join("berth/t1/cpu.stat"),
              "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n");
    WriteFile(cgroups_.Join("berth/t1/memory.current"), "40960\n");
  }

  std::string socket() const { return runtime_.Join("stats.sock"); }
  stats::CgroupMounts mounts() const {
    return stats::CgroupMountsForLayout(sv1::CGROUP_LAYOUT_V2, cgroups_.path());
  }

  // The backend of a sample of task t1 (cgroup /berth/t1): PROCFS from the
  // fake berth-stats, CGROUP_V2 in-process; UNSPECIFIED, failing the test,
  // when there is no sample.
  sv1::Backend SampledBackend(TaskStatsSource& source) {
    absl::StatusOr<sv1::TaskResourceUsage> usage =
        source.Sample("t1", "/berth/t1", in_process_);
    if (!usage.ok()) {
      ADD_FAILURE() << usage.status();
      return sv1::BACKEND_UNSPECIFIED;
    }
    EXPECT_EQ(usage->task_id(), "t1");
    return usage->backend();
  }

  ShortTempDir runtime_;
  ShortTempDir cgroups_;
  InProcessStats in_process_;
  FakeStats fake_;
  std::unique_ptr<UnixGrpcServer> server_;
};

TEST_F(TaskStatsSourceTest, RegistrationReachesBerthStatsAndIsUndone) {
  TaskStatsSource source(mounts(), 0, socket());
  source.Register("t1", "/berth/t1");
  EXPECT_EQ(fake_.tasks(),
            (std::map<std::string, std::string>{{"t1", "/berth/t1"}}));
  // Registering again (RecoverTask of a task berth-stats knows) is fine.
  source.Register("t1", "/berth/t1");
  EXPECT_EQ(fake_.tasks().size(), 1u);
  source.Unregister("t1");
  EXPECT_TRUE(fake_.tasks().empty());
  // Unregistering what berth-stats does not know is no error either.
  source.Unregister("t1");
}

TEST_F(TaskStatsSourceTest, SamplesComeFromBerthStats) {
  TaskStatsSource source(mounts(), 0, socket());
  source.Register("t1", "/berth/t1");
  EXPECT_EQ(SampledBackend(source), sv1::BACKEND_PROCFS);
}

TEST_F(TaskStatsSourceTest, ATaskBerthStatsForgotIsRegisteredAgain) {
  TaskStatsSource source(mounts(), 0, socket());
  source.Register("t1", "/berth/t1");
  fake_.Forget();
  EXPECT_EQ(SampledBackend(source), sv1::BACKEND_PROCFS);
  EXPECT_EQ(fake_.tasks(),
            (std::map<std::string, std::string>{{"t1", "/berth/t1"}}));
  EXPECT_EQ(fake_.registrations(), 2);
}

TEST_F(TaskStatsSourceTest, WithoutASocketTheCgroupIsMeasuredInProcess) {
  TaskStatsSource source(mounts(), 0, "");
  source.Register("t1", "/berth/t1");
  absl::StatusOr<sv1::TaskResourceUsage> usage =
      source.Sample("t1", "/berth/t1", in_process_);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->task_id(), "t1");
  EXPECT_EQ(usage->backend(), sv1::BACKEND_CGROUP_V2);
  EXPECT_EQ(usage->usage().memory().usage(), 40960u);
  EXPECT_EQ(fake_.registrations(), 0);
}

TEST_F(TaskStatsSourceTest, UnreachableBerthStatsFallsBackInProcess) {
  server_->Shutdown(absl::ZeroDuration());
  TaskStatsSource source(mounts(), 0, socket());
  source.Register("t1", "/berth/t1");
  EXPECT_EQ(SampledBackend(source), sv1::BACKEND_CGROUP_V2);
}

TEST_F(TaskStatsSourceTest, SetSocketSwitchesBerthStatsOnAndOff) {
  TaskStatsSource source(mounts(), 0, "");
  source.SetSocket(socket());
  source.Register("t1", "/berth/t1");
  EXPECT_EQ(fake_.tasks().count("t1"), 1u);
  EXPECT_EQ(SampledBackend(source), sv1::BACKEND_PROCFS);
  source.SetSocket("");
  EXPECT_EQ(SampledBackend(source), sv1::BACKEND_CGROUP_V2);
}

TEST_F(TaskStatsSourceTest, InProcessErrorsNameTheTask) {
  TaskStatsSource source(mounts(), 0, "");
  InProcessStats in_process;
  absl::StatusOr<sv1::TaskResourceUsage> usage =
      source.Sample("t2", "/berth/t2", in_process);
  ASSERT_FALSE(usage.ok());
  EXPECT_TRUE(absl::StartsWith(usage.status().message(), "task t2: "))
      << usage.status();
}

}  // namespace
}  // namespace berth::driver_common
