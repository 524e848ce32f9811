// berth-driver-exec's driver, in this process, against the host's real
// namespaces and cgroups (root, outside Bazel's sandbox). Each test uses a
// cgroup parent of its own and checks that it is empty at the end.

#include "services/driver/exec/exec_driver.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "plugins/sdk/attach.h"
#include "services/common/dial.h"
#include "services/common/stats/cgroup_layout.h"
#include "services/common/test_util.h"
#include "services/driver/common/attach_test_util.h"
#include "services/driver/common/start_record.h"
#include "services/driver/common/task_cgroup.h"
#include "services/driver/exec/exec_state.pb.h"

namespace berth::exec_driver {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::berth::driver_common::CgroupLimits;
using ::berth::driver_common::FakeAttachStream;
using ::berth::driver_common::MakeAttachSetup;
using ::berth::driver_common::ReadStartRecord;
using ::berth::driver_common::StartRecordPath;
using ::berth::driver_common::TaskCgroup;
using ::berth::driver_common::WriteStartRecord;
using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;

std::string Trim(const std::string& s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

// The pids of this process's children (any thread's).
std::set<pid_t> Children() {
  std::set<pid_t> pids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return pids;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    for (absl::string_view pid :
         absl::StrSplit(ReadFileOrEmpty(absl::StrCat(
                            "/proc/self/task/", entry->d_name, "/children")),
                        ' ', absl::SkipWhitespace())) {
      pid_t value = 0;
      if (absl::SimpleAtoi(pid, &value)) pids.insert(value);
    }
  }
  closedir(dir);
  return pids;
}

int OpenFdCount() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the DIR's own
}

// Copies the host's `from` (following links) to `to`, making its parents.
bool CopyFromHost(const std::string& from, const std::string& to) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(to).parent_path(),
                                      error);
  return !error &&
         std::filesystem::copy_file(
             from, to, std::filesystem::copy_options::overwrite_existing,
             error);
}

// An image-like root file system in `dir` (made, owned by root): the host's
// sh, id, ls, touch and cat in /usr/bin, with the libraries ldd says they
// load at the paths it names, and /bin a link to usr/bin. Empty on success,
// else what failed.
// A user namespace mapping container ids 0..65535 to host uids from `uid`
// and gids from `gid`.
void MapIds(dv1::Isolation* isolation, uint32_t uid, uint32_t gid) {
  dv1::UserNamespace& userns = *isolation->mutable_user_namespace();
  for (auto [mapping, host] : {std::pair{userns.add_uid_mappings(), uid},
                               std::pair{userns.add_gid_mappings(), gid}}) {
    mapping->set_container_id(0);
    mapping->set_host_id(host);
    mapping->set_size(65536);
  }
}

std::string MakeImage(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::StrCat("mkdir ", dir, ": ", strerror(errno));
  }
  for (const char* program : {"sh", "id", "ls", "touch", "cat"}) {
    const std::string host = absl::StrCat("/usr/bin/", program);
    if (!CopyFromHost(host, dir + host)) return "copying " + host;
    FILE* ldd = popen(absl::StrCat("ldd ", host, " 2>/dev/null").c_str(), "r");
    if (ldd == nullptr) return "running ldd";
    std::string listing;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), ldd)) {
      listing.append(buffer, n);
    }
    pclose(ldd);
    for (absl::string_view word :
         absl::StrSplit(listing, absl::ByAnyChar(" \t\n"))) {
      if (!absl::StartsWith(word, "/")) continue;
      if (!CopyFromHost(std::string(word), dir + std::string(word))) {
        return absl::StrCat("copying ", word);
      }
    }
  }
  if (symlink("usr/bin", (dir + "/bin").c_str()) != 0 && errno != EEXIST) {
    return absl::StrCat("symlink ", dir, "/bin: ", strerror(errno));
  }
  return "";
}

class ExecDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, cgroups)";
    absl::StatusOr<stats::CgroupMounts> mounts =
        stats::DetectCgroupLayout("/sys/fs/cgroup");
    if (!mounts.ok() || mounts->layout == stats::v1::CGROUP_LAYOUT_NONE) {
      GTEST_SKIP() << "no cgroups mounted at /sys/fs/cgroup";
    }
    mounts_ = *mounts;
    static int counter = 0;
    parent_ = absl::StrCat("/berth-driver-test-", getpid(), "-", ++counter);
    options_.init_path =
        RunfilePath("services/driver/exec/init/berth-task-init");
    options_.cgroup_parent = parent_;
    options_.state_dir = state_.path();
    // As the driver makes its state directory: tasks of other users pass.
    chmod(state_.path().c_str(), 0711);
    driver_ = std::make_unique<ExecDriver>(options_);
    absl::StatusOr<TaskCgroup> probe =
        TaskCgroup::Create(mounts_, parent_, "probe", CgroupLimits());
    if (!probe.ok()) {
      GTEST_SKIP() << "cannot make cgroups under " << parent_ << ": "
                   << probe.status() << " (run as root outside the sandbox)";
    }
    ASSERT_TRUE(probe->Remove(absl::Seconds(5)).ok());
  }

  void TearDown() override {
    if (driver_ == nullptr) return;
    for (const std::string& id : started_) {
      absl::Status status = driver_->DestroyTask(id, /*force=*/true);
      EXPECT_TRUE(status.ok() || absl::IsNotFound(status)) << status;
    }
    // Nothing of any task is left under the parent.
    for (const std::string& dir : ParentDirs()) {
      DIR* d = opendir(dir.c_str());
      if (d == nullptr) continue;
      while (struct dirent* entry = readdir(d)) {
        if (entry->d_type == DT_DIR && entry->d_name[0] != '.') {
          ADD_FAILURE() << "cgroup left behind: " << dir << "/"
                        << entry->d_name;
        }
      }
      closedir(d);
      rmdir(dir.c_str());
    }
  }

  std::vector<std::string> ParentDirs() const {
    std::vector<std::string> dirs;
    for (const auto& [controller, mount] : mounts_.v1) {
      dirs.push_back(mount + parent_);
    }
    if (!mounts_.v2.empty()) dirs.push_back(mounts_.v2 + parent_);
    return dirs;
  }

  // The task's cgroup directory of a v1 controller (empty on v2 hosts).
  std::string V1Dir(const std::string& controller, const std::string& id) {
    const std::string mount = mounts_.V1Mount(controller);
    return mount.empty() ? "" : absl::StrCat(mount, parent_, "/", id);
  }

  dv1::TaskConfig Task(const std::string& id,
                       const std::vector<std::string>& command) {
    dv1::TaskConfig task;
    task.set_id(id);
    task.set_name(id);
    auto& fields = *task.mutable_driver_config()->mutable_fields();
    fields["command"].set_string_value(command[0]);
    for (size_t i = 1; i < command.size(); ++i) {
      fields["args"].mutable_list_value()->add_values()->set_string_value(
          command[i]);
    }
    return task;
  }

  dv1::TaskConfig Shell(const std::string& id, const std::string& script) {
    return Task(id, {"/bin/sh", "-c", script});
  }

  absl::StatusOr<dv1::StartTaskResponse> Start(const dv1::TaskConfig& task) {
    absl::StatusOr<dv1::StartTaskResponse> response = driver_->StartTask(task);
    if (response.ok()) started_.push_back(task.id());
    return response;
  }

  dv1::ExitResult Wait(const std::string& id) {
    plugin::CancelToken cancel;
    absl::StatusOr<dv1::ExitResult> result = driver_->WaitTask(id, cancel);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : dv1::ExitResult();
  }

  std::string TaskDir(const std::string& id) {
    return absl::StrCat(state_.path(), "/tasks/", id);
  }
  std::string Stdout(const std::string& id) {
    return ReadFileOrEmpty(TaskDir(id) + "/logs/stdout.log");
  }

  stats::CgroupMounts mounts_;
  std::string parent_;
  ShortTempDir state_;
  ExecDriverOptions options_;
  std::unique_ptr<ExecDriver> driver_;
  std::vector<std::string> started_;
};

