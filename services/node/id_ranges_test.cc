#include "services/node/id_ranges.h"

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseSubIdsTest, TakesTheUsersLinesByNameOrUid) {
  const std::string content =
      "# comment\n"
      "alice:100000:65536\n"
      "\n"
      "berth:200000:131072\n"
      "  berth:500000:65536  \n"
      "998:900000:65536\n"
      "bob:garbage\n";
  absl::StatusOr<std::vector<IdSpan>> spans =
      ParseSubIds(content, "/etc/subuid", "berth", 998);
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_THAT(*spans, ElementsAre(IdSpan{200000, 131072}, IdSpan{500000, 65536},
                                  IdSpan{900000, 65536}));
}

TEST(ParseSubIdsTest, NoLineOfTheUserIsNoSpan) {
  absl::StatusOr<std::vector<IdSpan>> spans =
      ParseSubIds("alice:100000:65536\n", "/etc/subuid", "berth", std::nullopt);
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_TRUE(spans->empty());
}

TEST(ParseSubIdsTest, AMalformedLineOfTheUserNamesFileAndLine) {
  for (const char* bad :
       {"berth:100000", "berth:x:65536", "berth:100000:0",
        "berth:100000:65536:1", "berth:4294901760:65536", "berth:-1:65536"}) {
    absl::StatusOr<std::vector<IdSpan>> spans = ParseSubIds(
        absl::StrCat("alice:1:2\n", bad, "\n"), "/etc/subgid", "berth", 998);
    ASSERT_FALSE(spans.ok()) << bad;
    EXPECT_EQ(spans.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spans.status().message(), HasSubstr("/etc/subgid:2:")) << bad;
  }
}

TEST(IdRangeAllocatorTest, RangesNeverOverlapAndComeFirstFit) {
  // Two spans: room for 2 ranges of 1000 in the first, 1 in the second.
  IdRangeAllocator ids({{100000, 2500}, {300000, 1000}},
                       {{400000, 1000}, {500000, 2000}}, 1000, "test pool");
  std::set<uint32_t> uids, gids;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<IdRange> range = ids.Allocate(absl::StrCat("t", i));
    ASSERT_TRUE(range.ok()) << range.status();
    EXPECT_EQ(range->size, 1000u);
    uids.insert(range->uid_start);
    gids.insert(range->gid_start);
  }
  EXPECT_THAT(uids, ElementsAre(100000, 101000, 300000));
  EXPECT_THAT(gids, ElementsAre(400000, 500000, 501000));
  // The same task keeps its range.
  absl::StatusOr<IdRange> again = ids.Allocate("t1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->uid_start, 101000u);
}

TEST(IdRangeAllocatorTest, ExhaustionIsResourceExhaustedAndReleaseFrees) {
  IdRangeAllocator ids({{100000, 2000}}, {{100000, 2000}}, 1000, "test pool");
  ASSERT_TRUE(ids.Allocate("a").ok());
  ASSERT_TRUE(ids.Allocate("b").ok());
  absl::StatusOr<IdRange> none = ids.Allocate("c");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(none.status().message(), HasSubstr("task c"));
  EXPECT_THAT(none.status().message(), HasSubstr("test pool"));

  ids.Release("a");
  absl::StatusOr<IdRange> reused = ids.Allocate("c");
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(reused->uid_start, 100000u);
  ids.Release("never-allocated");  // nothing
}

TEST(IdRangeAllocatorTest, RestoredRangesAreNotHandedOutAgain) {
  // As after a node restart: the stored tasks' ranges first.
  IdRangeAllocator ids({{100000, 3000}}, {{100000, 3000}}, 1000, "test pool");
  ASSERT_TRUE(ids.Restore("old1", {100000, 100000, 1000}).ok());
  ASSERT_TRUE(ids.Restore("old2", {102000, 102000, 1000}).ok());
  absl::StatusOr<IdRange> fresh = ids.Allocate("new");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*fresh, (IdRange{101000, 101000, 1000}));
  EXPECT_FALSE(ids.Allocate("newer").ok());
  // A restored task keeps its range.
  absl::StatusOr<IdRange> old = ids.Allocate("old2");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->uid_start, 102000u);

  absl::Status clash = ids.Restore("other", {101500, 200000, 1000});
  EXPECT_EQ(clash.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(clash.message(), HasSubstr("task new"));
}

TEST(IdRangeAllocatorTest, ReadsTheSubidFiles) {
  ShortTempDir dir;
  IdRangeAllocator::Options options;
  options.subid_user = "berth-test-user";
  options.subuid_path = absl::StrCat(dir.path(), "/subuid");
  options.subgid_path = absl::StrCat(dir.path(), "/subgid");
  std::ofstream(options.subuid_path) << "berth-test-user:165536:131072\n";
  std::ofstream(options.subgid_path) << "x:1:1\nberth-test-user:265536:65536\n";
  absl::StatusOr<std::unique_ptr<IdRangeAllocator>> ids =
      IdRangeAllocator::Create(options);
  ASSERT_TRUE(ids.ok()) << ids.status();
  absl::StatusOr<IdRange> range = (*ids)->Allocate("t");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(*range, (IdRange{165536, 265536, 65536}));
  // The gid file holds one range only.
  EXPECT_EQ((*ids)->Allocate("u").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(IdRangeAllocatorTest, NoEntryFailsAllocateNamingFileAndUser) {
  ShortTempDir dir;
  IdRangeAllocator::Options options;
  options.subid_user = "berth-test-user";
  options.subuid_path = absl::StrCat(dir.path(), "/missing-subuid");
  options.subgid_path = absl::StrCat(dir.path(), "/missing-subgid");
  absl::StatusOr<std::unique_ptr<IdRangeAllocator>> ids =
      IdRangeAllocator::Create(options);
  ASSERT_TRUE(ids.ok()) << ids.status();
  absl::StatusOr<IdRange> range = (*ids)->Allocate("t");
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(range.status().message(), HasSubstr("berth-test-user"));
  EXPECT_THAT(range.status().message(), HasSubstr(options.subuid_path));
}

TEST(IdRangeAllocatorTest, AConfiguredBase) {
  IdRangeAllocator::Options options;
  options.subuid_path = "/nonexistent/never-read";
  options.base = 1000000;
  options.count = 65536 * 2;
  absl::StatusOr<std::unique_ptr<IdRangeAllocator>> ids =
      IdRangeAllocator::Create(options);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*(*ids)->Allocate("a"), (IdRange{1000000, 1000000, 65536}));
  EXPECT_EQ(*(*ids)->Allocate("b"), (IdRange{1065536, 1065536, 65536}));

  options.base = 1000;
  EXPECT_EQ(IdRangeAllocator::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.base = 1000000;
  options.count = 100;
  EXPECT_EQ(IdRangeAllocator::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth::node
