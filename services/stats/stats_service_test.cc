// StatsServiceImpl in-process, served on a Unix socket, over fixture cgroup
// v1 and proc trees.

#include "services/stats/stats_service.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::stats::testing::RemoveTree;
using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WaitFor;
using ::berth::stats::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr double kMhz = 2500;
constexpr absl::Duration kTimeout = absl::Seconds(30);

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
  return context;
}

google::protobuf::Duration Millis(int ms) {
  return google::protobuf::util::TimeUtil::MillisecondsToDuration(ms);
}

class StatsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteProcStat(100, 1000);
    WriteFile(dir_.Join("proc/meminfo"),
              "MemTotal:       2048 kB\nMemFree:  1 kB\n"
              "MemAvailable:   1024 kB\n");
    WriteFile(dir_.Join("proc/cpuinfo"),
              absl::StrCat("processor\t: 0\ncpu MHz\t\t: ", kMhz, "\n"));

    StatsServiceOptions options;
    options.cgroups =
        CgroupMountsForLayout(pb::CGROUP_LAYOUT_V1, dir_.Join("cg"));
    options.proc_root = dir_.Join("proc");
    options.sys_root = dir_.Join("sys");
    options.collector.monotonic_ns = [this] { return fake_ns_.load(); };
    options.cancel_poll = absl::Milliseconds(10);
    service_ = std::make_unique<StatsServiceImpl>(options);

    UnixGrpcServer::Options server_options;
    server_options.socket_path = dir_.Join("stats.sock");
    server_options.services = {service_.get()};
    absl::StatusOr<std::unique_ptr<UnixGrpcServer>> server =
        UnixGrpcServer::Start(server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = NewStub();
  }

  void TearDown() override {
    if (service_ != nullptr) service_->Shutdown();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
    service_.reset();
  }

  // A stub on a connection of its own.
  std::unique_ptr<pb::StatsService::Stub> NewStub() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
        absl::StrCat("unix:", dir_.Join("stats.sock")),
        grpc::InsecureChannelCredentials(), args);
    EXPECT_TRUE(
        channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kTimeout)));
    return pb::StatsService::NewStub(channel);
  }

  // /proc/stat of a 2-core host.
  void WriteProcStat(uint64_t busy, uint64_t idle) {
    WriteFile(dir_.Join("proc/stat"),
              absl::StrCat("cpu  ", busy, " 0 0 ", idle,
                           " 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"
                           "cpu1 0 0 0 0 0 0 0 0 0 0\n"));
  }

  // A cgroup v1 task /berth/<name> with `usage_ns` of CPU.
  void WriteCgroup(const std::string& name, uint64_t usage_ns) {
    const std::string base = dir_.Join("cg");
    const std::string path = absl::StrCat("/berth/", name);
    WriteFile(absl::StrCat(base, "/cpuacct", path, "/cpuacct.usage"),
              absl::StrCat(usage_ns, "\n"));
    WriteFile(absl::StrCat(base, "/cpuacct", path, "/cpuacct.stat"),
              "user 1\nsystem 2\n");
    WriteFile(absl::StrCat(base, "/cpu", path, "/cpu.stat"),
              "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
    WriteFile(absl::StrCat(base, "/memory", path, "/memory.stat"),
              "cache 20\nrss 10\nmapped_file 3\nswap 0\ntotal_cache 20\n"
              "total_rss 10\ntotal_mapped_file 3\ntotal_swap 0\n");
    WriteFile(absl::StrCat(base, "/memory", path, "/memory.usage_in_bytes"),
              "4096\n");
  }

  void RemoveCgroup(const std::string& name) {
    for (const char* controller : {"cpu", "cpuacct", "memory"}) {
      RemoveTree(dir_.Join(absl::StrCat("cg/", controller, "/berth/", name)));
    }
  }

  grpc::Status Register(const std::string& id, const std::string& cgroup) {
    pb::RegisterTaskRequest request;
    request.set_task_id(id);
    request.set_cgroup_path(cgroup);
    pb::RegisterTaskResponse response;
    return stub_->RegisterTask(Context().get(), request, &response);
  }

  grpc::Status Unregister(const std::string& id) {
    pb::UnregisterTaskRequest request;
    request.set_task_id(id);
    pb::UnregisterTaskResponse response;
    return stub_->UnregisterTask(Context().get(), request, &response);
  }

  absl::StatusOr<pb::TaskResourceUsage> Get(const std::string& id) {
    pb::GetTaskStatsRequest request;
    request.set_task_id(id);
    pb::GetTaskStatsResponse response;
    grpc::Status status =
        stub_->GetTaskStats(Context().get(), request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response.usage();
  }

  // An open StreamTaskStats call.
  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<pb::StreamTaskStatsResponse>> reader;
  };

  Stream Open(pb::StatsService::Stub& stub, std::vector<std::string> ids,
              int interval_ms) {
    pb::StreamTaskStatsRequest request;
    for (const std::string& id : ids) request.add_task_ids(id);
    if (interval_ms > 0) *request.mutable_interval() = Millis(interval_ms);
    Stream stream;
    stream.context = Context();
    stream.reader = stub.StreamTaskStats(stream.context.get(), request);
    return stream;
  }

  ShortTempDir dir_;
  std::atomic<int64_t> fake_ns_{1000000000};
  std::unique_ptr<StatsServiceImpl> service_;
  std::unique_ptr<UnixGrpcServer> server_;
  std::unique_ptr<pb::StatsService::Stub> stub_;
};