TEST_F(ExecDriverTest, TaskRunsInItsOwnNamespacesCgroupAndDirectory) {
  dv1::TaskConfig task =
      Shell("ns",
            "echo pid=$$; readlink /proc/self/ns/mnt /proc/self/ns/ipc "
            "/proc/self/ns/uts; hostname; pwd; echo foo=$FOO; "
            "echo id=$BERTH_TASK_ID; cat /proc/self/cgroup; echo err >&2");
  task.set_name("web-1");
  (*task.mutable_env())["FOO"] = "bar";
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("ns").exit_code(), 0);
  const std::string out = Stdout("ns");
  EXPECT_THAT(out, HasSubstr("pid=2\n"));  // the init is 1
  for (const char* ns : {"mnt", "ipc", "uts"}) {
    char own[64] = {};
    ASSERT_GT(readlink(absl::StrCat("/proc/self/ns/", ns).c_str(), own,
                       sizeof(own) - 1),
              0);
    EXPECT_THAT(out, HasSubstr(absl::StrCat(ns, ":[")));
    EXPECT_THAT(out, ::testing::Not(HasSubstr(own))) << ns;
  }
  EXPECT_THAT(out, HasSubstr("\nweb-1\n"));
  // Its own root: the task directory is at /berth/task.
  EXPECT_THAT(out, HasSubstr("\n/berth/task\n"));
  EXPECT_THAT(out, HasSubstr("foo=bar\n"));
  EXPECT_THAT(out, HasSubstr("id=ns\n"));
  // A cgroup namespace rooted at its own cgroup: every hierarchy shows "/".
  EXPECT_THAT(out, HasSubstr(":/\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr(parent_)));
  EXPECT_EQ(ReadFileOrEmpty(TaskDir("ns") + "/logs/stderr.log"), "err\n");
}

// Issue 15's defaults: its own root with nothing of berth's or the host's
// beyond the read-only system directories, Docker's capabilities,
// no_new_privs and a seccomp filter.
TEST_F(ExecDriverTest, TaskIsIsolatedByDefault) {
  dv1::TaskConfig task = Shell(
      "iso",
      "grep -E '^(CapBnd|CapEff|CapPrm|CapInh|CapAmb|NoNewPrivs|Seccomp):' "
      "/proc/self/status; "
      "for p in /run/berth /root /home /var/lib /usr/bin/env /berth/task; do "
      "  test -e $p && echo has $p || echo no $p; done; "
      "touch /usr/x 2>/dev/null && echo wrote-usr; "
      "touch /tmp/x && echo wrote-tmp; ls -A /tmp; "
      "ls -A /berth/task/.berth | wc -l; ls -A /berth/task/logs | wc -l; "
      "mv /berth/task/logs /berth/task/l2 2>/dev/null && echo moved-logs; "
      "ls -l /proc/1/root/ 2>/dev/null | head -1; "
      "test -w /proc/sys/kernel/hostname && echo sys-writable; "
      "test -e /dev/sda && echo has-sda; test -c /dev/null && echo dev-null; "
      "mount -t tmpfs none /mnt 2>/dev/null && echo mounted; "
      "echo end");
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("iso").exit_code(), 0);
  const std::string out = Stdout("iso");
  // Docker's default set; nothing ambient.
  EXPECT_THAT(out, HasSubstr("CapEff:\t00000000a80425fb\n"));
  EXPECT_THAT(out, HasSubstr("CapBnd:\t00000000a80425fb\n"));
  EXPECT_THAT(out, HasSubstr("CapAmb:\t0000000000000000\n"));
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t2\n"));
  for (const char* absent : {"/run/berth", "/root", "/home", "/var/lib"}) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("no ", absent, "\n")));
  }
  EXPECT_THAT(out, HasSubstr("has /usr/bin/env\nhas /berth/task\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("wrote-usr")));
  EXPECT_THAT(out, HasSubstr("wrote-tmp\nx\n"));  // a /tmp of its own
  EXPECT_THAT(out, HasSubstr("\n0\n0\n"));        // .berth and logs covered
  EXPECT_THAT(out, ::testing::Not(HasSubstr("moved-logs")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("sys-writable")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("has-sda")));
  EXPECT_THAT(out, HasSubstr("dev-null\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("mounted")));
  EXPECT_THAT(out, HasSubstr("end\n"));
  // The host saw none of it.
  struct stat st;
  EXPECT_NE(stat("/usr/x", &st), 0);
}

TEST_F(ExecDriverTest, IsolationCanBeLoosenedAndMountsAdded) {
  char host_dir[] = "/tmp/berth-exec-mount-XXXXXX";
  ASSERT_NE(mkdtemp(host_dir), nullptr);
  dv1::TaskConfig task =
      Shell("loose",
            "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; "
            "echo hi > /data/hello && echo wrote-data; "
            "echo x > /ro/y 2>/dev/null || echo ro-refused; "
            "touch /scratch/z && echo wrote-scratch; "
            "touch /newfile 2>/dev/null || echo root-readonly");
  dv1::Isolation& isolation = *task.mutable_isolation();
  isolation.add_cap_add("NET_ADMIN");
  isolation.add_cap_drop("ALL");
  isolation.set_allow_privilege_escalation(true);
  isolation.mutable_seccomp()->set_type(dv1::SECCOMP_PROFILE_TYPE_UNCONFINED);
  isolation.set_readonly_rootfs(true);
  dv1::Mount* data = isolation.add_mounts();
  data->set_type(dv1::MOUNT_TYPE_BIND);
  data->set_source(host_dir);
  data->set_destination("/data");
  dv1::Mount* ro = isolation.add_mounts();
  ro->set_type(dv1::MOUNT_TYPE_BIND);
  ro->set_source(host_dir);
  ro->set_destination("/ro");
  ro->set_read_only(true);
  dv1::Mount* scratch = isolation.add_mounts();
  scratch->set_type(dv1::MOUNT_TYPE_TMPFS);
  scratch->set_destination("/scratch");
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("loose").exit_code(), 0);
  const std::string out = Stdout("loose");
  EXPECT_THAT(out, HasSubstr("CapEff:\t0000000000001000\n"));  // NET_ADMIN
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t0\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t0\n"));
  EXPECT_THAT(out, HasSubstr("wrote-data\nro-refused\nwrote-scratch\n"
                             "root-readonly\n"));
  EXPECT_EQ(ReadFileOrEmpty(absl::StrCat(host_dir, "/hello")), "hi\n");
  unlink(absl::StrCat(host_dir, "/hello").c_str());
  rmdir(host_dir);
}

TEST_F(ExecDriverTest, PrivilegedTaskKeepsEveryCapabilityButItsOwnRoot) {
  dv1::TaskConfig task =
      Shell("priv",
            "grep -E '^(CapEff|Seccomp):' /proc/self/status; "
            "test -e /run/berth && echo has-run-berth; "
            "test -w /sys/kernel && echo sys-writable; echo end");
  task.mutable_isolation()->set_privileged(true);
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("priv").exit_code(), 0);
  const std::string out = Stdout("priv");
  // Every capability the driver has itself (this host may bound it).
  const std::string status = ReadFileOrEmpty("/proc/self/status");
  const size_t bounding = status.find("CapBnd:\t");
  ASSERT_NE(bounding, std::string::npos);
  EXPECT_THAT(out, HasSubstr(absl::StrCat(
                       "CapEff:\t", status.substr(bounding + 8, 16), "\n")));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t0\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("has-run-berth")));
  EXPECT_THAT(out, HasSubstr("sys-writable\n"));
}

TEST_F(ExecDriverTest, NonRootUserKeepsNoCapabilityAndReachesItsDirectory) {
  dv1::TaskConfig task =
      Shell("nobody", "id; pwd; grep -E '^(CapEff|CapPrm):' /proc/self/status");
  task.set_user("nobody");
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("nobody").exit_code(), 0);
  const std::string out = Stdout("nobody");
  EXPECT_THAT(out, HasSubstr("uid=65534(nobody) gid=65534(nogroup)"));
  EXPECT_THAT(out, HasSubstr("\n/berth/task\n"));
  EXPECT_THAT(out, HasSubstr("CapEff:\t0000000000000000\n"));
  EXPECT_THAT(out, HasSubstr("CapPrm:\t0000000000000000\n"));
}

TEST_F(ExecDriverTest, TaskJoinsTheNetworkNamespaceItIsGiven) {
  // A network namespace of our own, held by a child that waits.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  const std::string ns = absl::StrCat("/proc/", holder, "/ns/net");
  char expected[64] = {};
  ASSERT_GT(readlink(ns.c_str(), expected, sizeof(expected) - 1), 0);

  dv1::TaskConfig task =
      Shell("netns", "readlink /proc/self/ns/net; cat /proc/net/dev");
  task.mutable_network()->set_mode(dv1::NETWORK_ISOLATION_MODE_GROUP);
  task.mutable_network()->set_namespace_path(ns);
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("netns").exit_code(), 0);
  const std::string out = Stdout("netns");
  EXPECT_THAT(out, HasSubstr(expected));
  // The namespace has only loopback (the task's /proc is its own).
  EXPECT_THAT(out, HasSubstr("lo:"));
  // One ":" in "net:[...]", one per interface.
  EXPECT_EQ(std::count(out.begin(), out.end(), ':'), 2) << out;
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);

  // Without a namespace the task stays in the host's.
  ASSERT_TRUE(Start(Shell("hostnet", "readlink /proc/self/ns/net")).ok());
  EXPECT_EQ(Wait("hostnet").exit_code(), 0);
  char own[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", own, sizeof(own) - 1), 0);
  EXPECT_EQ(Stdout("hostnet"), absl::StrCat(own, "\n"));
}

