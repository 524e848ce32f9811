#include "services/driver/common/task_spec.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::driver_common {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::berth::testing::ShortTempDir;
using ::testing::Contains;
using ::testing::HasSubstr;

dv1::TaskConfig Config(const std::string& command) {
  dv1::TaskConfig task;
  task.set_id("t1");
  (*task.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      command);
  return task;
}

void SetField(dv1::TaskConfig* task, const std::string& name,
              const std::string& value) {
  (*task->mutable_driver_config()->mutable_fields())[name].set_string_value(
      value);
}

// A NUL byte would add a record to the init's spec (records end in NUL) or
// cut an argument short at execve: refused, naming the field.
TEST(TaskSpecTest, ANulByteAnywhereIsRefusedNamingTheField) {
  using std::string_literals::operator""s;
  struct Case {
    std::string name;
    std::function<void(dv1::TaskConfig&)> change;
    std::string field;
  };
  const Case cases[] = {
      {"an argument",
       [](dv1::TaskConfig& t) {
         auto* args = (*t.mutable_driver_config()->mutable_fields())["args"]
                          .mutable_list_value();
         args->add_values()->set_string_value("-G");
         args->add_values()->set_string_value("x\0group=4242"s);
       },
       "driver_config.args[1]"},
      {"the command",
       [](dv1::TaskConfig& t) { SetField(&t, "command", "sh\0x"s); },
       "driver_config.command"},
      {"work_dir",
       [](dv1::TaskConfig& t) { SetField(&t, "work_dir", "a\0b"s); },
       "driver_config.work_dir"},
      {"working_dir", [](dv1::TaskConfig& t) { t.set_working_dir("/a\0b"s); },
       "working_dir"},
      {"a variable's value",
       [](dv1::TaskConfig& t) { (*t.mutable_env())["K"] = "v\0uid=0"s; },
       "env[\"K\"]"},
      {"the user", [](dv1::TaskConfig& t) { t.set_user("nobody\0root"s); },
       "user"},
  };
  for (const Case& c : cases) {
    dv1::TaskConfig task = Config("sh");
    c.change(task);
    absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/var/lib/berth/x");
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.field + " holds a NUL"))
        << c.name << ": " << spec.status();
  }
}

TEST(TaskSpecTest, ResolvesTheProgramDirectoriesAndEnvironment) {
  dv1::TaskConfig task = Config("sh");
  task.set_name("web");
  task.set_allocation_id("a1");
  (*task.mutable_driver_config()->mutable_fields())["args"]
      .mutable_list_value()
      ->add_values()
      ->set_string_value("-c");
  (*task.mutable_env())["FOO"] = "bar";
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/var/lib/berth/exec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path.substr(spec->path.size() - 3), "/sh");
  EXPECT_EQ(spec->args, (std::vector<std::string>{"sh", "-c"}));
  EXPECT_EQ(spec->task_dir, "/var/lib/berth/exec/tasks/t1");
  EXPECT_EQ(spec->work_dir, spec->task_dir);
  EXPECT_EQ(spec->hostname, "web");
  EXPECT_EQ(spec->uid, 0u);
  EXPECT_THAT(spec->env, Contains("FOO=bar"));
  EXPECT_THAT(spec->env, Contains(absl::StrCat("PATH=", kDefaultPath)));
  EXPECT_THAT(spec->env, Contains("BERTH_TASK_ID=t1"));
  EXPECT_THAT(spec->env, Contains("BERTH_ALLOC_ID=a1"));
  EXPECT_THAT(spec->env,
              Contains("BERTH_TASK_DIR=/var/lib/berth/exec/tasks/t1"));
  EXPECT_EQ(spec->log_max_bytes, kDefaultLogFileBytes);
  EXPECT_TRUE(spec->netns_path.empty());
}

TEST(TaskSpecTest, HostnameReplacesTheDefaultAndIsChecked) {
  dv1::TaskConfig task = Config("sh");
  task.set_name("web");
  task.set_hostname("db-1.example");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/var/lib/berth/x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->hostname, "db-1.example");
  for (const std::string& bad :
       {std::string(64, 'a'), std::string("a b"), std::string("x/y"),
        std::string("-lead"), std::string("trail-"), std::string("end."),
        std::string("under_score")}) {
    task.set_hostname(bad);
    spec = ResolveTaskSpec(task, "/var/lib/berth/x");
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(spec.status().message(), HasSubstr("task t1: hostname"))
        << bad << ": " << spec.status();
  }
}

