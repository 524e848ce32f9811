#include "services/driver/common/start_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::driver_common {
namespace {

driver::v1::TaskHandle Handle(const std::string& id) {
  driver::v1::TaskHandle handle;
  handle.set_version(2);
  handle.mutable_config()->set_id(id);
  handle.mutable_config()->set_name("web");
  handle.set_driver_state("opaque\0bytes");
  return handle;
}

TEST(StartRecordTest, WrittenRecordReadsBackAndIsRemoved) {
  ::berth::testing::ShortTempDir dir;
  const std::string state = dir.path();
  EXPECT_TRUE(absl::IsNotFound(ReadStartRecord(state, "t1").status()));
  ASSERT_TRUE(WriteStartRecord(state, Handle("t1")).ok());
  driver::v1::TaskHandle second = Handle("t1");
  second.set_driver_state("the second");
  ASSERT_TRUE(WriteStartRecord(state, second).ok());
  absl::StatusOr<driver::v1::TaskHandle> read = ReadStartRecord(state, "t1");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->driver_state(), "the second");
  EXPECT_EQ(read->config().name(), "web");
  struct stat file;
  ASSERT_EQ(stat(StartRecordPath(state, "t1").c_str(), &file), 0);
  EXPECT_EQ(file.st_mode & 0777, 0600);
  ASSERT_TRUE(RemoveStartRecord(state, "t1").ok());
  EXPECT_TRUE(absl::IsNotFound(ReadStartRecord(state, "t1").status()));
  EXPECT_TRUE(RemoveStartRecord(state, "t1").ok());  // none: not an error
}

TEST(StartRecordTest, AForeignOrBrokenRecordIsDataLossNamingTheFile) {
  ::berth::testing::ShortTempDir dir;
  const std::string state = dir.path();
  ASSERT_TRUE(WriteStartRecord(state, Handle("t1")).ok());
  // Another task's record under t2's name.
  ASSERT_EQ(rename(StartRecordPath(state, "t1").c_str(),
                   StartRecordPath(state, "t2").c_str()),
            0);
  absl::StatusOr<driver::v1::TaskHandle> read = ReadStartRecord(state, "t2");
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_TRUE(
      absl::StrContains(read.status().message(), StartRecordPath(state, "t2")));
  std::ofstream(StartRecordPath(state, "t3")) << "\xff\xff\xff";
  EXPECT_TRUE(absl::IsDataLoss(ReadStartRecord(state, "t3").status()));
}

TEST(StartRecordTest, ALinkAtTheRecordsPlaceIsNotFollowed) {
  ::berth::testing::ShortTempDir dir;
  const std::string state = dir.path();
  ASSERT_TRUE(WriteStartRecord(state, Handle("t1")).ok());
  ASSERT_EQ(symlink(StartRecordPath(state, "t1").c_str(),
                    StartRecordPath(state, "t2").c_str()),
            0);
  EXPECT_FALSE(ReadStartRecord(state, "t2").ok());
}

TEST(StartRecordTest, LeftoversOfAnInterruptedWriteAreRemoved) {
  ::berth::testing::ShortTempDir dir;
  const std::string state = dir.path();
  ASSERT_TRUE(WriteStartRecord(state, Handle("t1")).ok());
  const std::string temp = state + "/starts/.t2.tmp";
  std::ofstream(temp) << "half";
  // A task whose id ends in ".tmp" has a record like any other.
  ASSERT_TRUE(WriteStartRecord(state, Handle("t3.tmp")).ok());
  RemoveStartRecordLeftovers(state);
  EXPECT_NE(access(temp.c_str(), F_OK), 0);
  EXPECT_TRUE(ReadStartRecord(state, "t1").ok());
  EXPECT_TRUE(ReadStartRecord(state, "t3.tmp").ok());
  // Writing t3's record leaves t3.tmp's alone.
  ASSERT_TRUE(WriteStartRecord(state, Handle("t3")).ok());
  absl::StatusOr<driver::v1::TaskHandle> other =
      ReadStartRecord(state, "t3.tmp");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->config().id(), "t3.tmp");
}

}  // namespace
}  // namespace berth::driver_common