TEST_F(ExecDriverTest, TaskRunsAsItsUserAndGroup) {
  dv1::TaskConfig task = Shell("user", "id -u; id -g; touch mine");
  task.set_user("nobody");
  task.set_group("nogroup");
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("user").exit_code(), 0);
  EXPECT_EQ(Stdout("user"), "65534\n65534\n");
  struct stat st;
  ASSERT_EQ(stat((TaskDir("user") + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

TEST_F(ExecDriverTest, LimitsAreSetOnTheTaskCgroup) {
  if (mounts_.layout == stats::v1::CGROUP_LAYOUT_V2) {
    GTEST_SKIP() << "checks v1 files; this host has cgroup v2 only";
  }
  dv1::TaskConfig task = Task("limits", {"sleep", "1000"});
  task.mutable_resources()->set_memory_bytes(64 << 20);
  task.mutable_resources()->set_pids_limit(50);
  task.mutable_resources()->set_cpu_millicores(500);
  task.mutable_resources()->set_cpu_shares(512);
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Trim(ReadFileOrEmpty(V1Dir("memory", "limits") +
                                 "/memory.limit_in_bytes")),
            "67108864");
  EXPECT_EQ(Trim(ReadFileOrEmpty(V1Dir("pids", "limits") + "/pids.max")), "50");
  EXPECT_EQ(Trim(ReadFileOrEmpty(V1Dir("cpu", "limits") + "/cpu.cfs_quota_us")),
            "50000");
  EXPECT_EQ(Trim(ReadFileOrEmpty(V1Dir("cpu", "limits") + "/cpu.shares")),
            "512");
  // Both the init and the program are in it.
  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Open(mounts_, parent_, "limits");
  ASSERT_TRUE(cgroup.ok());
  EXPECT_TRUE(
      WaitFor([&] { return cgroup->Pids()->size() == 2; }, absl::Seconds(5)));
}

TEST_F(ExecDriverTest, OomKillIsReported) {
  dv1::TaskConfig task = Shell("oom", "head -c 256M /dev/zero | tail");
  task.mutable_resources()->set_memory_bytes(16 << 20);
  ASSERT_TRUE(Start(task).ok());
  const dv1::ExitResult result = Wait("oom");
  // tail was killed; the shell reports it as 128+9 or dies itself.
  EXPECT_TRUE(result.oom_killed() || result.exit_code() == 137)
      << result.DebugString();
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask("oom");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state(), dv1::TASK_STATE_EXITED);
}

TEST_F(ExecDriverTest, OomKillOfTheProgramItselfSetsOomKilled) {
  // The program itself (exec'd tail) takes the memory and is killed.
  dv1::TaskConfig task = Shell("oom2", "exec tail /dev/zero");
  task.mutable_resources()->set_memory_bytes(16 << 20);
  ASSERT_TRUE(Start(task).ok());
  const dv1::ExitResult result = Wait("oom2");
  EXPECT_EQ(result.signal(), SIGKILL) << result.DebugString();
  EXPECT_TRUE(result.oom_killed()) << result.DebugString();
}

TEST_F(ExecDriverTest, OutputIsRotatedBySize) {
  dv1::TaskConfig task = Shell("logs",
                               "head -c 300000 /dev/zero | tr '\\0' o; "
                               "head -c 1000 /dev/zero | tr '\\0' e >&2");
  task.mutable_logs()->set_max_file_bytes(65536);
  task.mutable_logs()->set_max_files(2);
  ASSERT_TRUE(Start(task).ok());
  EXPECT_EQ(Wait("logs").exit_code(), 0);
  const std::string logs = TaskDir("logs") + "/logs/";
  EXPECT_EQ(ReadFileOrEmpty(logs + "stdout.log.1").size(), 65536u);
  EXPECT_EQ(ReadFileOrEmpty(logs + "stdout.log.2").size(), 65536u);
  EXPECT_FALSE(PathExists(logs + "stdout.log.3"));
  // 300000 = 4 * 65536 + 37856: the current file holds the rest.
  EXPECT_EQ(ReadFileOrEmpty(logs + "stdout.log").size(), 37856u);
  EXPECT_EQ(ReadFileOrEmpty(logs + "stderr.log"), std::string(1000, 'e'));
}

TEST_F(ExecDriverTest, StopSignalsThenKillsEverythingInTheCgroup) {
  ASSERT_TRUE(Start(Shell("stop",
                          "trap '' TERM; "
                          "(trap '' TERM; sleep 1000) & sleep 1000"))
                  .ok());
  // Let the shell set its trap and fork.
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<TaskCgroup> cgroup =
            TaskCgroup::Open(mounts_, parent_, "stop");
        absl::StatusOr<std::vector<pid_t>> pids = cgroup->Pids();
        return pids.ok() && pids->size() >= 4;
      },
      absl::Seconds(5)));
  ASSERT_TRUE(driver_->StopTask("stop", absl::Milliseconds(300), SIGTERM).ok());
  EXPECT_EQ(Wait("stop").signal(), SIGKILL);
  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Open(mounts_, parent_, "stop");
  EXPECT_TRUE(
      WaitFor([&] { return cgroup->Pids()->empty(); }, absl::Seconds(5)));
  // Stopping an exited task does nothing.
  EXPECT_TRUE(driver_->StopTask("stop", absl::Seconds(1), SIGTERM).ok());
}

TEST_F(ExecDriverTest, DestroyRefusesARunningTaskAndRemovesEverything) {
  ASSERT_TRUE(Start(Task("destroy", {"sleep", "1000"})).ok());
  absl::Status refused = driver_->DestroyTask("destroy", /*force=*/false);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("destroy"));
  ASSERT_TRUE(driver_->DestroyTask("destroy", /*force=*/true).ok());
  EXPECT_FALSE(PathExists(TaskDir("destroy")));
  for (const std::string& dir : ParentDirs()) {
    EXPECT_FALSE(PathExists(dir + "/destroy")) << dir;
  }
  EXPECT_TRUE(absl::IsNotFound(driver_->InspectTask("destroy").status()));
}

// A driver killed during a start leaves a task the next one does not know:
// DestroyTask still kills and removes what its id names (its cgroup), and
// answers NOT_FOUND.
TEST_F(ExecDriverTest, DestroyOfAnUnknownTaskRemovesItsCgroup) {
  ASSERT_TRUE(Start(Task("orphan", {"sleep", "1000"})).ok());
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask("orphan");
  ASSERT_TRUE(status.ok()) << status.status();
  pid_t pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(status->driver_attributes().at("pid"), &pid));
  driver_.reset();  // its StartTask's answer, with the handle, is lost
  driver_ = std::make_unique<ExecDriver>(options_);
  absl::Status destroyed = driver_->DestroyTask("orphan", /*force=*/true);
  EXPECT_TRUE(absl::IsNotFound(destroyed)) << destroyed;
  for (const std::string& dir : ParentDirs()) {
    EXPECT_FALSE(PathExists(dir + "/orphan")) << dir;
  }
  // Its init (this process's child) was killed: a zombie, or reaped.
  const std::string stat =
      ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  EXPECT_TRUE(paren == std::string::npos || stat.substr(paren + 2, 1) == "Z")
      << "the task's init " << pid << " still runs: " << stat;
  waitpid(pid, nullptr, WNOHANG);
  // An id that is not one StartTask takes (it names paths) is refused,
  // naming it, before any path is made.
  for (const std::string id : {"..", "../orphan", "a/b", ".x", ""}) {
    absl::Status refused = driver_->DestroyTask(id, /*force=*/true);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument)
        << "\"" << id << "\": " << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "task.id")) << refused;
  }
}

// berth-driver-exec killed -9 in StartTask after the task's init started
// (tools/chaos F6, lifecycle 16 exec/none/none: recorded "never started",
// but its program ran): the relaunched driver finds the run from its start
// record, running and then exited with the program's code, and gives its
// handle, which a later driver's RecoverTask accepts.
TEST_F(ExecDriverTest, ARunWhoseStartWasCutOffIsFoundByTheNextDriver) {
  ExecDriverOptions killed = options_;
  killed.interrupt_start_for_test =
      ExecDriverOptions::InterruptStart::kAfterInit;
  driver_ = std::make_unique<ExecDriver>(killed);
  const std::string id = "cut-off";
  absl::StatusOr<dv1::StartTaskResponse> lost = driver_->StartTask(
      Shell(id, "echo ran; while [ ! -e go ]; do sleep 0.05; done; exit 5"));
  ASSERT_TRUE(absl::IsAborted(lost.status())) << lost.status();
  started_.push_back(id);
  absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state_.path(), id);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(FileMode(StartRecordPath(state_.path(), id)), 0600);
  ExecTaskState recorded;
  ASSERT_TRUE(recorded.ParseFromString(record->driver_state()));
  const pid_t init = recorded.init_pid();
  ASSERT_GT(init, 0);
  ASSERT_TRUE(WaitFor([&] { return Stdout(id) == "ran\n"; }));

  // Relaunched on the same state directory: the run is its.
  driver_ = std::make_unique<ExecDriver>(options_);
  absl::StatusOr<dv1::TaskStatus> running = driver_->InspectTask(id);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state(), dv1::TASK_STATE_RUNNING);
  EXPECT_EQ(running->driver_attributes().at("pid"), absl::StrCat(init));
  EXPECT_EQ(running->started_at().seconds(),
            recorded.started_at_unix_nanos() / 1000000000);
  absl::StatusOr<dv1::TaskHandle> handle = driver_->HandleOf(id);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(handle->config().id(), id);
  EXPECT_EQ(handle->state(), dv1::TASK_STATE_RUNNING);
  EXPECT_TRUE(absl::IsNotFound(driver_->HandleOf("other").status()));

  // With that handle, the driver after the next restart recovers it.
  driver_ = std::make_unique<ExecDriver>(options_);
  absl::StatusOr<dv1::TaskStatus> recovered = driver_->RecoverTask(*handle);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->state(), dv1::TASK_STATE_RUNNING);
  std::ofstream(TaskDir(id) + "/go") << "";
  EXPECT_EQ(Wait(id).exit_code(), 5);
  absl::StatusOr<dv1::TaskStatus> exited = driver_->InspectTask(id);
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_EQ(exited->state(), dv1::TASK_STATE_EXITED);
  EXPECT_EQ(exited->exit_result().exit_code(), 5);

  // Ended while no driver held it: found exited, with its code.
  driver_ = std::make_unique<ExecDriver>(options_);
  exited = driver_->InspectTask(id);
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_EQ(exited->state(), dv1::TASK_STATE_EXITED);
  EXPECT_EQ(exited->exit_result().exit_code(), 5);
  EXPECT_EQ(Wait(id).exit_code(), 5);
  EXPECT_EQ(driver_->HandleOf(id)->state(), dv1::TASK_STATE_EXITED);

  ASSERT_TRUE(driver_->DestroyTask(id, /*force=*/false).ok());
  for (const std::string& dir : ParentDirs()) {
    EXPECT_FALSE(PathExists(absl::StrCat(dir, "/", id))) << dir;
  }
  EXPECT_FALSE(PathExists(TaskDir(id)));
  EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id)));
  EXPECT_TRUE(absl::IsNotFound(driver_->InspectTask(id).status()));
  // It was this process's child (the "killed" driver's).
  EXPECT_EQ(waitpid(init, nullptr, 0), init);
}