TEST(TaskSpecTest, RlimitsAreResolvedAndCheckedNamingTheEntry) {
  dv1::TaskConfig task = Config("sh");
  dv1::Rlimit* nofile = task.add_rlimits();
  nofile->set_type("RLIMIT_NOFILE");
  nofile->set_soft(1024);
  nofile->set_hard(2048);
  dv1::Rlimit* core = task.add_rlimits();
  core->set_type("RLIMIT_CORE");
  core->set_soft(UINT64_MAX);
  core->set_hard(UINT64_MAX);
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/var/lib/berth/x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->rlimits.size(), 2u);
  EXPECT_EQ(spec->rlimits[0].resource, RLIMIT_NOFILE);
  EXPECT_EQ(spec->rlimits[0].soft, 1024u);
  EXPECT_EQ(spec->rlimits[0].hard, 2048u);
  EXPECT_EQ(spec->rlimits[1].resource, RLIMIT_CORE);
  EXPECT_EQ(spec->rlimits[1].soft, RLIM_INFINITY);

  struct Case {
    std::string type;
    uint64_t soft, hard;
    std::string want;
  };
  for (const Case& c : {Case{"NOFILE", 1, 1, "rlimits[1].type \"NOFILE\""},
                        Case{"RLIMIT_NPROC", 10, 5, "rlimits[1].soft 10"},
                        Case{"RLIMIT_NOFILE", 1, 1,
                             "rlimits[2].type RLIMIT_NOFILE is given twice"}}) {
    dv1::TaskConfig bad = Config("sh");
    *bad.add_rlimits() = *core;
    dv1::Rlimit* entry = bad.add_rlimits();
    entry->set_type(c.type);
    entry->set_soft(c.soft);
    entry->set_hard(c.hard);
    if (c.type == "RLIMIT_NOFILE") *bad.add_rlimits() = *entry;  // twice
    spec = ResolveTaskSpec(bad, "/var/lib/berth/x");
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument)
        << c.type;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.want)) << spec.status();
  }
}

// Values a client may send that the kernel would not take, or that would
// wrap when converted: refused before anything is made, naming the field;
// the largest allowed value passes.
TEST(TaskSpecTest, LimitsTooLargeToConvertAreRefusedNamingTheField) {
  struct Case {
    std::function<void(dv1::TaskConfig*, bool)> set;  // true: one too many
    std::string want;
  };
  const Case cases[] = {
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_resources()->set_cpu_millicores(kMaxCpuMillicores + over);
       },
       "task t1: resources.cpu_millicores 1000000001 is above 1000000000"},
      {[](dv1::TaskConfig* t, bool over) {
         // Would wrap as millicores * 100 microseconds of quota.
         t->mutable_resources()->set_cpu_millicores(over ? UINT64_MAX / 10
                                                         : kMaxCpuMillicores);
       },
       "resources.cpu_millicores 1844674407370955161 is above"},
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_resources()->set_cpu_shares(kMaxCpuShares + over);
       },
       "task t1: resources.cpu_shares 262145 is above 262144"},
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_resources()->set_memory_bytes(over ? UINT64_MAX
                                                       : kMaxMemoryBytes);
       },
       "task t1: resources.memory_bytes 18446744073709551615 is above "
       "9223372036854775807"},
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_resources()->set_pids_limit(kMaxPids + over);
       },
       "task t1: resources.pids_limit 4194305 is above 4194304"},
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_resources()->set_pids_limit(over ? UINT64_MAX : kMaxPids);
       },
       "resources.pids_limit 18446744073709551615 is above"},
      {[](dv1::TaskConfig* t, bool over) {
         t->mutable_logs()->set_max_files(over ? UINT32_MAX : kMaxLogFiles);
       },
       "task t1: logs.max_files 4294967295 is above 1024"},
  };
  for (const Case& c : cases) {
    dv1::TaskConfig task = Config("/bin/true");
    c.set(&task, false);
    absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s");
    EXPECT_TRUE(spec.ok()) << c.want << ": " << spec.status();
    task = Config("/bin/true");
    c.set(&task, true);
    spec = ResolveTaskSpec(task, "/s");
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument)
        << c.want;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.want));
  }
}

