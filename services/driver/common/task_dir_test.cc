#include "services/driver/common/task_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/driver/common/init_spec.h"

namespace berth::driver_common {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;

void WriteFile(const std::string& path, const std::string& data) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fwrite(data.data(), 1, data.size(), f);
  fclose(f);
}

TEST(ExitRecordTest, WrittenAndReadBack) {
  ShortTempDir temp;
  ASSERT_EQ(mkdir(temp.Join(".berth").c_str(), 0700), 0);
  ExitRecord record;
  record.exit_code = 7;
  record.exited_at_unix_nanos = 42;
  ASSERT_TRUE(WriteExitRecord(temp.path(), record).ok());
  ExitRecord read;
  ASSERT_TRUE(ReadExitRecord(temp.path(), &read));
  EXPECT_EQ(read.exit_code, 7);
  EXPECT_EQ(read.exited_at_unix_nanos, 42);
}

// A task that owns its directory renames .berth away and plants a link to a
// directory of its choosing (or links exit to a file): the driver, root,
// neither reads nor writes through it.
TEST(ExitRecordTest, LinksPlantedByTheTaskAreNotFollowed) {
  ShortTempDir temp;
  const std::string task_dir = temp.Join("task");
  const std::string outside = temp.Join("outside");
  ASSERT_EQ(mkdir(task_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  ExitRecord record;
  record.exit_code = 9;
  WriteFile(outside + "/exit", EncodeExitRecord(record));
  ASSERT_EQ(symlink(outside.c_str(), (task_dir + "/.berth").c_str()), 0);
  ExitRecord read;
  EXPECT_FALSE(ReadExitRecord(task_dir, &read));
  EXPECT_FALSE(WriteExitRecord(task_dir, record).ok());
  EXPECT_FALSE(PathExists(outside + "/exit.tmp"));

  ASSERT_EQ(unlink((task_dir + "/.berth").c_str()), 0);
  ASSERT_EQ(mkdir((task_dir + "/.berth").c_str(), 0700), 0);
  ASSERT_EQ(
      symlink((outside + "/exit").c_str(), (task_dir + "/.berth/exit").c_str()),
      0);
  EXPECT_FALSE(ReadExitRecord(task_dir, &read));
}

TEST(ExitRecordTest, AnOverlongRecordIsRefused) {
  ShortTempDir temp;
  ASSERT_EQ(mkdir(temp.Join(".berth").c_str(), 0700), 0);
  ExitRecord record;
  WriteFile(temp.Join(".berth/exit"),
            EncodeExitRecord(record) + std::string(kMaxExitRecordBytes, ' '));
  ExitRecord read;
  EXPECT_FALSE(ReadExitRecord(temp.path(), &read));
}

TEST(CheckTaskDirInsideTest, AcceptsDirectoriesBelowTheStateDirectory) {
  EXPECT_TRUE(
      CheckTaskDirInside("/var/lib/berth/node/tasks/abc", "/var/lib/berth")
          .ok());
  EXPECT_TRUE(
      CheckTaskDirInside("/var/lib//berth/./node/tasks/abc", "/var/lib/berth/")
          .ok());
}

TEST(CheckTaskDirInsideTest, RefusesEverythingElseNamingTaskDir) {
  for (const char* dir :
       {"/etc/cron.d", "/var/lib/berth", "/var/lib/berthx/t",
        "/var/lib/berth/../../etc", "/var/lib/berth/node/../../../etc",
        "var/lib/berth/node/tasks/x", ""}) {
    const absl::Status status = CheckTaskDirInside(dir, "/var/lib/berth");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << dir;
    EXPECT_TRUE(absl::StrContains(status.message(), "task_dir")) << status;
  }
  EXPECT_EQ(CheckTaskDirInside("/var/lib/berth/node/tasks/x", "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CheckTaskDirInside("/var/lib/berth/node/tasks/x", "relative").code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(CheckStartAllowedTest, TaskDirAndDefaultFilter) {
  driver::v1::TaskConfig task;
  task.set_id("t1");
  task.set_task_dir("/var/lib/berth/node/tasks/t1");
  EXPECT_TRUE(
      CheckStartAllowed(task, "/var/lib/berth/exec", absl::OkStatus()).ok());
  task.set_task_dir("/etc/cron.d");
  absl::Status status =
      CheckStartAllowed(task, "/var/lib/berth/exec", absl::OkStatus());
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StartsWith(status.message(), "task t1: task_dir"))
      << status;

  // Without a default filter only tasks that need none start.
  task.set_task_dir("/var/lib/berth/node/tasks/t1");
  const absl::Status no_filter = absl::InternalError("seccomp_init failed");
  status = CheckStartAllowed(task, "/var/lib/berth/exec", no_filter);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "isolation.seccomp"))
      << status;
  task.mutable_isolation()->mutable_seccomp()->set_type(
      driver::v1::SECCOMP_PROFILE_TYPE_UNCONFINED);
  EXPECT_TRUE(CheckStartAllowed(task, "/var/lib/berth/exec", no_filter).ok());
  task.mutable_isolation()->clear_seccomp();
  task.mutable_isolation()->set_privileged(true);
  EXPECT_TRUE(CheckStartAllowed(task, "/var/lib/berth/exec", no_filter).ok());
}

}  // namespace
}  // namespace berth::driver_common