TEST_F(StatsServiceTest, RegistersByCgroupPathAndTakesASnapshot) {
  WriteCgroup("t1", 5000);
  pb::RegisterTaskRequest request;
  request.set_task_id("t1");
  request.set_cgroup_path("/berth/t1");
  pb::RegisterTaskResponse response;
  ASSERT_TRUE(stub_->RegisterTask(Context().get(), request, &response).ok());
  EXPECT_EQ(response.backend(), pb::BACKEND_CGROUP_V1);
  EXPECT_EQ(service_->task_count(), 1u);

  absl::StatusOr<pb::TaskResourceUsage> usage = Get("t1");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->task_id(), "t1");
  EXPECT_EQ(usage->backend(), pb::BACKEND_CGROUP_V1);
  EXPECT_EQ(usage->usage().cpu().usage().nanos(), 5000);
  EXPECT_EQ(usage->usage().memory().rss(), 10u);
  EXPECT_EQ(usage->usage().memory().usage(), 4096u);
  EXPECT_GT(usage->timestamp().seconds(), 0);
}

// The TotalTicks relay test of this service: a non-zero total_ticks reaches
// the client, on a snapshot and on a stream.
TEST_F(StatsServiceTest, NonZeroTotalTicksReachesTheClient) {
  WriteCgroup("t1", 0);
  ASSERT_TRUE(Register("t1", "/berth/t1").ok());
  // Registration took the baseline; 1 s later the task used 0.5 s.
  fake_ns_ += 1000000000;
  WriteCgroup("t1", 500000000);
  absl::StatusOr<pb::TaskResourceUsage> usage = Get("t1");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_DOUBLE_EQ(usage->usage().cpu().percent(), 50);
  EXPECT_DOUBLE_EQ(usage->usage().cpu().total_ticks(), 0.5 * kMhz);
  EXPECT_THAT(usage->usage().cpu().measured(),
              ::testing::Contains(pb::CPU_FIELD_PERCENT));
  EXPECT_THAT(usage->usage().cpu().measured(),
              ::testing::Not(::testing::Contains(pb::CPU_FIELD_UNSPECIFIED)));

  fake_ns_ += 1000000000;
  WriteCgroup("t1", 1500000000);  // one full core
  Stream stream = Open(*stub_, {"t1"}, 10);
  pb::StreamTaskStatsResponse response;
  ASSERT_TRUE(stream.reader->Read(&response));
  EXPECT_DOUBLE_EQ(response.usage().usage().cpu().total_ticks(), kMhz);
  stream.context->TryCancel();
}