// setrlimit(2) refuses an RLIMIT_NOFILE above fs.nr_open, RLIM_INFINITY
// included: refused up front, naming the entry.
TEST(TaskSpecTest, AnOpenFilesLimitAboveNrOpenIsRefused) {
  std::ifstream in("/proc/sys/fs/nr_open");
  uint64_t nr_open = 0;
  if (!(in >> nr_open)) {
    GTEST_SKIP() << "no /proc/sys/fs/nr_open to compare with";
  }
  for (uint64_t hard : {nr_open + 1, uint64_t{RLIM_INFINITY}}) {
    dv1::TaskConfig task = Config("/bin/true");
    dv1::Rlimit* nofile = task.add_rlimits();
    nofile->set_type("RLIMIT_NOFILE");
    nofile->set_soft(1024);
    nofile->set_hard(hard);
    absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s");
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(),
                HasSubstr(absl::StrCat("rlimits[0].hard ", hard,
                                       " of RLIMIT_NOFILE is above this "
                                       "node's fs.nr_open, ",
                                       nr_open)));
    nofile->set_hard(nr_open);
    spec = ResolveTaskSpec(task, "/s");
    EXPECT_TRUE(spec.ok()) << spec.status();
  }
}

TEST(TaskSpecTest, TheTasksPathIsSearchedAndAPathWithASlashTakenAsIs) {
  ShortTempDir dir;
  const std::string program = dir.Join("tool");
  std::ofstream(program) << "#!/bin/sh\n";
  chmod(program.c_str(), 0755);
  dv1::TaskConfig task = Config("tool");
  (*task.mutable_env())["PATH"] = dir.path();
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, program);

  task = Config("./tool");
  task.set_task_dir(dir.path());
  spec = ResolveTaskSpec(task, "/s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, dir.path() + "/./tool");

  task = Config("tool");  // not on the default PATH
  spec = ResolveTaskSpec(task, "/s");
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("task t1: driver_config.command: \"tool\" is not on "
                        "the task's PATH"));

  chmod(program.c_str(), 0644);
  task = Config(program);
  spec = ResolveTaskSpec(task, "/s");
  EXPECT_THAT(spec.status().message(), HasSubstr("is not executable"));
  task = Config(dir.path());
  spec = ResolveTaskSpec(task, "/s");
  EXPECT_THAT(spec.status().message(), HasSubstr("is not a regular file"));
}

// In its own root the program is looked up as the task sees it: through
// its mounts, its task directory at /berth/task and the host directories,
// and nowhere else of the host.
TEST(TaskSpecTest, InItsOwnRootTheProgramIsLookedUpAsTheTaskSeesIt) {
  ShortTempDir dir;
  const std::string program = dir.Join("tool");
  std::ofstream(program) << "#!/bin/sh\n";
  chmod(program.c_str(), 0755);
  IsolationDefaults defaults;
  defaults.own_root = true;
  defaults.host_dirs = {"/usr", "/bin"};

  dv1::TaskConfig task = Config("/probe/tool");
  dv1::Mount* mount = task.mutable_isolation()->add_mounts();
  mount->set_type(dv1::MOUNT_TYPE_BIND);
  mount->set_source(dir.path());
  mount->set_destination("/probe");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "/probe/tool");
  EXPECT_EQ(spec->cwd, "/berth/task");
  EXPECT_EQ(HostPathInRoot(*spec, "/probe/tool"), program);
  EXPECT_EQ(HostPathInRoot(*spec, "/usr/bin/env"), "/usr/bin/env");
  EXPECT_EQ(HostPathInRoot(*spec, "/berth/task/x"), spec->task_dir + "/x");
  EXPECT_EQ(HostPathInRoot(*spec, "/root/x"), "");

  // A file bound alone.
  const dv1::Mount probe_mount = *mount;
  task = Config("/probe-tool");
  dv1::Mount* file = task.mutable_isolation()->add_mounts();
  file->set_type(dv1::MOUNT_TYPE_BIND);
  file->set_source(program);
  file->set_destination("/probe-tool");
  spec = ResolveTaskSpec(task, "/s", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "/probe-tool");
  task = Config("tool");
  (*task.mutable_env())["PATH"] = "/probe:/usr/bin";
  *task.mutable_isolation()->add_mounts() = probe_mount;
  spec = ResolveTaskSpec(task, "/s", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "/probe/tool");

  // The host has it, the task's root does not.
  task = Config(program);
  spec = ResolveTaskSpec(task, "/s", defaults);
  EXPECT_THAT(spec.status().message(),
              HasSubstr(program + " is not in the task's root"));
}

