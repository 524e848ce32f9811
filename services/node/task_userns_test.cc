#include "services/node/task_userns.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::node {
namespace {

using ::testing::HasSubstr;

internal::TaskRecord Record(const std::string& id, const std::string& userns) {
  internal::TaskRecord record;
  record.mutable_task()->set_id(id);
  record.mutable_task()->mutable_spec()->set_driver("exec");
  record.mutable_task()->mutable_spec()->set_userns(userns);
  return record;
}

driver::v1::DriverCapabilities Caps(bool user_namespaces) {
  driver::v1::DriverCapabilities caps;
  caps.mutable_isolation()->set_user_namespaces(user_namespaces);
  return caps;
}

TEST(TaskUsernsTest, HostIsNoNamespace) {
  IdRangeAllocator ids({{100000, 65536}}, {{100000, 65536}}, 65536, "pool");
  for (const auto& [userns, fallback] :
       {std::pair{"host", "auto"}, std::pair{"", "host"}}) {
    internal::TaskRecord record = Record("t", userns);
    auto chosen = ChooseUserNamespace(fallback, &ids, Caps(true), &record);
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_FALSE(chosen->has_value());
    EXPECT_FALSE(record.has_userns_range());
  }
}

TEST(TaskUsernsTest, AutoMapsRootToTheTasksRangeAndKeepsIt) {
  IdRangeAllocator ids({{100000, 65536 * 2}}, {{300000, 65536 * 2}}, 65536,
                       "pool");
  internal::TaskRecord first = Record("a", "auto");
  internal::TaskRecord second = Record("b", "");
  auto a = ChooseUserNamespace("host", &ids, Caps(true), &first);
  auto b = ChooseUserNamespace("auto", &ids, Caps(true), &second);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_TRUE(a->has_value() && b->has_value());
  EXPECT_EQ((*a)->uid_mappings(0).container_id(), 0u);
  EXPECT_EQ((*a)->uid_mappings(0).host_id(), 100000u);
  EXPECT_EQ((*a)->gid_mappings(0).host_id(), 300000u);
  EXPECT_EQ((*a)->uid_mappings(0).size(), 65536u);
  EXPECT_EQ((*b)->uid_mappings(0).host_id(), 165536u);
  EXPECT_EQ(first.userns_range().uid_start(), 100000u);
  EXPECT_EQ(second.userns_range().gid_start(), 365536u);
  // A restart of the task: the same range.
  auto again = ChooseUserNamespace("host", &ids, Caps(true), &first);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->uid_mappings(0).host_id(), 100000u);
}

TEST(TaskUsernsTest, RestoredRecordsKeepTheirRanges) {
  internal::TaskRecord stored = Record("old", "auto");
  stored.mutable_userns_range()->set_uid_start(100000);
  stored.mutable_userns_range()->set_gid_start(100000);
  stored.mutable_userns_range()->set_size(65536);
  // A new node's allocator.
  IdRangeAllocator ids({{100000, 65536 * 2}}, {{100000, 65536 * 2}}, 65536,
                       "pool");
  ASSERT_TRUE(RestoreUserNamespace(stored, &ids).ok());
  ASSERT_TRUE(RestoreUserNamespace(Record("none", ""), &ids).ok());
  internal::TaskRecord fresh = Record("new", "auto");
  auto chosen = ChooseUserNamespace("host", &ids, Caps(true), &fresh);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ((*chosen)->uid_mappings(0).host_id(), 165536u);
}

TEST(TaskUsernsTest, TheDefaultNeedsADriverWithUserNamespaces) {
  IdRangeAllocator ids({{100000, 65536}}, {{100000, 65536}}, 65536, "pool");
  internal::TaskRecord record = Record("t", "");
  auto chosen = ChooseUserNamespace("auto", &ids, Caps(false), &record);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(chosen.status().message(), HasSubstr("--default_userns"));
  EXPECT_THAT(chosen.status().message(), HasSubstr("driver exec"));
  EXPECT_FALSE(record.has_userns_range());
}

TEST(TaskUsernsTest, AnEmptyPoolNamesItsSource) {
  IdRangeAllocator ids({}, {}, 65536,
                       "user berth in /etc/subuid and /etc/subgid");
  internal::TaskRecord record = Record("t", "auto");
  auto chosen = ChooseUserNamespace("host", &ids, Caps(true), &record);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(chosen.status().message(), HasSubstr("/etc/subuid"));
  EXPECT_THAT(chosen.status().message(), HasSubstr("user berth"));
}

TEST(TaskUsernsTest, DefaultFlagValues) {
  EXPECT_TRUE(CheckDefaultUserns("host").ok());
  EXPECT_TRUE(CheckDefaultUserns("auto").ok());
  EXPECT_EQ(CheckDefaultUserns("Auto").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth::node