TEST_F(StatsServiceTest, RegisterErrorsNameTheFieldAndLeaveNothing) {
  pb::RegisterTaskResponse response;
  {
    pb::RegisterTaskRequest request;
    request.set_task_id("t1");
    grpc::Status status =
        stub_->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("cgroup_path or root_pid"));
  }
  {
    pb::RegisterTaskRequest request;
    request.set_cgroup_path("/berth/t1");
    grpc::Status status =
        stub_->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("task_id"));
  }
  {
    grpc::Status status = Register("t1", "/berth/absent");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr("/berth/absent"));
    EXPECT_THAT(status.error_message(), HasSubstr("\"t1\""));
  }
  {
    grpc::Status status = Register("t1", "/berth/../x");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("cgroup_path"));
  }
  {
    grpc::Status status = Register("t1", "");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("cgroup_path"));
  }
  for (int pid : {-1, 0}) {
    pb::RegisterTaskRequest request;
    request.set_task_id("t1");
    request.set_root_pid(pid);
    grpc::Status status =
        stub_->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("root_pid"));
  }
  {
    pb::RegisterTaskRequest request;
    request.set_task_id("t1");
    request.set_root_pid(4242);
    grpc::Status status =
        stub_->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr("4242"));
  }
  EXPECT_EQ(service_->task_count(), 0u);
}

TEST_F(StatsServiceTest, RegistersByRootPidAndReRegisteringReplaces) {
  WriteFile(dir_.Join("proc/77/stat"),
            "77 (sh) S 1 77 77 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0 555 0 0\n");
  WriteFile(dir_.Join("proc/77/status"), "VmRSS:\t 8 kB\nVmSwap:\t 0 kB\n");
  WriteFile(dir_.Join("proc/77/task/77/children"), "");
  WriteCgroup("t1", 1);
  ASSERT_TRUE(Register("t1", "/berth/t1").ok());

  pb::RegisterTaskRequest request;
  request.set_task_id("t1");
  request.set_root_pid(77);
  pb::RegisterTaskResponse response;
  ASSERT_TRUE(stub_->RegisterTask(Context().get(), request, &response).ok());
  EXPECT_EQ(response.backend(), pb::BACKEND_PROCFS);
  EXPECT_EQ(service_->task_count(), 1u);

  absl::StatusOr<pb::TaskResourceUsage> usage = Get("t1");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->backend(), pb::BACKEND_PROCFS);
  EXPECT_EQ(usage->usage().memory().rss(), 8u * 1024);
  EXPECT_EQ(usage->usage().cpu().user_mode().nanos(), 100000000);
  ASSERT_EQ(usage->processes().size(), 1u);
  EXPECT_TRUE(usage->processes().contains(77));
}

TEST_F(StatsServiceTest, UnregisterForgetsTheTask) {
  WriteCgroup("t1", 1);
  ASSERT_TRUE(Register("t1", "/berth/t1").ok());
  ASSERT_TRUE(Unregister("t1").ok());
  absl::StatusOr<pb::TaskResourceUsage> usage = Get("t1");
  EXPECT_TRUE(absl::IsNotFound(usage.status())) << usage.status();
  EXPECT_THAT(usage.status().message(), HasSubstr("\"t1\""));
  EXPECT_TRUE(Unregister("never-registered").ok());
  EXPECT_EQ(Unregister("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(service_->task_count(), 0u);
}

TEST_F(StatsServiceTest, SnapshotOfAnUnknownTaskIsNotFoundNamingIt) {
  absl::StatusOr<pb::TaskResourceUsage> usage = Get("nope");
  EXPECT_TRUE(absl::IsNotFound(usage.status()));
  EXPECT_THAT(usage.status().message(), HasSubstr("\"nope\""));
}

TEST_F(StatsServiceTest, StreamOfAllTasksIncludesTasksRegisteredLater) {
  WriteCgroup("a", 1);
  WriteCgroup("b", 2);
  WriteCgroup("c", 3);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  ASSERT_TRUE(Register("b", "/berth/b").ok());
  Stream stream = Open(*stub_, {}, 5);
  std::map<std::string, int> seen;
  pb::StreamTaskStatsResponse response;
  while (seen["a"] < 2 || seen["b"] < 2) {
    ASSERT_TRUE(stream.reader->Read(&response));
    ++seen[response.usage().task_id()];
  }
  EXPECT_EQ(seen["c"], 0);
  ASSERT_TRUE(Register("c", "/berth/c").ok());
  while (seen["c"] < 2) {
    ASSERT_TRUE(stream.reader->Read(&response));
    ++seen[response.usage().task_id()];
  }
  EXPECT_EQ(service_->sampler_count(), 1u);
  stream.context->TryCancel();
  EXPECT_FALSE(stream.reader->Read(&response));
  EXPECT_EQ(stream.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return service_->sampler_count() == 0; }));
}