// What a task (or an image) put in its directory is looked at as the task
// will see it: an absolute link there resolves inside the task directory,
// never on the host, where root would otherwise follow it.
TEST(TaskSpecTest, ALinkInTheTaskDirectoryIsNotFollowedOnTheHost) {
  ShortTempDir task_dir;
  ShortTempDir outside;
  const std::string host_program = outside.Join("tool");
  std::ofstream(host_program) << "#!/bin/sh\n";
  chmod(host_program.c_str(), 0755);
  ASSERT_EQ(symlink(host_program.c_str(), task_dir.Join("tool").c_str()), 0);
  IsolationDefaults defaults;
  defaults.own_root = true;
  defaults.host_dirs = {"/usr", "/bin"};
  dv1::TaskConfig task = Config("/berth/task/tool");
  task.set_task_dir(task_dir.path());
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s", defaults);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(),
              HasSubstr("driver_config.command: /berth/task/tool: No such "
                        "file or directory"));
  // A link that stays inside resolves as it will for the task.
  const std::string inside = task_dir.Join("real");
  std::ofstream(inside) << "#!/bin/sh\n";
  chmod(inside.c_str(), 0755);
  ASSERT_EQ(symlink("/real", task_dir.Join("alias").c_str()), 0);
  task = Config("/berth/task/alias");
  task.set_task_dir(task_dir.path());
  spec = ResolveTaskSpec(task, "/s", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->path, "/berth/task/alias");
}

TEST(TaskSpecTest, TheWorkingDirectoryStaysInsideTheTaskDirectory) {
  dv1::TaskConfig task = Config("/bin/true");
  task.set_task_dir("/srv/tasks/t1/");
  SetField(&task, "work_dir", "app/../data");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task_dir, "/srv/tasks/t1");
  EXPECT_EQ(spec->work_dir, "/srv/tasks/t1/data");

  SetField(&task, "work_dir", "/srv/tasks/t1/www");
  EXPECT_EQ(ResolveTaskSpec(task, "")->work_dir, "/srv/tasks/t1/www");

  for (const char* outside : {"../t2", "/etc", "/srv/tasks/t10", "../../.."}) {
    SetField(&task, "work_dir", outside);
    spec = ResolveTaskSpec(task, "");
    EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << outside;
    EXPECT_THAT(spec.status().message(), HasSubstr("driver_config.work_dir"))
        << outside;
  }
  task.set_task_dir("relative/dir");
  EXPECT_THAT(ResolveTaskSpec(task, "").status().message(),
              HasSubstr("task_dir"));
  task.clear_task_dir();
  EXPECT_TRUE(absl::IsFailedPrecondition(ResolveTaskSpec(task, "").status()));
}

// TaskConfig.working_dir (an image's WorkingDir) is where the program runs
// in its own root; driver_config.work_dir's directory is still made in the
// task directory.
TEST(TaskSpecTest, TheWorkingDirectoryInTheTasksOwnRoot) {
  ShortTempDir rootfs;
  ASSERT_EQ(mkdir(rootfs.Join("app").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(rootfs.Join("app/bin").c_str(), 0755), 0);
  const std::string program = rootfs.Join("app/bin/run");
  std::ofstream(program) << "#!/bin/sh\n";
  chmod(program.c_str(), 0755);
  IsolationDefaults defaults;
  defaults.own_root = true;
  dv1::TaskConfig task = Config("bin/run");
  task.set_task_dir("/srv/tasks/t1");
  task.mutable_isolation()->set_rootfs(rootfs.path());
  task.set_working_dir("/app/./");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cwd, "/app");
  EXPECT_EQ(spec->path, "/app/bin/run");  // relative to the working dir
  EXPECT_EQ(spec->work_dir, "/srv/tasks/t1");

  task.set_working_dir("app");
  spec = ResolveTaskSpec(task, "", defaults);
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("working_dir \"app\" is not an absolute path"));

  // A driver that keeps the host's root has no root of the task's own.
  task.set_working_dir("/app");
  task.clear_isolation();
  spec = ResolveTaskSpec(task, "", IsolationDefaults());
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(), HasSubstr("working_dir: this driver"));
}