// A start cut off before its init started, or whose init is gone without an
// exit record, is no run: NOT_FOUND, and DestroyTask (which the node then
// calls) leaves nothing of it, the task directory it was given included.
// Half-written records of a killed driver go when the next one starts.
TEST_F(ExecDriverTest, ACutOffStartWithoutARunIsNotFoundAndLeavesNothing) {
  for (const auto& [id, where] :
       {std::pair{"no-init", ExecDriverOptions::InterruptStart::kBeforeInit},
        std::pair{"init-killed",
                  ExecDriverOptions::InterruptStart::kAfterInit}}) {
    SCOPED_TRACE(id);
    ExecDriverOptions killed = options_;
    killed.interrupt_start_for_test = where;
    driver_ = std::make_unique<ExecDriver>(killed);
    dv1::TaskConfig task = Task(id, {"sleep", "1000"});
    const std::string given_dir = state_.Join(absl::StrCat(id, "-dir"));
    task.set_task_dir(given_dir);
    ASSERT_TRUE(absl::IsAborted(driver_->StartTask(task).status()));
    absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state_.path(), id);
    ASSERT_TRUE(record.ok()) << record.status();
    ExecTaskState recorded;
    ASSERT_TRUE(recorded.ParseFromString(record->driver_state()));
    if (where == ExecDriverOptions::InterruptStart::kAfterInit) {
      // Killed with everything in its pid namespace: no exit record.
      ASSERT_GT(recorded.init_pid(), 0);
      ASSERT_EQ(kill(recorded.init_pid(), SIGKILL), 0);
      EXPECT_EQ(waitpid(recorded.init_pid(), nullptr, 0), recorded.init_pid());
    } else {
      EXPECT_EQ(recorded.init_pid(), 0);
    }
    EXPECT_TRUE(PathExists(given_dir));
    const std::string half_written = state_.path() + "/starts/.other.tmp";
    std::ofstream(half_written) << "half";

    driver_ = std::make_unique<ExecDriver>(options_);
    EXPECT_FALSE(PathExists(half_written));
    absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask(id);
    EXPECT_TRUE(absl::IsNotFound(status.status())) << status.status();
    EXPECT_TRUE(absl::IsNotFound(driver_->HandleOf(id).status()));
    absl::Status destroyed = driver_->DestroyTask(id, /*force=*/true);
    EXPECT_TRUE(absl::IsNotFound(destroyed)) << destroyed;
    for (const std::string& dir : ParentDirs()) {
      EXPECT_FALSE(PathExists(absl::StrCat(dir, "/", id))) << dir;
    }
    EXPECT_FALSE(PathExists(given_dir));
    EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id)));
  }
  // An id that names no record's path is only unknown.
  for (const std::string id : {"..", "../starts", "a/b", ".x", ""}) {
    EXPECT_TRUE(absl::IsNotFound(driver_->InspectTask(id).status())) << id;
  }
}

// What a task's init is doing: "program" once it started the task's program
// (its child), "held" while it waits for the driver's go (blocked reading
// fd 5, InitSpec::go_fd), else "".
std::string InitProgress(pid_t init) {
  const std::string children = ReadFileOrEmpty(
      absl::StrCat("/proc/", init, "/task/", init, "/children"));
  if (!absl::StripAsciiWhitespace(children).empty()) return "program";
  const std::string call =
      ReadFileOrEmpty(absl::StrCat("/proc/", init, "/syscall"));
  if (absl::StartsWith(call, absl::StrCat(SYS_read, " 0x5 "))) return "held";
  return "";
}

// berth-driver-exec killed -9 after its init was cloned but before the start
// record held the init's pid (review M2): had the init started the program,
// the next driver, finding no pid, would answer NOT_FOUND and the node would
// start the run again. The init waits for the driver's go, given once the pid
// is recorded; when recording fails (or the driver dies), the init gets end
// of file instead and no program starts.
TEST_F(ExecDriverTest, TheInitStartsNoProgramBeforeItsPidIsRecorded) {
  if (access("/proc/self/syscall", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/PID/syscall here (a kernel without "
                    "CONFIG_HAVE_ARCH_TRACEHOOK): cannot see the init wait";
  }
  for (const bool record_fails : {false, true}) {
    SCOPED_TRACE(record_fails ? "the record fails" : "recorded");
    const std::string id = record_fails ? "unrecorded" : "recorded";
    std::string seen;
    ExecDriverOptions options = options_;
    options.init_spawned_for_test = [&](pid_t init) -> absl::Status {
      if (!WaitFor([&] {
            // A program already done leaves its output.
            seen = Stdout(id).empty() ? InitProgress(init) : "program";
            return !seen.empty();
          })) {
        seen = "neither started the program nor waited";
      }
      if (record_fails) return absl::DataLossError("cannot record (test)");
      return absl::OkStatus();
    };
    driver_ = std::make_unique<ExecDriver>(options);
    absl::StatusOr<dv1::StartTaskResponse> started =
        Start(Shell(id, "echo ran"));
    EXPECT_EQ(seen, "held");
    if (record_fails) {
      EXPECT_TRUE(absl::IsDataLoss(started.status())) << started.status();
      EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id)));
      EXPECT_FALSE(PathExists(TaskDir(id)));
      continue;
    }
    ASSERT_TRUE(started.ok()) << started.status();
    EXPECT_EQ(Wait(id).exit_code(), 0);
    EXPECT_EQ(Stdout(id), "ran\n");
    EXPECT_TRUE(driver_->DestroyTask(id, /*force=*/false).ok());
  }
}

// DestroyTask while InspectTask recovers a run from its start record (review
// S1): the id is reserved meanwhile, so DestroyTask answers UNAVAILABLE (the
// node asks again) instead of removing what the record names and answering
// NOT_FOUND while the recovery adopts the run, or missing a run adopted
// just after it looked.
TEST_F(ExecDriverTest, DestroyDuringARecoveryFromTheStartRecordWaitsForIt) {
  ExecDriverOptions killed = options_;
  killed.interrupt_start_for_test =
      ExecDriverOptions::InterruptStart::kAfterInit;
  driver_ = std::make_unique<ExecDriver>(killed);
  const std::string id = "recovering";
  ASSERT_TRUE(absl::IsAborted(
      driver_->StartTask(Task(id, {"sleep", "1000"})).status()));
  started_.push_back(id);
  absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state_.path(), id);
  ASSERT_TRUE(record.ok()) << record.status();
  ExecTaskState recorded;
  ASSERT_TRUE(recorded.ParseFromString(record->driver_state()));
  const pid_t init = recorded.init_pid();
  ASSERT_GT(init, 0);

  absl::Status during = absl::UnknownError("the hook was not called");
  ExecDriverOptions relaunched = options_;
  relaunched.recovery_reserved_for_test = [&](const std::string& task_id) {
    during = driver_->DestroyTask(task_id, /*force=*/true);
  };
  driver_ = std::make_unique<ExecDriver>(relaunched);
  absl::StatusOr<dv1::TaskStatus> running = driver_->InspectTask(id);
  EXPECT_TRUE(absl::IsUnavailable(during)) << during;
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state(), dv1::TASK_STATE_RUNNING);
  EXPECT_EQ(kill(init, 0), 0);

  // Asked again, DestroyTask destroys the recovered run.
  ASSERT_TRUE(driver_->DestroyTask(id, /*force=*/true).ok());
  EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id)));
  EXPECT_FALSE(PathExists(TaskDir(id)));
  EXPECT_EQ(waitpid(init, nullptr, 0), init);
}

// A start record this driver cannot read (another version's, after an
// upgrade; review N1) names a run that may be alive: InspectTask says it
// cannot tell (FAILED_PRECONDITION naming the record), not NOT_FOUND, which
// the node takes for "never started" and starts the task again.
TEST_F(ExecDriverTest, AStartRecordOfAnotherVersionIsNotTakenForNoRun) {
  ExecDriverOptions killed = options_;
  killed.interrupt_start_for_test =
      ExecDriverOptions::InterruptStart::kAfterInit;
  driver_ = std::make_unique<ExecDriver>(killed);
  const std::string id = "other-version";
  ASSERT_TRUE(absl::IsAborted(
      driver_->StartTask(Task(id, {"sleep", "1000"})).status()));
  started_.push_back(id);
  absl::StatusOr<dv1::TaskHandle> record = ReadStartRecord(state_.path(), id);
  ASSERT_TRUE(record.ok()) << record.status();
  ExecTaskState recorded;
  ASSERT_TRUE(recorded.ParseFromString(record->driver_state()));
  const pid_t init = recorded.init_pid();
  ASSERT_GT(init, 0);
  record->set_version(record->version() + 1);
  ASSERT_TRUE(WriteStartRecord(state_.path(), *record).ok());

  driver_ = std::make_unique<ExecDriver>(options_);
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask(id);
  EXPECT_EQ(status.status().code(), absl::StatusCode::kFailedPrecondition)
      << status.status();
  EXPECT_THAT(status.status().message(),
              HasSubstr(StartRecordPath(state_.path(), id)));
  EXPECT_THAT(status.status().message(), HasSubstr("cannot tell"));
  EXPECT_EQ(kill(init, 0), 0);
  // DestroyTask still removes what its id names.
  EXPECT_TRUE(absl::IsNotFound(driver_->DestroyTask(id, /*force=*/true)));
  EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id)));
  EXPECT_EQ(waitpid(init, nullptr, 0), init);
}

TEST_F(ExecDriverTest, SignalKillReachesTheProgramAndIsRecorded) {
  ASSERT_TRUE(Start(Task("kill", {"sleep", "1000"})).ok());
  ASSERT_TRUE(driver_->SignalTask("kill", SIGKILL).ok());
  const dv1::ExitResult result = Wait("kill");
  EXPECT_EQ(result.signal(), SIGKILL);
  EXPECT_FALSE(result.oom_killed());
  // The init recorded it: the program died, not the init.
  EXPECT_THAT(ReadFileOrEmpty(TaskDir("kill") + "/.berth/exit"),
              HasSubstr("berth-exit v1 0 9 "));
}

