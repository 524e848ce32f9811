#include "services/images/snapshot_idmaps.h"

#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/images/test_util.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;
using ::berth::images::testing::DirEntries;
using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

IdMappings Ranges(std::vector<std::array<uint32_t, 3>> ranges) {
  IdMappings mappings;
  for (const auto& [container, host, size] : ranges) {
    pb::IdMapping* range = mappings.Add();
    range->set_container_id(container);
    range->set_host_id(host);
    range->set_size(size);
  }
  return mappings;
}

TEST(ValidateIdMappingsTest, AcceptsBothOrNeither) {
  EXPECT_TRUE(ValidateIdMappings({}, {}).ok());
  EXPECT_TRUE(ValidateIdMappings(Ranges({{0, 100000, 65536}}),
                                 Ranges({{0, 100000, 65536}}))
                  .ok());
  EXPECT_TRUE(ValidateIdMappings(Ranges({{0, 100000, 1}, {1, 200000, 10}}),
                                 Ranges({{0, 100000, 11}}))
                  .ok());
  absl::Status one = ValidateIdMappings(Ranges({{0, 100000, 65536}}), {});
  EXPECT_EQ(one.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(one.message(), HasSubstr("gid_mappings is empty"));
}

TEST(ValidateIdMappingsTest, RefusesBadRangesNamingTheField) {
  const IdMappings good = Ranges({{0, 100000, 65536}});
  struct Case {
    IdMappings gid;
    const char* names;
  } cases[] = {
      {Ranges({{0, 100000, 0}}), "gid_mappings[0].size is 0"},
      {Ranges({{0, 4294967295u, 2}}), "gid_mappings[0] runs past 2^32"},
      {Ranges({{0, 100000, 10}, {5, 300000, 10}}),
       "gid_mappings[1] overlaps gid_mappings[0] inside"},
      {Ranges({{0, 100000, 10}, {10, 100005, 10}}),
       "gid_mappings[1] overlaps gid_mappings[0] on the host"},
      {Ranges({{0, 1, 1},
               {1, 2, 1},
               {2, 3, 1},
               {3, 4, 1},
               {4, 5, 1},
               {5, 6, 1},
               {6, 7, 1},
               {7, 8, 1},
               {8, 9, 1}}),
       "gid_mappings: 9 ranges"},
  };
  for (const Case& c : cases) {
    absl::Status status = ValidateIdMappings(good, c.gid);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.names;
    EXPECT_THAT(status.message(), HasSubstr(c.names));
  }
  // End exactly at 2^32: fine.
  EXPECT_TRUE(ValidateIdMappings(good, Ranges({{0, 4294967295u, 1}})).ok());
}

TEST(IdMapTextTest, LinesAsProcTakesThem) {
  EXPECT_EQ(IdMapText(Ranges({{0, 100000, 1}, {1, 200000, 65535}})),
            "0 100000 1\n1 200000 65535\n");
  EXPECT_TRUE(SameIdMappings(Ranges({{0, 1, 2}}), Ranges({{0, 1, 2}})));
  EXPECT_FALSE(SameIdMappings(Ranges({{0, 1, 2}}), Ranges({{0, 1, 3}})));
  EXPECT_FALSE(SameIdMappings(Ranges({{0, 1, 2}}), {}));
}

TEST(SnapshotIdMapsTest, RemembersForgetsAndCleans) {
  ShortTempDir dir;
  absl::StatusOr<std::unique_ptr<SnapshotIdMaps>> maps =
      SnapshotIdMaps::Open(dir.Join("idmaps"));
  ASSERT_TRUE(maps.ok()) << maps.status();
  absl::StatusOr<pb::Snapshot> none = (*maps)->Get("a");
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->uid_mappings(), IsEmpty());

  ASSERT_TRUE(
      (*maps)
          ->Put("a", Ranges({{0, 100000, 65536}}), Ranges({{0, 100000, 65536}}))
          .ok());
  ASSERT_TRUE((*maps)->Put("b", Ranges({{0, 1, 1}}), Ranges({{0, 2, 1}})).ok());
  absl::StatusOr<pb::Snapshot> a = (*maps)->Get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(SameIdMappings(a->uid_mappings(), Ranges({{0, 100000, 65536}})));
  // Reopened: still there.
  maps = SnapshotIdMaps::Open(dir.Join("idmaps"));
  ASSERT_TRUE(maps.ok());
  absl::StatusOr<pb::Snapshot> b = (*maps)->Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(SameIdMappings(b->gid_mappings(), Ranges({{0, 2, 1}})));

  (*maps)->Clean({"b"});
  EXPECT_THAT(DirEntries(dir.Join("idmaps")), ElementsAre("b.pb"));
  ASSERT_TRUE((*maps)->Remove("b").ok());
  ASSERT_TRUE((*maps)->Remove("b").ok());
  EXPECT_THAT(DirEntries(dir.Join("idmaps")), IsEmpty());
}

TEST(MakeIdmapNamespaceTest, MakesANamespaceWithTheMaps) {
  if (geteuid() != 0) GTEST_SKIP() << "making a user namespace needs root";
  absl::StatusOr<base::UniqueFd> fd = MakeIdmapNamespace(
      Ranges({{0, 400000, 65536}}), Ranges({{0, 400000, 65536}}));
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_TRUE(fd->valid());
}

}  // namespace
}  // namespace berth::images
