#include "services/node/task_store.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::FileMode;
using ::berth::testing::ShortTempDir;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

internal::TaskRecord Record(const std::string& id, const std::string& name,
                            int64_t created_seconds) {
  internal::TaskRecord record;
  record.mutable_task()->set_id(id);
  record.mutable_task()->mutable_spec()->set_name(name);
  record.mutable_task()->mutable_spec()->set_driver("exec");
  record.mutable_task()->mutable_created_at()->set_seconds(created_seconds);
  return record;
}

std::vector<std::string> Ids(const std::vector<internal::TaskRecord>& records) {
  std::vector<std::string> ids;
  for (const auto& record : records) ids.push_back(record.task().id());
  return ids;
}

TEST(TaskStoreTest, RecordsSurviveReopeningTheDatabase) {
  ShortTempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/state.db");
  {
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    internal::TaskRecord a = Record("a1", "web", 20);
    a.mutable_task()->set_state(v1::TASK_STATE_RUNNING);
    a.mutable_handle()->set_driver_state(std::string("opaque\0nul", 10));
    a.set_network_allocated(true);
    ASSERT_TRUE((*store)->Put(a).ok());
    ASSERT_TRUE((*store)->Put(Record("b2", "db", 10)).ok());
    ASSERT_TRUE((*store)->PutPlugin("exec", "{\"pid\": 1}").ok());
  }
  // The file is the node's alone.
  EXPECT_EQ(FileMode(path) & 0777, 0600);
  auto store = TaskStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto records = (*store)->List();
  ASSERT_TRUE(records.ok());
  // Oldest first.
  EXPECT_THAT(Ids(*records), ElementsAre("b2", "a1"));
  auto a = (*store)->Get("a1");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->task().state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ((*a)->handle().driver_state(), std::string("opaque\0nul", 10));
  EXPECT_TRUE((*a)->network_allocated());
  auto plugins = (*store)->Plugins();
  ASSERT_TRUE(plugins.ok());
  EXPECT_EQ(plugins->at("exec"), "{\"pid\": 1}");
}

TEST(TaskStoreTest, PutReplacesAndDeleteRemoves) {
  ShortTempDir dir;
  auto store = TaskStore::Open(absl::StrCat(dir.path(), "/state.db"));
  ASSERT_TRUE(store.ok());
  internal::TaskRecord a = Record("a1", "web", 1);
  ASSERT_TRUE((*store)->Put(a).ok());
  a.mutable_task()->set_state(v1::TASK_STATE_EXITED);
  a.mutable_task()->mutable_exit_result()->set_exit_code(7);
  ASSERT_TRUE((*store)->Put(a).ok());
  auto got = (*store)->Get("a1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->task().exit_result().exit_code(), 7);
  EXPECT_EQ((*store)->List()->size(), 1u);

  ASSERT_TRUE((*store)->Delete("a1").ok());
  EXPECT_FALSE((*store)->Get("a1")->has_value());
  EXPECT_TRUE((*store)->Delete("a1").ok());  // absent is fine
  // Its name is free again.
  EXPECT_TRUE((*store)->Put(Record("c3", "web", 2)).ok());
}

TEST(TaskStoreTest, ANameHeldByAnotherTaskIsRefusedNamingIt) {
  ShortTempDir dir;
  auto store = TaskStore::Open(absl::StrCat(dir.path(), "/state.db"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(Record("a1", "web", 1)).ok());
  absl::Status taken = (*store)->Put(Record("b2", "web", 2));
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.message(), HasSubstr("web"));
  EXPECT_THAT(taken.message(), HasSubstr("a1"));
  EXPECT_FALSE((*store)->Get("b2")->has_value());
}

TEST(TaskStoreTest, ACorruptRecordIsReportedWithItsTask) {
  ShortTempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/state.db");
  {
    auto db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok());
    auto store = TaskStore::Open(path);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO tasks VALUES ('bad1', 'x', 0, "
                           "x'ffffffff')")
                    .ok());
  }
  auto store = TaskStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto records = (*store)->List();
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(records.status().message(), HasSubstr("bad1"));
}

TEST(TaskStoreTest, AnUnopenableDatabaseNamesItsPath) {
  auto store = TaskStore::Open("/nonexistent-dir/state.db");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("/nonexistent-dir/state.db"));
}

TEST(TaskStoreTest, MakeStateDirMakesParentsAndIsPrivate) {
  ShortTempDir dir;
  const std::string path = absl::StrCat(dir.path(), "/a/b/node");
  ASSERT_TRUE(MakeStateDir(path).ok());
  EXPECT_EQ(FileMode(path) & 0777, 0700);
  EXPECT_TRUE(MakeStateDir(path).ok());
}

}  // namespace
}  // namespace berth::node