// isolation.rootfs_idmapped (an image snapshot over idmapped layers) is
// kept for the driver, and only makes sense for an image root in a user
// namespace.
TEST(TaskSpecTest, AnIdmappedRootNeedsARootAndAUserNamespace) {
  ShortTempDir rootfs;
  ASSERT_EQ(mkdir(rootfs.Join("bin").c_str(), 0755), 0);
  std::ofstream(rootfs.Join("bin/run")) << "#!/bin/sh\n";
  chmod(rootfs.Join("bin/run").c_str(), 0755);
  IsolationDefaults defaults;
  defaults.own_root = true;
  dv1::TaskConfig task = Config("/bin/run");
  task.set_task_dir("/srv/tasks/t1");
  dv1::Isolation& isolation = *task.mutable_isolation();
  isolation.set_rootfs(rootfs.path());
  isolation.set_rootfs_idmapped(true);
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "", defaults);
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("isolation.rootfs_idmapped: set without "
                        "isolation.user_namespace"));

  for (auto* map : {isolation.mutable_user_namespace()->add_uid_mappings(),
                    isolation.mutable_user_namespace()->add_gid_mappings()}) {
    map->set_host_id(131072);
    map->set_size(65536);
  }
  spec = ResolveTaskSpec(task, "", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->rootfs_idmapped);

  isolation.clear_rootfs();
  SetField(&task, "command", "/bin/true");
  spec = ResolveTaskSpec(task, "", defaults);
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("isolation.rootfs_idmapped: set without "
                        "isolation.rootfs"));

  isolation.set_rootfs(rootfs.path());
  isolation.set_rootfs_idmapped(false);
  SetField(&task, "command", "/bin/run");
  spec = ResolveTaskSpec(task, "", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->rootfs_idmapped);
}

TEST(TaskSpecTest, UsersAndGroupsAreLookedUp) {
  dv1::TaskConfig task = Config("/bin/true");
  task.set_user("nobody");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->uid, 65534u);
  EXPECT_EQ(spec->gid, 65534u);
  // No passwd entry: nogroup, never group 0 (which owns berth's sockets).
  task.set_user("4242");
  spec = ResolveTaskSpec(task, "/s");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->uid, 4242u);
  EXPECT_EQ(spec->gid, 65534u);
  task.set_group("daemon");
  EXPECT_EQ(ResolveTaskSpec(task, "/s")->gid, 1u);
  task.set_group("no-such-group");
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("group: no group named \"no-such-group\""));
  task.clear_group();
  task.set_user("no-such-user");
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("user: no user named \"no-such-user\""));
}

// A root of the task's own (an image) with its program, /etc/passwd and
// /etc/group.
class ImageRoot {
 public:
  ImageRoot() {
    for (const char* sub : {"bin", "etc", "home", "home/x"}) {
      EXPECT_EQ(mkdir(rootfs_.Join(sub).c_str(), 0755), 0) << sub;
    }
    std::ofstream(rootfs_.Join("bin/run")) << "#!/bin/sh\n";
    chmod(rootfs_.Join("bin/run").c_str(), 0755);
  }
  const ShortTempDir& dir() const { return rootfs_; }
  void Write(const std::string& path, const std::string& content) const {
    std::ofstream(rootfs_.Join(path)) << content;
  }
  dv1::TaskConfig Task(const std::string& user,
                       const std::string& group = "") const {
    dv1::TaskConfig task = Config("/bin/run");
    task.set_task_dir("/srv/tasks/t1");
    task.mutable_isolation()->set_rootfs(rootfs_.path());
    task.set_user(user);
    task.set_group(group);
    return task;
  }
  absl::StatusOr<TaskSpec> Resolve(const std::string& user,
                                   const std::string& group = "") const {
    IsolationDefaults defaults;
    defaults.own_root = true;
    return ResolveTaskSpec(Task(user, group), "", defaults);
  }