TEST_F(ExecDriverTest, TasksSurviveADriverRestartAndAreRecovered) {
  absl::StatusOr<dv1::StartTaskResponse> running =
      Start(Task("survivor", {"sleep", "1000"}));
  ASSERT_TRUE(running.ok());
  absl::StatusOr<dv1::StartTaskResponse> ending =
      Start(Shell("ender", "sleep 0.5; exit 7"));
  ASSERT_TRUE(ending.ok());
  driver_.reset();  // the driver goes; its tasks stay
  // The second task ends while no driver watches it.
  ASSERT_TRUE(
      WaitFor([&] { return PathExists(TaskDir("ender") + "/.berth/exit"); },
              absl::Seconds(10)));
  driver_ = std::make_unique<ExecDriver>(options_);

  absl::StatusOr<dv1::TaskStatus> survivor =
      driver_->RecoverTask(running->handle());
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  EXPECT_EQ(survivor->state(), dv1::TASK_STATE_RUNNING);
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver_->ExecTask(
      "survivor", {"cat", "/proc/1/cmdline"}, absl::Seconds(10), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_THAT(exec->stdout(), HasSubstr("berth-task-init"));
  // Recovering twice is harmless.
  EXPECT_TRUE(driver_->RecoverTask(running->handle()).ok());

  absl::StatusOr<dv1::TaskStatus> ender =
      driver_->RecoverTask(ending->handle());
  ASSERT_TRUE(ender.ok()) << ender.status();
  EXPECT_EQ(ender->state(), dv1::TASK_STATE_EXITED);
  EXPECT_EQ(ender->exit_result().exit_code(), 7);
  EXPECT_EQ(Wait("ender").exit_code(), 7);

  ASSERT_TRUE(driver_->StopTask("survivor", absl::Seconds(5), SIGTERM).ok());
  EXPECT_EQ(Wait("survivor").signal(), SIGTERM);
}

TEST_F(ExecDriverTest, RecoverRefusesAReusedPidWithoutAnExitRecord) {
  absl::StatusOr<dv1::StartTaskResponse> started =
      Start(Task("reused", {"sleep", "1000"}));
  ASSERT_TRUE(started.ok());
  dv1::TaskHandle handle = started->handle();
  ExecTaskState state;
  ASSERT_TRUE(state.ParseFromString(handle.driver_state()));
  // Another process holds the pid now: this test's own, with another start.
  state.set_init_pid(getpid());
  handle.set_driver_state(state.SerializeAsString());
  handle.mutable_config()->set_id("reused-elsewhere");
  absl::StatusOr<dv1::TaskStatus> recovered = driver_->RecoverTask(handle);
  EXPECT_TRUE(absl::IsFailedPrecondition(recovered.status()))
      << recovered.status();
  EXPECT_THAT(recovered.status().message(), HasSubstr("another process"));
  EXPECT_THAT(recovered.status().message(), HasSubstr("reused-elsewhere"));

  handle.set_driver_state("garbage");
  EXPECT_TRUE(absl::IsInvalidArgument(driver_->RecoverTask(handle).status()));
}

TEST_F(ExecDriverTest, ExecRunsInTheTasksNamespacesCgroupAndIdentity) {
  dv1::TaskConfig task = Task("exec", {"sleep", "1000"});
  task.set_user("nobody");
  (*task.mutable_env())["GREETING"] = "hello";
  ASSERT_TRUE(Start(task).ok());
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask("exec");
  ASSERT_TRUE(status.ok());
  const std::string init_pid = status->driver_attributes().at("pid");
  char task_pid_ns[64] = {};
  ASSERT_GT(readlink(absl::StrCat("/proc/", init_pid, "/ns/pid").c_str(),
                     task_pid_ns, sizeof(task_pid_ns) - 1),
            0);
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver_->ExecTask(
      "exec",
      {"sh", "-c",
       "readlink /proc/self/ns/pid; id -u; echo $GREETING; pwd; "
       "cat /proc/self/cgroup; echo oops >&2; exit 5"},
      absl::Seconds(10), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_THAT(exec->stdout(), HasSubstr(task_pid_ns));
  EXPECT_THAT(exec->stdout(), HasSubstr("\n65534\nhello\n"));
  EXPECT_THAT(exec->stdout(), HasSubstr("\n/berth/task\n"));
  EXPECT_THAT(exec->stdout(), HasSubstr(":/\n"));
  EXPECT_THAT(exec->stdout(), ::testing::Not(HasSubstr(parent_)));
  EXPECT_EQ(exec->stderr(), "oops\n");
  EXPECT_EQ(exec->result().exit_code(), 5);
}

// `berth run -it -- /bin/sh`: a terminal of the task's own devpts, the
// caller's stdin and sizes reaching it through AttachTask.
TEST_F(ExecDriverTest, TtyTaskIsDrivenThroughAttach) {
  dv1::TaskConfig task =
      Shell("tty",
            "tty; echo ready; read line; echo \"got=$line\"; stty size; "
            "read again; stty size; exit 3");
  task.set_tty(true);
  task.set_stdin_open(true);
  ASSERT_TRUE(Start(task).ok());
  FakeAttachStream stream(MakeAttachSetup("tty", /*want_stdin=*/true, 30, 100));
  absl::Status attached = absl::UnknownError("not returned");
  std::thread attach([&] { attached = driver_->AttachTask(&stream); });
  // What it wrote before the attach came first (replayed).
  ASSERT_TRUE(stream.WaitForStdout("ready")) << stream.Stdout();
  EXPECT_THAT(stream.Stdout(), ::testing::ContainsRegex("/dev/pts/[0-9]+\r\n"));
  stream.Stdin("hello\n");
  ASSERT_TRUE(stream.WaitForStdout("30 100")) << stream.Stdout();
  EXPECT_THAT(stream.Stdout(), HasSubstr("got=hello\r\n"));
  stream.Resize(40, 120);
  // A resize and the stdin after it arrive in order.
  stream.Stdin("\n");
  ASSERT_TRUE(stream.WaitForStdout("40 120")) << stream.Stdout();
  attach.join();
  EXPECT_TRUE(attached.ok()) << attached;
  EXPECT_EQ(Wait("tty").exit_code(), 3);
  EXPECT_EQ(stream.Stderr(), "");
  // One stream, also in the stdout log.
  const std::string log = Stdout("tty");
  EXPECT_THAT(log, HasSubstr("ready"));
  EXPECT_THAT(log, HasSubstr("got=hello"));
  EXPECT_EQ(ReadFileOrEmpty(TaskDir("tty") + "/logs/stderr.log"), "");
}

TEST_F(ExecDriverTest, StdinOpenTaskReadsAttachedStdinUntilItsClose) {
  dv1::TaskConfig task = Task("cat", {"cat"});
  task.set_stdin_open(true);
  ASSERT_TRUE(Start(task).ok());
  FakeAttachStream stream(MakeAttachSetup("cat", /*want_stdin=*/true));
  absl::Status attached = absl::UnknownError("not returned");
  std::thread attach([&] { attached = driver_->AttachTask(&stream); });
  stream.Stdin("one\n");
  ASSERT_TRUE(stream.WaitForStdout("one\n")) << stream.Stdout();
  stream.Stdin("two\n");
  stream.CloseStdin();
  attach.join();
  EXPECT_TRUE(attached.ok()) << attached;
  EXPECT_EQ(stream.Stdout(), "one\ntwo\n");
  EXPECT_EQ(Wait("cat").exit_code(), 0);
  EXPECT_EQ(Stdout("cat"), "one\ntwo\n");
}

// As docker attach: output of a task that takes no stdin, from what it wrote
// before the first attach; a second attach sees only new output; stdin is
// refused; a caller leaving leaves the task running.
TEST_F(ExecDriverTest, AttachToANonInteractiveTaskStreamsItsOutput) {
  dv1::TaskConfig task =
      Shell("plain",
            "echo before; echo warn >&2; "
            "while [ ! -e /berth/task/go ]; do sleep 0.05; done; echo after");
  ASSERT_TRUE(Start(task).ok());
  ASSERT_TRUE(WaitFor([&] { return Stdout("plain") == "before\n"; }));

  FakeAttachStream with_stdin(MakeAttachSetup("plain", /*want_stdin=*/true));
  const absl::Status refused = driver_->AttachTask(&with_stdin);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("task plain"));
  FakeAttachStream unknown(MakeAttachSetup("no-such-task", false));
  EXPECT_EQ(driver_->AttachTask(&unknown).code(), absl::StatusCode::kNotFound);

  FakeAttachStream first(MakeAttachSetup("plain", false));
  absl::Status first_status = absl::UnknownError("not returned");
  std::thread first_attach([&] { first_status = driver_->AttachTask(&first); });
  ASSERT_TRUE(first.WaitForStdout("before\n"));
  ASSERT_TRUE(WaitFor([&] { return first.Stderr() == "warn\n"; }));
  // A caller that leaves: the task goes on.
  FakeAttachStream leaving(MakeAttachSetup("plain", false));
  absl::Status left = absl::UnknownError("not returned");
  std::thread leave([&] { left = driver_->AttachTask(&leaving); });
  leaving.Cancel();
  leave.join();
  EXPECT_EQ(left.code(), absl::StatusCode::kCancelled) << left;
  EXPECT_EQ(leaving.Stdout(), "");  // later attaches get no replay
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask("plain");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state(), dv1::TASK_STATE_RUNNING);

  std::ofstream(TaskDir("plain") + "/go") << "";
  first_attach.join();
  EXPECT_TRUE(first_status.ok()) << first_status;
  EXPECT_EQ(first.Stdout(), "before\nafter\n");
  EXPECT_EQ(Wait("plain").exit_code(), 0);
  // An exited task cannot be attached.
  FakeAttachStream late(MakeAttachSetup("plain", false));
  EXPECT_EQ(driver_->AttachTask(&late).code(),
            absl::StatusCode::kFailedPrecondition);
  // The socket lives in the private directory until the task is destroyed.
  EXPECT_EQ(testing::FileMode(TaskDir("plain") + "/.berth/attach.sock"), 0600);
  ASSERT_TRUE(driver_->DestroyTask("plain", false).ok());
  EXPECT_FALSE(PathExists(TaskDir("plain")));
}