TEST_F(StatsServiceTest, StreamOfChosenTasksCarriesOnlyThose) {
  WriteCgroup("a", 1);
  WriteCgroup("b", 2);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  ASSERT_TRUE(Register("b", "/berth/b").ok());
  Stream stream = Open(*stub_, {"b"}, 5);
  pb::StreamTaskStatsResponse response;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(stream.reader->Read(&response));
    EXPECT_EQ(response.usage().task_id(), "b");
    EXPECT_EQ(response.usage().usage().cpu().usage().nanos(), 2);
  }
  stream.context->TryCancel();
}

TEST_F(StatsServiceTest, RemovedCgroupEndsItsStreamsWithNotFoundNamingTheTask) {
  WriteCgroup("a", 1);
  WriteCgroup("b", 2);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  ASSERT_TRUE(Register("b", "/berth/b").ok());
  Stream chosen = Open(*stub_, {"a"}, 5);
  Stream all = Open(*stub_, {}, 7);
  Stream other = Open(*stub_, {"b"}, 5);
  pb::StreamTaskStatsResponse response;
  ASSERT_TRUE(chosen.reader->Read(&response));
  ASSERT_TRUE(all.reader->Read(&response));
  ASSERT_TRUE(other.reader->Read(&response));

  RemoveCgroup("a");
  for (Stream* stream : {&chosen, &all}) {
    while (stream->reader->Read(&response)) {
    }
    grpc::Status status = stream->reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr("task \"a\""));
    EXPECT_THAT(status.error_message(), HasSubstr("/berth/a"));
  }
  // The task is forgotten; the stream of b alone goes on.
  EXPECT_TRUE(absl::IsNotFound(Get("a").status()));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(other.reader->Read(&response));
    EXPECT_EQ(response.usage().task_id(), "b");
  }
  other.context->TryCancel();
}

TEST_F(StatsServiceTest, UnregisteringTheOnlyChosenTaskEndsItsStreamOk) {
  WriteCgroup("a", 1);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  Stream stream = Open(*stub_, {"a"}, 5);
  pb::StreamTaskStatsResponse response;
  ASSERT_TRUE(stream.reader->Read(&response));
  ASSERT_TRUE(Unregister("a").ok());
  while (stream.reader->Read(&response)) {
  }
  EXPECT_TRUE(stream.reader->Finish().ok());
}

TEST_F(StatsServiceTest, StreamArgumentsAreChecked) {
  WriteCgroup("a", 1);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  pb::StreamTaskStatsResponse response;
  {
    Stream stream = Open(*stub_, {"a", "ghost"}, 5);
    EXPECT_FALSE(stream.reader->Read(&response));
    grpc::Status status = stream.reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr("\"ghost\""));
  }
  {
    Stream stream = Open(*stub_, {""}, 5);
    EXPECT_FALSE(stream.reader->Read(&response));
    EXPECT_EQ(stream.reader->Finish().error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  for (int ms : {0, -5}) {
    pb::StreamTaskStatsRequest request;
    *request.mutable_interval() = Millis(ms);
    grpc::ClientContext context;
    auto reader = stub_->StreamTaskStats(&context, request);
    EXPECT_FALSE(reader->Read(&response));
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("interval"));
  }
  EXPECT_EQ(service_->sampler_count(), 0u);
}

TEST_F(StatsServiceTest, OneSamplerPerDistinctIntervalAndOneSecondByDefault) {
  WriteCgroup("a", 1);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  Stream s1 = Open(*stub_, {}, 5);
  Stream s2 = Open(*stub_, {"a"}, 5);
  Stream s3 = Open(*stub_, {}, 0);  // the default
  pb::StreamTaskStatsResponse response;
  for (Stream* s : {&s1, &s2, &s3}) ASSERT_TRUE(s->reader->Read(&response));
  EXPECT_EQ(service_->sampler_count(), 2u);
  std::vector<absl::Duration> intervals;
  for (const auto& info : service_->Subscribers()) {
    intervals.push_back(info.interval);
  }
  EXPECT_THAT(intervals, ::testing::UnorderedElementsAre(absl::Milliseconds(5),
                                                         absl::Milliseconds(5),
                                                         absl::Seconds(1)));
  for (Stream* s : {&s1, &s2, &s3}) s->context->TryCancel();
  EXPECT_TRUE(WaitFor([&] { return service_->sampler_count() == 0; }));
}