 private:
  ShortTempDir rootfs_;
};

constexpr char kImagePasswd[] =
    "root:x:0:0:root:/root:/bin/sh\n"
    "berthimageuser:x:4321:4321::/home/x:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
constexpr char kImageGroup[] =
    "root:x:0:\n"
    "berthimagegroup:x:4321:\n"
    "berthimagewww:x:4400:nobody,berthimageuser\n";

// As Docker, runc and containerd do: a task on an image has its users in
// the image's own /etc/passwd and /etc/group, not the host's.
TEST(TaskSpecTest, ATaskOnAnImageHasTheUsersOfTheImage) {
  ImageRoot image;
  image.Write("etc/passwd", kImagePasswd);
  image.Write("etc/group", kImageGroup);
  absl::StatusOr<TaskSpec> spec = image.Resolve("berthimageuser");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->uid, 4321u);
  EXPECT_EQ(spec->gid, 4321u);
  EXPECT_EQ(spec->groups, (std::vector<gid_t>{4321, 4400}));
  EXPECT_THAT(spec->env, Contains("HOME=/home/x"));
  EXPECT_THAT(spec->env, Contains("USER=berthimageuser"));

  spec = image.Resolve("berthimageuser", "berthimagewww");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gid, 4400u);
  // A uid has the image's entry for it.
  spec = image.Resolve("4321", "0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gid, 0u);
  EXPECT_THAT(spec->env, Contains("USER=berthimageuser"));
  spec = image.Resolve("4242");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gid, kNoGroup);

  // The host's daemon and its group are not the image's.
  spec = image.Resolve("daemon");
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_EQ(spec.status().message(),
            "task t1: user: no user named \"daemon\" in the image's "
            "/etc/passwd");
  spec = image.Resolve("4321", "daemon");
  EXPECT_EQ(spec.status().message(),
            "task t1: group: no group named \"daemon\" in the image's "
            "/etc/group");

  // Without the files: a uid runs, a name cannot.
  ASSERT_EQ(unlink(image.dir().Join("etc/passwd").c_str()), 0);
  ASSERT_EQ(unlink(image.dir().Join("etc/group").c_str()), 0);
  spec = image.Resolve("4321");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gid, kNoGroup);
  EXPECT_THAT(image.Resolve("nobody").status().message(),
              HasSubstr("(the image has no /etc/passwd)"));
  // No user: root, nothing read.
  spec = image.Resolve("");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->uid, 0u);
}