TEST_F(ExecDriverTest, RlimitsAndHostnameReachTheProgramAndExec) {
  dv1::TaskConfig task =
      Shell("limits",
            "ulimit -n; ulimit -Hn; ulimit -c; hostname; "
            "grep 'Max open files' /proc/self/limits; sleep 1000");
  task.set_hostname("db-7.internal");
  dv1::Rlimit* nofile = task.add_rlimits();
  nofile->set_type("RLIMIT_NOFILE");
  nofile->set_soft(1234);
  nofile->set_hard(2345);
  dv1::Rlimit* core = task.add_rlimits();
  core->set_type("RLIMIT_CORE");
  core->set_soft(0);
  core->set_hard(0);
  ASSERT_TRUE(Start(task).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return absl::StrContains(Stdout("limits"), "Max open files"); }));
  const std::string out = Stdout("limits");
  EXPECT_THAT(out, HasSubstr("1234\n2345\n0\ndb-7.internal\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("Max open files +1234 +2345"));
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver_->ExecTask(
      "limits", {"sh", "-c", "ulimit -n; ulimit -Hn; hostname"},
      absl::Seconds(10), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->stdout(), "1234\n2345\ndb-7.internal\n");
}

TEST_F(ExecDriverTest, ExecOutputLargerThanAnyBufferArrivesWhole) {
  ASSERT_TRUE(Start(Task("big", {"sleep", "1000"})).ok());
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec =
      driver_->ExecTask("big",
                        {"sh", "-c",
                         "head -c 20000000 /dev/zero; head -c 3000000 "
                         "/dev/zero >&2"},
                        absl::Seconds(60), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->stdout().size(), 20000000u);
  EXPECT_EQ(exec->stderr().size(), 3000000u);
}

TEST_F(ExecDriverTest, ExecTimeoutAndCancelKillTheCommand) {
  ASSERT_TRUE(Start(Task("cancel", {"sleep", "1000"})).ok());
  absl::StatusOr<TaskCgroup> cgroup =
      TaskCgroup::Open(mounts_, parent_, "cancel");
  ASSERT_TRUE(
      WaitFor([&] { return cgroup->Pids()->size() == 2; }, absl::Seconds(5)));
  plugin::CancelToken never;
  absl::StatusOr<dv1::ExecTaskResponse> timed_out = driver_->ExecTask(
      "cancel", {"sleep", "999"}, absl::Milliseconds(300), never);
  EXPECT_TRUE(absl::IsDeadlineExceeded(timed_out.status()))
      << timed_out.status();
  // Only the init and the task's program remain.
  EXPECT_TRUE(
      WaitFor([&] { return cgroup->Pids()->size() == 2; }, absl::Seconds(5)));

  plugin::CancelToken cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cancel.Cancel();
  });
  absl::StatusOr<dv1::ExecTaskResponse> cancelled = driver_->ExecTask(
      "cancel", {"sleep", "999"}, absl::InfiniteDuration(), cancel);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(cancelled.status())) << cancelled.status();
  EXPECT_TRUE(
      WaitFor([&] { return cgroup->Pids()->size() == 2; }, absl::Seconds(5)));
}

TEST_F(ExecDriverTest, ExecOfAMissingCommandNamesIt) {
  ASSERT_TRUE(Start(Task("missing", {"sleep", "1000"})).ok());
  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec = driver_->ExecTask(
      "missing", {"no-such-command"}, absl::Seconds(10), cancel);
  EXPECT_TRUE(absl::IsInvalidArgument(exec.status())) << exec.status();
  EXPECT_THAT(exec.status().message(), HasSubstr("no-such-command"));
  EXPECT_THAT(exec.status().message(), HasSubstr("task missing"));
}

