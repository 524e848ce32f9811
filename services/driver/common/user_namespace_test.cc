#include "services/driver/common/user_namespace.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::driver_common {
namespace {

namespace dv1 = ::berth::driver::v1;
using ::testing::HasSubstr;

void Add(google::protobuf::RepeatedPtrField<dv1::IdMapping>* map,
         uint32_t container_id, uint32_t host_id, uint32_t size) {
  dv1::IdMapping* m = map->Add();
  m->set_container_id(container_id);
  m->set_host_id(host_id);
  m->set_size(size);
}

dv1::UserNamespace Valid() {
  dv1::UserNamespace ns;
  Add(ns.mutable_uid_mappings(), 0, 3200000, 65536);
  Add(ns.mutable_gid_mappings(), 0, 3300000, 65536);
  return ns;
}

TEST(UserNamespaceTest, WantsOnlyWithMappings) {
  EXPECT_FALSE(WantsUserNamespace(dv1::UserNamespace()));
  EXPECT_TRUE(WantsUserNamespace(Valid()));
}

TEST(UserNamespaceTest, ResolvesAndMaps) {
  absl::StatusOr<driver_common::UserNamespaceMaps> maps =
      ResolveUserNamespace(Valid());
  ASSERT_TRUE(maps.ok()) << maps.status();
  ASSERT_EQ(maps->uid.size(), 1u);
  EXPECT_EQ(maps->uid[0].host_id, 3200000u);
  EXPECT_EQ(MapToHost(maps->uid, 0), 3200000u);
  EXPECT_EQ(MapToHost(maps->gid, 65535), 3300000u + 65535);
  EXPECT_FALSE(MapToHost(maps->uid, 65536).has_value());
  EXPECT_TRUE(CheckIdentityMapped(*maps, 1000, 1000, {0, 5}).ok());
  absl::Status unmapped = CheckIdentityMapped(*maps, 70000, 0, {});
  EXPECT_TRUE(absl::IsInvalidArgument(unmapped));
  EXPECT_THAT(unmapped.message(), HasSubstr("user: uid 70000"));
  EXPECT_THAT(CheckIdentityMapped(*maps, 0, 0, {90000}).message(),
              HasSubstr("supplementary group 90000"));
}

TEST(UserNamespaceTest, RefusesNamingTheField) {
  struct Case {
    const char* name;
    dv1::UserNamespace ns;
    const char* message;
  };
  std::vector<Case> cases;
  {
    dv1::UserNamespace ns = Valid();
    ns.clear_gid_mappings();
    cases.push_back({"no gid map", ns, "gid_mappings: empty"});
  }
  {
    dv1::UserNamespace ns;
    Add(ns.mutable_uid_mappings(), 0, 0, 65536);
    *ns.mutable_gid_mappings() = Valid().gid_mappings();
    cases.push_back({"host root", ns, "uid_mappings[0].host_id"});
  }
  {
    dv1::UserNamespace ns = Valid();
    ns.mutable_gid_mappings(0)->set_size(0);
    cases.push_back({"empty range", ns, "gid_mappings[0].size"});
  }
  {
    dv1::UserNamespace ns = Valid();
    ns.mutable_uid_mappings(0)->set_container_id(1);
    cases.push_back({"no root", ns, "no range maps container id 0"});
  }
  {
    dv1::UserNamespace ns = Valid();
    Add(ns.mutable_uid_mappings(), 65536, 3200000 + 100, 10);
    cases.push_back({"host overlap", ns, "uid_mappings[1].host_id: overlaps"});
  }
  {
    dv1::UserNamespace ns = Valid();
    Add(ns.mutable_uid_mappings(), 100, 5000000, 10);
    cases.push_back(
        {"inside overlap", ns, "uid_mappings[1].container_id: overlaps"});
  }
  {
    dv1::UserNamespace ns = Valid();
    ns.mutable_uid_mappings(0)->set_host_id(4294967295u);
    cases.push_back({"past 2^32", ns, "runs past id 4294967295"});
  }
  for (const Case& c : cases) {
    absl::StatusOr<driver_common::UserNamespaceMaps> maps =
        ResolveUserNamespace(c.ns);
    EXPECT_TRUE(absl::IsInvalidArgument(maps.status()))
        << c.name << ": " << maps.status();
    EXPECT_THAT(maps.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(maps.status().message(), HasSubstr("isolation.user_namespace"))
        << c.name;
  }
}

}  // namespace
}  // namespace berth::driver_common
