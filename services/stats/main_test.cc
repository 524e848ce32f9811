// berth-stats as a child process: --help, --version, serving on
// <runtime_dir>/stats.sock over a fixture tree, and a clean exit 0 on SIGTERM.

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/peer_test_util.h"
#include "services/common/stats/test_util.h"

extern char** environ;

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;
using ::berth::stats::testing::Runfile;
using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WaitFor;
using ::berth::stats::testing::WriteFile;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// berth-stats running with its output in files.
class Child {
 public:
  Child(const ShortTempDir& dir, const std::vector<std::string>& args)
      : stdout_(dir.Join("stdout")), stderr_(dir.Join("stderr")) {
    std::vector<std::string> storage = {Runfile("services/stats/berth-stats")};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    // fork + exec: the child gets SIGKILL should this test die first.
    const std::string stdout_path = stdout_;
    const std::string stderr_path = stderr_;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int in = open("/dev/null", O_RDONLY);
      const int out =
          open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err =
          open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (in < 0 || out < 0 || err < 0) _exit(126);
      dup2(in, 0);
      dup2(out, 1);
      dup2(err, 2);
      execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork: " << std::strerror(errno);
  }

  ~Child() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool Running() {
    if (pid_ <= 0 || exited_) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
  }

  // The exit code once it exits (-1 after a signal or if it does not).
  int Wait() {
    if (!WaitFor([this] { return !Running(); })) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

  pid_t pid() const { return pid_; }
  std::string out() const { return ReadFile(stdout_); }
  std::string err() const { return ReadFile(stderr_); }

 private:
  const std::string stdout_;
  const std::string stderr_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

TEST(MainTest, HelpExitsZeroAndListsTheFlags) {
  ShortTempDir dir;
  Child child(dir, {"--help"});
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_THAT(child.out(), HasSubstr("usage: berth-stats"));
  EXPECT_THAT(child.out(), HasSubstr("runtime_dir"));
  EXPECT_THAT(child.out(), HasSubstr("cgroup_root"));
  EXPECT_THAT(child.out(), HasSubstr("proc_root"));
}

TEST(MainTest, VersionExitsZero) {
  ShortTempDir dir;
  Child child(dir, {"--version"});
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_THAT(child.out(), HasSubstr("berth-stats "));
}

TEST(MainTest, BadLayoutFlagExitsNonZeroNamingIt) {
  ShortTempDir dir;
  Child child(dir, {"--runtime_dir=" + dir.path(), "--cgroup_layout=v3"});
  EXPECT_EQ(child.Wait(), 2);
  EXPECT_THAT(child.err(), HasSubstr("--cgroup_layout"));
}

TEST(MainTest, ServesOnTheRuntimeDirAndStopsCleanlyOnSigterm) {
  ShortTempDir dir;
  // A cgroup v1 tree of one task, and a /proc of the host's basics.
  const std::string cg = dir.Join("cg");
  WriteFile(cg + "/cpuacct/berth/t1/cpuacct.usage", "42\n");
  WriteFile(cg + "/memory/berth/t1/memory.usage_in_bytes", "4096\n");
  const std::string proc = dir.Join("proc");
  WriteFile(proc + "/stat",
            "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n");
  WriteFile(proc + "/meminfo", "MemTotal: 8 kB\nMemAvailable: 4 kB\n");
  WriteFile(proc + "/cpuinfo", "cpu MHz\t\t: 1000.0\n");
  const std::string runtime = dir.Join("run");

  Child child(dir, {"--runtime-dir=" + runtime, "--cgroup_root=" + cg,
                    "--proc_root=" + proc, "--cgroup_layout=v1"});
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(runtime + "/stats.sock", absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status() << "\n" << child.err();
  std::unique_ptr<pb::StatsService::Stub> stub =
      pb::StatsService::NewStub(*channel);

  {
    grpc::ClientContext context;
    pb::RegisterTaskRequest request;
    request.set_task_id("t1");
    request.set_cgroup_path("/berth/t1");
    pb::RegisterTaskResponse response;
    ASSERT_TRUE(stub->RegisterTask(&context, request, &response).ok());
    EXPECT_EQ(response.backend(), pb::BACKEND_CGROUP_V1);
  }
  {
    grpc::ClientContext context;
    pb::GetTaskStatsRequest request;
    request.set_task_id("t1");
    pb::GetTaskStatsResponse response;
    ASSERT_TRUE(stub->GetTaskStats(&context, request, &response).ok());
    EXPECT_EQ(response.usage().usage().cpu().usage().nanos(), 42);
    EXPECT_EQ(response.usage().usage().memory().usage(), 4096u);
  }
  {
    grpc::ClientContext context;
    pb::GetNodeStatsResponse response;
    ASSERT_TRUE(
        stub->GetNodeStats(&context, pb::GetNodeStatsRequest(), &response)
            .ok());
    EXPECT_EQ(response.cgroup_layout(), pb::CGROUP_LAYOUT_V1);
    EXPECT_EQ(response.cpu_cores(), 1u);
    EXPECT_DOUBLE_EQ(response.cpu_core_mhz(), 1000);
  }
  // An open stream must not hold the shutdown up: it ends UNAVAILABLE.
  auto stream_context = std::make_unique<grpc::ClientContext>();
  auto reader =
      stub->StreamTaskStats(stream_context.get(), pb::StreamTaskStatsRequest());
  pb::StreamTaskStatsResponse sample;
  ASSERT_TRUE(reader->Read(&sample));
  grpc::Status stream_end;
  std::thread reading([&] {
    pb::StreamTaskStatsResponse more;
    while (reader->Read(&more)) {
    }
    stream_end = reader->Finish();
  });

  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  reading.join();
  EXPECT_EQ(stream_end.error_code(), grpc::StatusCode::UNAVAILABLE)
      << stream_end.error_message();
  // Let go of the connection, so that nothing holds the server's shutdown.
  reader.reset();
  stream_context.reset();
  stub.reset();
  channel->reset();
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_THAT(child.err(), HasSubstr("SIGTERM"));
  struct stat st;
  EXPECT_NE(lstat((runtime + "/stats.sock").c_str(), &st), 0)
      << "the socket is left behind";
}

// stats.sock is root's (and the service's own uid's): 0600, and a caller of
// another uid that gets past the file's permissions is refused by the server.
TEST(MainTest, RefusesCallersOfOtherUids) {
  ShortTempDir dir;
  const std::string proc = dir.Join("proc");
  WriteFile(proc + "/stat", "cpu  1 0 1 10 0 0 0 0 0 0\n");
  WriteFile(proc + "/meminfo", "MemTotal: 8 kB\nMemAvailable: 4 kB\n");
  WriteFile(proc + "/cpuinfo", "cpu MHz\t\t: 1000.0\n");
  const std::string runtime = dir.Join("run");
  const std::string socket = runtime + "/stats.sock";
  Child child(dir, {"--runtime-dir=" + runtime, "--proc_root=" + proc,
                    "--cgroup_layout=none"});
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, absl::Seconds(30));
  ASSERT_TRUE(channel.ok()) << channel.status() << "\n" << child.err();
  struct stat st = {};
  ASSERT_EQ(lstat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);

  pb::GetNodeStatsResponse response;
  {
    absl::StatusOr<base::UniqueFd> fd =
        berth::testing::ConnectAs(socket, berth::testing::Caller{});
    ASSERT_TRUE(fd.ok()) << fd.status();
    std::unique_ptr<pb::StatsService::Stub> stub = pb::StatsService::NewStub(
        berth::testing::ChannelOverConnection(*std::move(fd)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Status status =
        stub->GetNodeStats(&context, pb::GetNodeStatsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr("uid 65534 may not call " + socket));
  }
  // Root's calls go on.
  grpc::ClientContext root_context;
  EXPECT_TRUE(
      pb::StatsService::NewStub(*channel)
          ->GetNodeStats(&root_context, pb::GetNodeStatsRequest(), &response)
          .ok());
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  channel->reset();
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_THAT(child.err(), HasSubstr("refusing the calls of uid 65534"));
}

TEST(MainTest, DetectsThisHostsLayoutByDefault) {
  ShortTempDir dir;
  const std::string runtime = dir.Join("run");
  Child child(dir, {"--runtime_dir=" + runtime});
  {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(runtime + "/stats.sock", absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status() << "\n" << child.err();
    grpc::ClientContext context;
    pb::GetNodeStatsResponse response;
    ASSERT_TRUE(
        pb::StatsService::NewStub(*channel)
            ->GetNodeStats(&context, pb::GetNodeStatsRequest(), &response)
            .ok());
    EXPECT_NE(response.cgroup_layout(), pb::CGROUP_LAYOUT_UNSPECIFIED);
    EXPECT_GT(response.cpu_cores(), 0u);
    EXPECT_GT(response.memory_total_bytes(), 0u);
  }  // The connection closes: nothing holds the shutdown.
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  EXPECT_EQ(child.Wait(), 0) << child.err();
}

}  // namespace
}  // namespace stats
}  // namespace berth