TEST_F(StatsServiceTest, AStalledSubscriberDoesNotStallAnother) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(absl::StrCat("t", i));
    WriteCgroup(ids.back(), i);
    ASSERT_TRUE(Register(ids.back(), absl::StrCat("/berth/", ids.back())).ok());
  }
  // Both on the same sampler (1 ms), each on a connection of its own. The
  // stalled one (which chooses the tasks, to tell it apart) never reads.
  std::unique_ptr<pb::StatsService::Stub> stalled_stub = NewStub();
  Stream stalled = Open(*stalled_stub, ids, 1);
  Stream active = Open(*stub_, {}, 1);
  ASSERT_TRUE(WaitFor([&] { return service_->Subscribers().size() == 2; }));
  EXPECT_EQ(service_->sampler_count(), 1u);

  auto stalled_dropped = [&]() -> uint64_t {
    for (const auto& info : service_->Subscribers()) {
      if (!info.task_ids.empty()) return info.dropped;
    }
    return 0;
  };
  pb::StreamTaskStatsResponse response;
  uint64_t received = 0;
  // The active one keeps receiving while the stalled one's transport fills
  // up and its queue starts dropping.
  while (stalled_dropped() == 0) {
    ASSERT_TRUE(active.reader->Read(&response)) << "after " << received;
    ++received;
  }
  const uint64_t dropped_then = stalled_dropped();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(active.reader->Read(&response)) << "after " << received;
    ++received;
  }
  // The dropped count keeps growing: the sampler goes on.
  ASSERT_TRUE(WaitFor([&] { return stalled_dropped() > dropped_then; }));
  // And the stalled client, once it reads, learns what it lost.
  uint64_t reported = 0;
  int read = 0;
  for (; read < 5000000 && reported == 0; ++read) {
    ASSERT_TRUE(stalled.reader->Read(&response)) << "after " << read;
    reported = response.dropped_samples();
  }
  EXPECT_GT(reported, 0u);
  stalled.context->TryCancel();
  active.context->TryCancel();
  EXPECT_TRUE(WaitFor([&] { return service_->sampler_count() == 0; }));
}

TEST_F(StatsServiceTest, NodeStatsFromProc) {
  // Since the service started: 200 ticks busy of 200 on 2 cores.
  WriteProcStat(300, 1000);
  pb::GetNodeStatsResponse response;
  ASSERT_TRUE(
      stub_->GetNodeStats(Context().get(), pb::GetNodeStatsRequest(), &response)
          .ok());
  EXPECT_EQ(response.cpu_cores(), 2u);
  EXPECT_DOUBLE_EQ(response.cpu_core_mhz(), kMhz);
  EXPECT_DOUBLE_EQ(response.cpu_total_mhz(), 2 * kMhz);
  EXPECT_DOUBLE_EQ(response.cpu_percent(), 200);
  EXPECT_EQ(response.memory_total_bytes(), 2048u * 1024);
  EXPECT_EQ(response.memory_available_bytes(), 1024u * 1024);
  EXPECT_EQ(response.cgroup_layout(), pb::CGROUP_LAYOUT_V1);
  EXPECT_GT(response.timestamp().seconds(), 0);
}

TEST_F(StatsServiceTest, ShutdownEndsStreamsWithUnavailable) {
  WriteCgroup("a", 1);
  ASSERT_TRUE(Register("a", "/berth/a").ok());
  Stream stream = Open(*stub_, {}, 5);
  pb::StreamTaskStatsResponse response;
  ASSERT_TRUE(stream.reader->Read(&response));
  service_->Shutdown();
  while (stream.reader->Read(&response)) {
  }
  EXPECT_EQ(stream.reader->Finish().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  Stream late = Open(*stub_, {}, 5);
  EXPECT_FALSE(late.reader->Read(&response));
  EXPECT_EQ(late.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace stats
}  // namespace berth