// Point 7 of the issue: each bad start is refused naming the field, and
// leaves no process, cgroup, task directory or file descriptor behind.
// isolation.user_namespace: the task's root is host uid 3200000 (gid
// 3300000), which is what its files in a writable bind are owned by; exec'd
// commands join the same namespace; logs and the exit record still arrive.
TEST_F(ExecDriverTest, UserNamespaceMapsTheTasksRootToItsHostRange) {
  if (!PathExists("/proc/self/ns/user")) {
    GTEST_SKIP() << "the kernel has no user namespaces";
  }
  char host_dir[] = "/tmp/berth-exec-userns-XXXXXX";
  ASSERT_NE(mkdtemp(host_dir), nullptr);
  ASSERT_EQ(chmod(host_dir, 0777), 0);
  // The mapped ids cannot search the directory of task directories (as
  // they cannot the node's <state>/node): the driver opens what the init
  // needs. (The driver's own state directory, where the root is assembled,
  // is 0711.)
  ASSERT_EQ(mkdir(state_.Join("tasks").c_str(), 0700), 0);
  dv1::TaskConfig task =
      Shell("userns",
            "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; "
            "readlink /proc/self/ns/user; "
            "echo hi > /data/made-inside && echo wrote-data; "
            "test -r /usr/bin/env && head -c 4 /usr/bin/env | tail -c 3; echo; "
            "touch /berth/task/mine && echo wrote-task-dir; "
            "test -c /dev/null && echo dev-null; echo out-err >&2; "
            "exec sleep 1000");
  dv1::Isolation& isolation = *task.mutable_isolation();
  MapIds(&isolation, 3200000, 3300000);
  dv1::Mount* data = isolation.add_mounts();
  data->set_type(dv1::MOUNT_TYPE_BIND);
  data->set_source(host_dir);
  data->set_destination("/data");
  absl::StatusOr<dv1::StartTaskResponse> started = Start(task);
  ASSERT_TRUE(started.ok())
      << started.status() << "\n"
      << ReadFileOrEmpty(TaskDir("userns") + "/.berth/init.log");
  ExecTaskState state;
  ASSERT_TRUE(state.ParseFromString(started->handle().driver_state()));
  EXPECT_TRUE(state.user_namespace());
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(Stdout("userns"), "dev-null"); },
              absl::Seconds(10)))
      << Stdout("userns")
      << ReadFileOrEmpty(TaskDir("userns") + "/logs/stderr.log");
  const std::string out = Stdout("userns");
  EXPECT_THAT(out, ::testing::StartsWith("0\n0\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex(
                       "\n +0 +3200000 +65536\n +0 +3300000 +65536\n"));
  EXPECT_THAT(out, HasSubstr("wrote-data\nELF\nwrote-task-dir\ndev-null\n"));
  EXPECT_EQ(ReadFileOrEmpty(TaskDir("userns") + "/logs/stderr.log"),
            "out-err\n");
  // Owned on the host by the mapped ids.
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat(host_dir, "/made-inside").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 3200000u);
  EXPECT_EQ(st.st_gid, 3300000u);
  ASSERT_EQ(stat((TaskDir("userns") + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 3200000u);

  // Its user namespace, as the task saw it: the third line after the maps.
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  ASSERT_GE(lines.size(), 5u);
  const std::string task_userns = lines[4];
  EXPECT_THAT(task_userns, ::testing::StartsWith("user:["));
  char own[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/user", own, sizeof(own) - 1), 0);
  EXPECT_NE(task_userns, own);

  plugin::CancelToken cancel;
  absl::StatusOr<dv1::ExecTaskResponse> exec =
      driver_->ExecTask("userns",
                        {"sh", "-c",
                         "id -u; readlink /proc/self/ns/user; grep CapEff "
                         "/proc/self/status; touch /data/by-exec"},
                        absl::Seconds(10), cancel);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->result().exit_code(), 0) << exec->stderr();
  EXPECT_THAT(exec->stdout(),
              HasSubstr(absl::StrCat("0\n", task_userns,
                                     "\nCapEff:\t00000000a80425fb\n")));
  ASSERT_EQ(stat(absl::StrCat(host_dir, "/by-exec").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 3200000u);

  // The exit record is written by the init, root of the namespace only.
  ASSERT_TRUE(driver_->StopTask("userns", absl::Seconds(5), SIGTERM).ok());
  EXPECT_EQ(Wait("userns").signal(), SIGTERM);
  EXPECT_TRUE(PathExists(TaskDir("userns") + "/.berth/exit"));
  for (const char* name : {"made-inside", "by-exec"}) {
    unlink(absl::StrCat(host_dir, "/", name).c_str());
  }
  rmdir(host_dir);
}

TEST_F(ExecDriverTest, ImageRootRunsWithAndWithoutAUserNamespace) {
  const std::string image = state_.Join("image");
  const std::string made = MakeImage(image);
  if (!made.empty()) GTEST_SKIP() << "cannot build a test image: " << made;
  ASSERT_EQ(mkdir(state_.Join("tasks").c_str(), 0700), 0);
  const std::string script =
      "id -u; id -g; ls -ln /; cat /proc/self/uid_map; "
      "touch /made-in-image && echo made; ls -ln /made-in-image; "
      "test -d /berth/task && echo has-task-dir";

  // Without a user namespace the task is the host's root.
  dv1::TaskConfig plain = Task("image", {"/bin/sh", "-c", script});
  plain.mutable_isolation()->set_rootfs(image);
  absl::StatusOr<dv1::StartTaskResponse> started = Start(plain);
  ASSERT_TRUE(started.ok())
      << started.status() << "\n"
      << ReadFileOrEmpty(TaskDir("image") + "/.berth/init.log");
  EXPECT_EQ(Wait("image").exit_code(), 0)
      << ReadFileOrEmpty(TaskDir("image") + "/logs/stderr.log");
  std::string out = Stdout("image");
  EXPECT_THAT(out, ::testing::StartsWith("0\n0\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("\n *0 +0 +4294967295\n"));
  EXPECT_THAT(out, HasSubstr("\nmade\n"));
  EXPECT_THAT(out, HasSubstr("has-task-dir\n"));
  ASSERT_EQ(unlink((image + "/made-in-image").c_str()), 0);

  // In a user namespace the image is idmapped: its root-owned files are the
  // task's root's, which can make /berth/task and write in /, the files
  // stored owned by the image's ids (0), as the task sees them.
  for (const char* mount_point : {"berth", "proc", "sys", "dev", "tmp"}) {
    std::filesystem::remove_all(absl::StrCat(image, "/", mount_point));
  }
  dv1::TaskConfig mapped = Task("image-userns", {"/bin/sh", "-c", script});
  dv1::Isolation& isolation = *mapped.mutable_isolation();
  isolation.set_rootfs(image);
  MapIds(&isolation, 3400000, 3500000);
  started = Start(mapped);
  ASSERT_TRUE(started.ok())
      << started.status() << "\n"
      << ReadFileOrEmpty(TaskDir("image-userns") + "/.berth/init.log");
  EXPECT_EQ(Wait("image-userns").exit_code(), 0)
      << ReadFileOrEmpty(TaskDir("image-userns") + "/logs/stderr.log");
  out = Stdout("image-userns");
  EXPECT_THAT(out, ::testing::StartsWith("0\n0\n"));
  // ls -ln /: the image's directories owned by 0:0 inside.
  EXPECT_THAT(out,
              ::testing::ContainsRegex("\nd[rwx-]+ +[0-9]+ +0 +0 .* usr\n"));
  EXPECT_THAT(out,
              ::testing::ContainsRegex("\nd[rwx-]+ +[0-9]+ +0 +0 .* berth\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("\n *0 +3400000 +65536\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex(
                       "\nmade\n-[rw-]+ +1 +0 +0 .*/made-in-image\n"));
  EXPECT_THAT(out, HasSubstr("has-task-dir\n"));
  struct stat st;
  for (const char* path : {"/made-in-image", "/berth/task", "/proc"}) {
    ASSERT_EQ(lstat((image + path).c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, 0u) << path;
    EXPECT_EQ(st.st_gid, 0u) << path;
  }
}

// isolation.rootfs_idmapped: the root shows the task's ids already (an
// image snapshot over idmapped layers, which berth-images makes: an overlay
// cannot be idmapped itself), so it is bound as it is. Shown on a root the
// host's root owns: not idmapped, its files are nobody's inside.
TEST_F(ExecDriverTest, AnIdmappedRootIsBoundAsItIs) {
  const std::string image = state_.Join("image");
  const std::string made = MakeImage(image);
  if (!made.empty()) GTEST_SKIP() << "cannot build a test image: " << made;
  ASSERT_EQ(mkdir(state_.Join("tasks").c_str(), 0700), 0);
  // The init's mount points, which the task's root could not make in a
  // root it does not own.
  for (const char* dir : {"berth", "berth/task", "proc", "sys", "dev", "tmp"}) {
    ASSERT_EQ(mkdir(absl::StrCat(image, "/", dir).c_str(), 0755), 0) << dir;
  }
  dv1::TaskConfig task =
      Task("image-idmapped", {"/bin/sh", "-c", "id -u; ls -lnd /usr"});
  dv1::Isolation& isolation = *task.mutable_isolation();
  isolation.set_rootfs(image);
  isolation.set_rootfs_idmapped(true);
  MapIds(&isolation, 3600000, 3700000);
  absl::StatusOr<dv1::StartTaskResponse> started = Start(task);
  ASSERT_TRUE(started.ok())
      << started.status() << "\n"
      << ReadFileOrEmpty(TaskDir("image-idmapped") + "/.berth/init.log");
  EXPECT_EQ(Wait("image-idmapped").exit_code(), 0)
      << ReadFileOrEmpty(TaskDir("image-idmapped") + "/logs/stderr.log");
  // Idmapped (as without rootfs_idmapped), /usr would be 0 0.
  EXPECT_THAT(
      Stdout("image-idmapped"),
      ::testing::ContainsRegex("^0\nd[rwx-]+ +[0-9]+ +65534 +65534 .* /usr\n"));

  // Without a user namespace it means nothing: refused, naming the field.
  dv1::TaskConfig unmapped = Task("image-unmapped", {"/bin/true"});
  unmapped.mutable_isolation()->set_rootfs(image);
  unmapped.mutable_isolation()->set_rootfs_idmapped(true);
  started = Start(unmapped);
  EXPECT_TRUE(absl::IsInvalidArgument(started.status())) << started.status();
  EXPECT_THAT(started.status().message(),
              HasSubstr("isolation.rootfs_idmapped"));
}

TEST_F(ExecDriverTest, HostDirsShowAsRootsInAUserNamespaceUnlessItMayRemount) {
  ASSERT_EQ(mkdir(state_.Join("tasks").c_str(), 0700), 0);
  auto mapped = [&](const std::string& id) {
    dv1::TaskConfig task =
        Shell(id, "ls -lnd /usr /usr/bin/env /etc; touch /usr/x || echo ro");
    dv1::IdMapping* uid =
        task.mutable_isolation()->mutable_user_namespace()->add_uid_mappings();
    uid->set_host_id(3600000);
    uid->set_size(65536);
    dv1::IdMapping* gid =
        task.mutable_isolation()->mutable_user_namespace()->add_gid_mappings();
    gid->set_host_id(3600000);
    gid->set_size(65536);
    return task;
  };
  ASSERT_TRUE(Start(mapped("hostdirs")).ok());
  EXPECT_EQ(Wait("hostdirs").exit_code(), 0);
  std::string out = Stdout("hostdirs");
  // /usr idmapped (read-only still); /etc, the host's secrets, is not.
  EXPECT_THAT(out,
              ::testing::ContainsRegex("\nd[rwx-]+ +[0-9]+ +0 +0 .* /usr\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex(" 0 +0 .* /usr/bin/env\n"));
  EXPECT_THAT(out, ::testing::ContainsRegex("65534 +65534 .* /etc\n"));
  EXPECT_THAT(out, ::testing::EndsWith("ro\n"));
  // A task that could remount /usr writable (CAP_SYS_ADMIN) would write the
  // host's files as root through an idmapped bind: it sees them unmapped.
  dv1::TaskConfig admin = mapped("admin");
  admin.mutable_isolation()->add_cap_add("SYS_ADMIN");
  ASSERT_TRUE(Start(admin).ok());
  EXPECT_EQ(Wait("admin").exit_code(), 0);
  out = Stdout("admin");
  EXPECT_THAT(out, ::testing::ContainsRegex("65534 +65534 .* /usr\n"));
}

TEST_F(ExecDriverTest, BadInputIsRefusedAndLeavesNothingBehind) {
  const std::string not_executable = state_.Join("data.txt");
  std::ofstream(not_executable) << "not a program";
  const std::string not_a_netns = state_.Join("not-a-netns");
  std::ofstream(not_a_netns) << "";
  struct Case {
    std::string name;
    std::function<void(dv1::TaskConfig*)> mutate;
    absl::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"missing binary",
       [](dv1::TaskConfig* t) {
         (*t->mutable_driver_config()->mutable_fields())["command"]
             .set_string_value("no-such-binary");
       },
       absl::StatusCode::kInvalidArgument, "driver_config.command"},
      {"not executable",
       [&](dv1::TaskConfig* t) {
         (*t->mutable_driver_config()->mutable_fields())["command"]
             .set_string_value(not_executable);
       },
       absl::StatusCode::kInvalidArgument, "driver_config.command"},
      {"unknown user", [](dv1::TaskConfig* t) { t->set_user("no-such-user"); },
       absl::StatusCode::kInvalidArgument, "user"},
      {"unknown rlimit",
       [](dv1::TaskConfig* t) {
         dv1::Rlimit* rlimit = t->add_rlimits();
         rlimit->set_type("RLIMIT_FILES");
         rlimit->set_soft(1);
         rlimit->set_hard(1);
       },
       absl::StatusCode::kInvalidArgument, "rlimits[0].type"},
      // Above fs.nr_open: refused by ResolveTaskSpec, before anything is
      // made (setrlimit in the task's init would fail).
      {"rlimit beyond the kernel's",
       [](dv1::TaskConfig* t) {
         dv1::Rlimit* rlimit = t->add_rlimits();
         rlimit->set_type("RLIMIT_NOFILE");
         rlimit->set_soft(UINT64_MAX);
         rlimit->set_hard(UINT64_MAX);
       },
       absl::StatusCode::kInvalidArgument, "rlimits[0].hard"},
      {"bad hostname", [](dv1::TaskConfig* t) { t->set_hostname("a b"); },
       absl::StatusCode::kInvalidArgument, "hostname"},
      {"unknown group",
       [](dv1::TaskConfig* t) { t->set_group("no-such-group"); },
       absl::StatusCode::kInvalidArgument, "group"},
      {"work dir outside",
       [](dv1::TaskConfig* t) {
         (*t->mutable_driver_config()->mutable_fields())["work_dir"]
             .set_string_value("../../etc");
       },
       absl::StatusCode::kInvalidArgument, "driver_config.work_dir"},
      {"memory too small",
       [](dv1::TaskConfig* t) {
         t->mutable_resources()->set_memory_bytes(1 << 20);
       },
       absl::StatusCode::kInvalidArgument, "resources.memory_bytes"},
      {"pids too few",
       [](dv1::TaskConfig* t) { t->mutable_resources()->set_pids_limit(1); },
       absl::StatusCode::kInvalidArgument, "resources.pids_limit"},
      {"cpu quota the kernel refuses",
       [](dv1::TaskConfig* t) {
         t->mutable_resources()->set_cpu_millicores(1);
       },
       absl::StatusCode::kInvalidArgument, "resources.cpu_millicores"},
      {"missing netns",
       [](dv1::TaskConfig* t) {
         t->mutable_network()->set_mode(dv1::NETWORK_ISOLATION_MODE_GROUP);
         t->mutable_network()->set_namespace_path("/var/run/netns/no-such");
       },
       absl::StatusCode::kInvalidArgument, "network.namespace_path"},
      {"user namespace mapping the host's root",
       [](dv1::TaskConfig* t) {
         dv1::UserNamespace* ns =
             t->mutable_isolation()->mutable_user_namespace();
         dv1::IdMapping* uid = ns->add_uid_mappings();
         uid->set_host_id(0);
         uid->set_size(65536);
         dv1::IdMapping* gid = ns->add_gid_mappings();
         gid->set_host_id(3300000);
         gid->set_size(65536);
       },
       absl::StatusCode::kInvalidArgument,
       "isolation.user_namespace.uid_mappings[0].host_id"},
      {"user outside the user namespace",
       [](dv1::TaskConfig* t) {
         t->set_user("nobody");
         dv1::UserNamespace* ns =
             t->mutable_isolation()->mutable_user_namespace();
         for (dv1::IdMapping* m :
              {ns->add_uid_mappings(), ns->add_gid_mappings()}) {
           m->set_host_id(3200000);
           m->set_size(1000);
         }
       },
       absl::StatusCode::kInvalidArgument, "user: uid 65534"},
      // These two fail late, inside the started init: the rollback undoes
      // a cgroup with a process in it.
      {"netns that is not a namespace",
       [&](dv1::TaskConfig* t) {
         t->mutable_network()->set_mode(dv1::NETWORK_ISOLATION_MODE_GROUP);
         t->mutable_network()->set_namespace_path(not_a_netns);
       },
       absl::StatusCode::kInvalidArgument, "network.namespace_path"},
      {"program that cannot run as the user",
       [&](dv1::TaskConfig* t) {
         chmod(not_executable.c_str(), 0700);
         (*t->mutable_driver_config()->mutable_fields())["command"]
             .set_string_value("/bin/sh");
         (*t->mutable_driver_config()->mutable_fields())["args"]
             .mutable_list_value()
             ->add_values()
             ->set_string_value("-c");
         t->set_user("nobody");
         (*t->mutable_driver_config()->mutable_fields())["work_dir"]
             .set_string_value(".");
         // nobody cannot enter a root-only working directory.
         t->set_task_dir(state_.Join("root-only"));
         mkdir(state_.Join("root-only").c_str(), 0700);
       },
       absl::StatusCode::kInvalidArgument, "driver_config.work_dir"},
  };
  const std::set<pid_t> children_before = Children();
  const int fds_before = OpenFdCount();
  int n = 0;
  for (const Case& c : cases) {
    const std::string id = absl::StrCat("bad-", ++n);
    dv1::TaskConfig task = Task(id, {"sleep", "1000"});
    c.mutate(&task);
    absl::StatusOr<dv1::StartTaskResponse> response = driver_->StartTask(task);
    ASSERT_FALSE(response.ok()) << c.name;
    EXPECT_EQ(response.status().code(), c.code)
        << c.name << ": " << response.status();
    EXPECT_THAT(response.status().message(), HasSubstr(c.field)) << c.name;
    EXPECT_THAT(response.status().message(), HasSubstr(id)) << c.name;
    // Nothing left: no cgroup, no directory, no process, no descriptor.
    for (const std::string& dir : ParentDirs()) {
      EXPECT_FALSE(PathExists(absl::StrCat(dir, "/", id)))
          << c.name << ": cgroup " << dir << "/" << id;
    }
    const std::string task_dir =
        task.task_dir().empty() ? TaskDir(id) : task.task_dir();
    if (task.task_dir().empty()) {
      EXPECT_FALSE(PathExists(task_dir)) << c.name << ": " << task_dir;
    } else {
      // A directory the node made stays, without what the driver put in it.
      EXPECT_FALSE(PathExists(task_dir + "/logs")) << c.name;
      EXPECT_FALSE(PathExists(task_dir + "/.berth")) << c.name;
    }
    EXPECT_FALSE(PathExists(StartRecordPath(state_.path(), id))) << c.name;
    EXPECT_EQ(Children(), children_before) << c.name << ": a process is left";
    EXPECT_EQ(OpenFdCount(), fds_before) << c.name << ": a descriptor leaked";
    EXPECT_TRUE(absl::IsNotFound(driver_->InspectTask(id).status())) << c.name;
  }
}

TEST_F(ExecDriverTest, FingerprintIsHealthyHereWithAttributes) {
  const dv1::FingerprintResponse fingerprint = driver_->Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_HEALTHY)
      << fingerprint.health_description();
  EXPECT_FALSE(fingerprint.attributes().at("kernel.version").empty());
  EXPECT_NE(fingerprint.attributes().at("cgroup.layout"), "none");
  EXPECT_EQ(fingerprint.attributes().at("namespaces"), "ipc,mnt,net,pid,uts");
  EXPECT_EQ(fingerprint.attributes().at("cgroup.controllers"),
            "cpu,memory,pids");
}

TEST_F(ExecDriverTest, FingerprintSaysWhyItCannotRunTasks) {
  ShortTempDir empty;
  ExecDriverOptions no_cgroups = options_;
  no_cgroups.cgroup_root = empty.path();
  ExecDriver without_cgroups(no_cgroups);
  dv1::FingerprintResponse fingerprint = without_cgroups.Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_UNDETECTED);
  EXPECT_THAT(fingerprint.health_description(), HasSubstr(empty.path()));
  absl::StatusOr<dv1::StartTaskResponse> refused =
      without_cgroups.StartTask(Task("nocg", {"true"}));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_FALSE(PathExists(TaskDir("nocg")));

  ExecDriverOptions no_init = options_;
  no_init.init_path = empty.Join("berth-task-init");
  fingerprint = ExecDriver(no_init).Probe();
  EXPECT_EQ(fingerprint.health(), dv1::HEALTH_STATE_UNHEALTHY);
  EXPECT_THAT(fingerprint.health_description(), HasSubstr("--init_path"));
}

TEST_F(ExecDriverTest, StatsInProcessMeasureTheCgroup) {
  ASSERT_TRUE(Start(Shell("stats", "while :; do :; done")).ok());
  absl::StatusOr<stats::v1::TaskResourceUsage> first =
      driver_->TaskStats("stats");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<stats::v1::TaskResourceUsage> second =
      driver_->TaskStats("stats");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->task_id(), "stats");
  EXPECT_GT(second->usage().cpu().percent(), 0) << second->DebugString();
  EXPECT_GT(second->usage().memory().usage(), 0u) << second->DebugString();
}

// berth-stats as a separate process, on a socket in a temporary directory.
class StatsService {
 public:
  explicit StatsService(const std::string& runtime_dir)
      : runtime_dir_(runtime_dir) {}
  ~StatsService() { Stop(); }
  bool Start() {
    const std::string binary = RunfilePath("services/stats/berth-stats");
    std::vector<std::string> args = {binary, "--runtime_dir=" + runtime_dir_};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(),
                    environ) != 0) {
      return false;
    }
    return DialUnix(socket(), absl::Seconds(20)).ok();
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string socket() const { return runtime_dir_ + "/stats.sock"; }
  grpc::StatusCode Lookup(const std::string& task_id) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket(), absl::Seconds(5));
    if (!channel.ok()) return grpc::StatusCode::UNAVAILABLE;
    auto stub = stats::v1::StatsService::NewStub(*channel);
    grpc::ClientContext context;
    stats::v1::GetTaskStatsRequest request;
    request.set_task_id(task_id);
    stats::v1::GetTaskStatsResponse response;
    return stub->GetTaskStats(&context, request, &response).error_code();
  }

 private:
  const std::string runtime_dir_;
  pid_t pid_ = -1;
};

TEST_F(ExecDriverTest, StatsComeFromBerthStatsWhichKnowsTheDriversTasks) {
  ShortTempDir runtime;
  StatsService service(runtime.path());
  ASSERT_TRUE(service.Start());
  plugin::v1::NodeContext node;
  node.set_stats_socket(service.socket());
  ASSERT_TRUE(driver_->SetConfig(google::protobuf::Struct(), node).ok());
  ASSERT_TRUE(Start(Task("measured", {"sleep", "1000"})).ok());
  EXPECT_EQ(service.Lookup("measured"), grpc::StatusCode::OK);
  absl::StatusOr<stats::v1::TaskResourceUsage> usage =
      driver_->TaskStats("measured");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->task_id(), "measured");

  // berth-stats restarts and forgets; the driver registers the task again.
  service.Stop();
  ASSERT_TRUE(service.Start());
  EXPECT_EQ(service.Lookup("measured"), grpc::StatusCode::NOT_FOUND);
  usage = driver_->TaskStats("measured");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(service.Lookup("measured"), grpc::StatusCode::OK);

  ASSERT_TRUE(driver_->DestroyTask("measured", /*force=*/true).ok());
  EXPECT_EQ(service.Lookup("measured"), grpc::StatusCode::NOT_FOUND);
}

