#include "services/node/task_etc_files.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHostResolvConf[] =
    "# made by the host\n"
    "nameserver 127.0.0.53\n"
    "nameserver 192.0.2.53\n"
    "nameserver ::1\n"
    "search corp.example\n"
    "options edns0\n";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(HostsFileTest, LocalhostThenTheTasksAddressesThenExtraHosts) {
  v1::TaskSpec spec;
  v1::HostEntry* db = spec.add_extra_hosts();
  db->set_hostname("db.internal");
  db->set_ip("192.0.2.10");
  v1::HostEntry* v6 = spec.add_extra_hosts();
  v6->set_hostname("v6.internal");
  v6->set_ip("2001:db8::1");
  network::v1::NetworkStatus network;
  network.add_addresses()->set_cidr("172.26.64.2/20");
  const std::string hosts = HostsFile(spec, "web", &network);
  EXPECT_EQ(hosts.find("127.0.0.1\tlocalhost\n"), 0u) << hosts;
  EXPECT_THAT(hosts, HasSubstr("::1\tlocalhost ip6-localhost ip6-loopback\n"));
  const size_t own = hosts.find("172.26.64.2\tweb\n");
  const size_t first_extra = hosts.find("192.0.2.10\tdb.internal\n");
  const size_t second_extra = hosts.find("2001:db8::1\tv6.internal\n");
  ASSERT_NE(own, std::string::npos) << hosts;
  ASSERT_NE(first_extra, std::string::npos) << hosts;
  ASSERT_NE(second_extra, std::string::npos) << hosts;
  EXPECT_LT(own, first_extra);
  EXPECT_LT(first_extra, second_extra);
}

TEST(HostsFileTest, HostNetworkListsNoAddressOfItsOwn) {
  v1::TaskSpec spec;
  const std::string hosts = HostsFile(spec, "web", nullptr);
  EXPECT_THAT(hosts, Not(HasSubstr("web")));
  EXPECT_THAT(hosts, HasSubstr("127.0.0.1\tlocalhost\n"));
}

TEST(ResolvConfTest, OwnNetworkLeavesOutLoopbackServers) {
  const std::string text =
      ResolvConf(network::v1::DnsConfig(), kHostResolvConf, true);
  EXPECT_EQ(text,
            "nameserver 192.0.2.53\n"
            "search corp.example\n"
            "options edns0\n");
}

TEST(ResolvConfTest, HostNetworkKeepsTheHostsServers) {
  const std::string text =
      ResolvConf(network::v1::DnsConfig(), kHostResolvConf, false);
  EXPECT_THAT(text, HasSubstr("nameserver 127.0.0.53\n"));
  EXPECT_THAT(text, HasSubstr("nameserver ::1\n"));
}

TEST(ResolvConfTest, SpecDnsReplacesWhatItGives) {
  network::v1::DnsConfig dns;
  dns.add_servers("192.0.2.1");
  dns.add_servers("2001:db8::53");
  dns.add_options("ndots:2");
  const std::string text = ResolvConf(dns, kHostResolvConf, true);
  EXPECT_EQ(text,
            "nameserver 192.0.2.1\n"
            "nameserver 2001:db8::53\n"
            "search corp.example\n"
            "options ndots:2\n");
  network::v1::DnsConfig searches;
  searches.add_searches("a.example");
  searches.add_searches("b.example");
  EXPECT_EQ(ResolvConf(searches, kHostResolvConf, true),
            "nameserver 192.0.2.53\n"
            "search a.example b.example\n"
            "options edns0\n");
}

TEST(TaskEtcFilesTest, WritesTheFilesFreshAndBindsThem) {
  berth::testing::ShortTempDir dir;
  v1::TaskSpec spec;
  spec.mutable_network()->mutable_dns()->add_servers("192.0.2.1");
  network::v1::NetworkStatus network;
  network.add_addresses()->set_cidr("10.88.0.5/16");
  const TaskEtcFiles files =
      MakeTaskEtcFiles(spec, "box", &network, kHostResolvConf);
  ASSERT_TRUE(WriteTaskEtcFiles(dir.path(), files).ok());
  EXPECT_EQ(Read(dir.Join("etc/hostname")), "box\n");
  EXPECT_THAT(Read(dir.Join("etc/hosts")), HasSubstr("10.88.0.5\tbox\n"));
  EXPECT_EQ(Read(dir.Join("etc/resolv.conf")),
            "nameserver 192.0.2.1\nsearch corp.example\noptions edns0\n");
  struct stat st;
  ASSERT_EQ(stat(dir.Join("etc/hosts").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // Never over what is there (a second write of the same run, a link).
  EXPECT_FALSE(WriteTaskEtcFiles(dir.path(), files).ok());

  driver::v1::Isolation isolation;
  driver::v1::Mount* own = isolation.add_mounts();
  own->set_type(driver::v1::MOUNT_TYPE_BIND);
  own->set_source("/srv/resolv.conf");
  own->set_destination("/etc/resolv.conf");
  AddTaskEtcMounts(dir.path(), &isolation);
  ASSERT_EQ(isolation.mounts_size(), 3);
  EXPECT_EQ(isolation.mounts(0).source(), "/srv/resolv.conf");
  EXPECT_EQ(isolation.mounts(1).source(), dir.Join("etc/hosts"));
  EXPECT_EQ(isolation.mounts(1).destination(), "/etc/hosts");
  EXPECT_FALSE(isolation.mounts(1).read_only());
  EXPECT_EQ(isolation.mounts(2).destination(), "/etc/hostname");
}

TEST(TaskEtcFilesTest, OnlyForDriversWithTheirOwnRootAndMounts) {
  driver::v1::DriverCapabilities caps;
  EXPECT_FALSE(WantsTaskEtcFiles(caps));
  caps.mutable_isolation()->set_mounts(true);
  EXPECT_FALSE(WantsTaskEtcFiles(caps));
  caps.mutable_isolation()->set_own_root(true);
  EXPECT_TRUE(WantsTaskEtcFiles(caps));
}

}  // namespace
}  // namespace berth::node