// The image's /etc/passwd is read as the task would: a link in it resolves
// inside the image, never on the host, and what is not a regular file is
// never opened.
TEST(TaskSpecTest, TheImagesPasswdIsReadInsideTheImage) {
  ImageRoot image;
  // On the host, a passwd of the user: a link to it resolves in the image.
  ShortTempDir outside;
  std::ofstream(outside.Join("passwd")) << kImagePasswd;
  ASSERT_EQ(symlink(outside.Join("passwd").c_str(),
                    image.dir().Join("etc/passwd").c_str()),
            0);
  absl::StatusOr<TaskSpec> spec = image.Resolve("berthimageuser");
  EXPECT_THAT(spec.status().message(),
              HasSubstr("no user named \"berthimageuser\" in the image's "
                        "/etc/passwd (the image has no /etc/passwd)"));
  ASSERT_EQ(unlink(image.dir().Join("etc/passwd").c_str()), 0);
  std::string up = "..";
  for (int i = 0; i < 16; ++i) up += "/..";
  ASSERT_EQ(symlink((up + outside.Join("passwd")).c_str(),
                    image.dir().Join("etc/passwd").c_str()),
            0);
  spec = image.Resolve("berthimageuser");
  EXPECT_THAT(spec.status().message(),
              HasSubstr("(the image has no /etc/passwd)"));

  // A link that stays in the image is followed, as in the task.
  ASSERT_EQ(unlink(image.dir().Join("etc/passwd").c_str()), 0);
  image.Write("home/passwd", kImagePasswd);
  ASSERT_EQ(symlink("../home/./passwd", image.dir().Join("etc/passwd").c_str()),
            0);
  spec = image.Resolve("berthimageuser");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->uid, 4321u);

  // A FIFO (opening it would block), a directory, a file too big.
  ASSERT_EQ(unlink(image.dir().Join("etc/passwd").c_str()), 0);
  ASSERT_EQ(mkfifo(image.dir().Join("etc/passwd").c_str(), 0644), 0);
  spec = image.Resolve("berthimageuser");
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("user: the image's /etc/passwd: /etc/passwd is not a "
                        "regular file"));
  ASSERT_EQ(unlink(image.dir().Join("etc/passwd").c_str()), 0);
  ASSERT_EQ(mkdir(image.dir().Join("etc/passwd").c_str(), 0755), 0);
  EXPECT_THAT(image.Resolve("1").status().message(),
              HasSubstr("is not a regular file"));
  ASSERT_EQ(rmdir(image.dir().Join("etc/passwd").c_str()), 0);
  image.Write("etc/passwd",
              std::string(kMaxUserFileBytes, '#') + "\n" + kImagePasswd);
  spec = image.Resolve("berthimageuser");
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  EXPECT_THAT(spec.status().message(),
              HasSubstr("user: the image's /etc/passwd:"));
  EXPECT_THAT(spec.status().message(), HasSubstr("4194304"));
  // The group file as well, named by the field that needed it.
  image.Write("etc/passwd", kImagePasswd);
  ASSERT_EQ(mkfifo(image.dir().Join("etc/group").c_str(), 0644), 0);
  EXPECT_THAT(image.Resolve("", "www").status().message(),
              HasSubstr("group: the image's /etc/group: /etc/group is not a "
                        "regular file"));
}

// A task without an image has the host's /etc (bound into its root): its
// users are the host's.
TEST(TaskSpecTest, ATaskWithoutAnImageHasTheHostsUsers) {
  IsolationDefaults defaults;
  defaults.own_root = true;
  dv1::TaskConfig task = Config("/bin/true");
  task.set_task_dir("/srv/tasks/t1");
  task.set_user("daemon");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->uid, 1u);
  task.set_user("4294967295");
  EXPECT_THAT(ResolveTaskSpec(task, "", defaults).status().message(),
              HasSubstr("user: 4294967295 is not an id"));
}

TEST(TaskSpecTest, IdsLimitsAndNetworksAreChecked) {
  for (const char* id : {"", ".hidden", "a/b", "a b", "..",
                         "x234567890123456789012345678901234567890123456789012"
                         "345678901234567890123456789012345678901234567890123"
                         "45678901234567890123456789"}) {
    dv1::TaskConfig task = Config("/bin/true");
    task.set_id(id);
    EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
                HasSubstr("task.id"))
        << id;
  }
  dv1::TaskConfig task = Config("/bin/true");
  task.mutable_resources()->set_memory_bytes(kMinMemoryBytes - 1);
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("resources.memory_bytes"));
  task.mutable_resources()->set_memory_bytes(kMinMemoryBytes);
  EXPECT_TRUE(ResolveTaskSpec(task, "/s").ok());
  task.mutable_resources()->set_pids_limit(1);
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("resources.pids_limit"));
  task.mutable_resources()->clear_pids_limit();

  task.mutable_network()->set_mode(dv1::NETWORK_ISOLATION_MODE_GROUP);
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("network.namespace_path is required"));
  task.mutable_network()->set_namespace_path("/proc/self/ns/net");
  absl::StatusOr<TaskSpec> spec = ResolveTaskSpec(task, "/s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->netns_path, "/proc/self/ns/net");
  task.mutable_network()->set_mode(dv1::NETWORK_ISOLATION_MODE_TASK);
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("network.mode"));

  task = Config("/bin/true");
  (*task.mutable_env())["A=B"] = "x";
  EXPECT_THAT(ResolveTaskSpec(task, "/s").status().message(),
              HasSubstr("env: \"A=B\""));
}

}  // namespace
}  // namespace berth::driver_common