// Point 3 of the issue: the only per-task process is the init, and it is
// small. PSS counts its shared pages once across every process mapping them.
TEST_F(ExecDriverTest, TheInitCostsLessThanOneMebibyte) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds link the sanitizer runtime into the init; "
                  "its memory is measured in normal builds";
#endif
  ASSERT_TRUE(Start(Task("small", {"sleep", "1000"})).ok());
  absl::StatusOr<dv1::TaskStatus> status = driver_->InspectTask("small");
  ASSERT_TRUE(status.ok());
  const std::string rollup = ReadFileOrEmpty(absl::StrCat(
      "/proc/", status->driver_attributes().at("pid"), "/smaps_rollup"));
  uint64_t rss_kb = 0, pss_kb = 0;
  for (absl::string_view line : absl::StrSplit(rollup, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() < 2) continue;
    if (f[0] == "Rss:") (void)absl::SimpleAtoi(f[1], &rss_kb);
    if (f[0] == "Pss:") (void)absl::SimpleAtoi(f[1], &pss_kb);
  }
  std::cout << "berth-task-init: Rss " << rss_kb << " kB, Pss " << pss_kb
            << " kB\n";
  ASSERT_GT(rss_kb, 0u) << rollup;
  EXPECT_LT(pss_kb, 1024u);
}

}  // namespace
}  // namespace berth::exec_driver
