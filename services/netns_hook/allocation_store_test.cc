#include "services/netns_hook/allocation_store.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::netns_hook {
namespace {

namespace nv1 = ::berth::network::v1;
using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

AllocationRecord Sample() {
  AllocationRecord record;
  record.allocation_id = "alloc-1";
  record.mode = nv1::NETWORK_MODE_BRIDGE;
  record.phase = AllocationRecord::Phase::kReady;
  record.namespace_name = "berth-alloc-1";
  record.namespace_path = "/var/run/netns/berth-alloc-1";
  record.namespace_made = true;
  record.cni_network = "berth";
  record.interface_name = "eth0";
  record.cni_added = true;
  record.cni_result = nlohmann::json::parse(
      R"({"cniVersion":"1.0.0","ips":[{"address":"10.1.0.2/24"}]})");
  nv1::PortMapping mapping;
  mapping.set_label("http");
  mapping.set_host_port(8080);
  mapping.set_container_port(80);
  record.port_mappings.push_back(mapping);
  record.dns.add_servers("10.1.0.1");
  record.hostname = "web";
  record.created_at = absl::FromUnixSeconds(1700000000);
  return record;
}

TEST(AllocationStoreTest, WritesReadsListsAndRemovesRecords) {
  ShortTempDir temp;
  AllocationStore store(temp.Join("a/b"));
  ASSERT_TRUE(store.Prepare().ok());
  ASSERT_TRUE(store.Write(Sample()).ok());
  absl::StatusOr<std::optional<AllocationRecord>> read = store.Read("alloc-1");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  const AllocationRecord& record = **read;
  EXPECT_EQ(record.mode, nv1::NETWORK_MODE_BRIDGE);
  EXPECT_EQ(record.phase, AllocationRecord::Phase::kReady);
  EXPECT_EQ(record.namespace_path, "/var/run/netns/berth-alloc-1");
  EXPECT_TRUE(record.namespace_made);
  EXPECT_TRUE(record.cni_added);
  EXPECT_EQ(record.cni_result["ips"][0]["address"], "10.1.0.2/24");
  ASSERT_EQ(record.port_mappings.size(), 1u);
  EXPECT_EQ(record.port_mappings[0].host_port(), 8080u);
  EXPECT_EQ(record.dns.servers(0), "10.1.0.1");
  EXPECT_EQ(record.created_at, absl::FromUnixSeconds(1700000000));
  EXPECT_FALSE(PathExists(temp.Join("a/b/alloc-1.json.tmp")));

  AllocationRecord second = Sample();
  second.allocation_id = "alloc-0";
  second.phase = AllocationRecord::Phase::kCreating;
  ASSERT_TRUE(store.Write(second).ok());
  absl::StatusOr<std::vector<AllocationRecord>> all = store.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].allocation_id, "alloc-0");
  EXPECT_EQ((*all)[0].phase, AllocationRecord::Phase::kCreating);

  ASSERT_TRUE(store.Remove("alloc-1").ok());
  ASSERT_TRUE(store.Remove("alloc-1").ok());
  EXPECT_FALSE(store.Read("alloc-1")->has_value());
}

// A berth-netns killed between the write and the rename left "<id>.json.tmp":
// found by tools/chaos (F8); the next start's Prepare removes it and leaves
// the records alone.
TEST(AllocationStoreTest, PrepareRemovesHalfWrittenRecords) {
  ShortTempDir temp;
  AllocationStore store(temp.Join("allocations"));
  ASSERT_TRUE(store.Prepare().ok());
  ASSERT_TRUE(store.Write(Sample()).ok());
  { std::ofstream(temp.Join("allocations/alloc-2.json.tmp")) << "{\"ver"; }
  { std::ofstream(temp.Join("allocations/alloc-1.json.tmp")) << "{}"; }
  ASSERT_TRUE(PathExists(temp.Join("allocations/alloc-2.json.tmp")));

  ASSERT_TRUE(store.Prepare().ok());
  EXPECT_FALSE(PathExists(temp.Join("allocations/alloc-2.json.tmp")));
  EXPECT_FALSE(PathExists(temp.Join("allocations/alloc-1.json.tmp")));
  absl::StatusOr<std::vector<AllocationRecord>> all = store.List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].allocation_id, "alloc-1");
}

TEST(AllocationStoreTest, ACorruptRecordIsAnErrorNamingItsFile) {
  ShortTempDir temp;
  AllocationStore store(temp.path());
  std::ofstream(temp.Join("bad.json")) << "{\"version\": 1, \"mode\": 3}";
  absl::StatusOr<std::vector<AllocationRecord>> all = store.List();
  EXPECT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr(temp.Join("bad.json")));
}

// Found by //services/netns_hook:allocation_record_fuzzer: a record made in
// memory holds its version as a signed integer, which was refused.
TEST(AllocationStoreTest, ARecordReadsBackFromItsJsonInMemory) {
  const nlohmann::json json = RecordToJson(Sample());
  absl::StatusOr<AllocationRecord> again = RecordFromJson(json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(RecordToJson(*again), json);
}

// A record file whose allocation_id is a path is refused: the reconcile
// removes files and namespaces by it.
TEST(AllocationStoreTest, ARecordWithAPathForItsIdIsRefused) {
  nlohmann::json json = RecordToJson(Sample());
  json["allocation_id"] = "../../etc/x";
  absl::StatusOr<AllocationRecord> record = RecordFromJson(json);
  EXPECT_TRUE(absl::IsInvalidArgument(record.status())) << record.status();
  EXPECT_THAT(record.status().message(), HasSubstr("allocation_id"));
}

TEST(AllocationStoreTest, AllocationIdsAreChecked) {
  EXPECT_TRUE(CheckAllocationId("a.b_c-1").ok());
  for (const char* bad : {"", ".x", "-x", "a/b", "a b",
                          "x23456789012345678901234567890123456789012345678901"
                          "234567890123456"}) {
    absl::Status status = CheckAllocationId(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad;
    EXPECT_THAT(status.message(), HasSubstr("allocation_id")) << bad;
  }
  ShortTempDir temp;
  AllocationRecord record = Sample();
  record.allocation_id = "../escape";
  EXPECT_FALSE(AllocationStore(temp.path()).Write(record).ok());
}

}  // namespace
}  // namespace berth::netns_hook
