// The configuration side of CNI without running anything: LoadNetwork on
// temporary configuration directories, ParseResult on results of every
// shape, and what the runner checks and gives plugins.

#include "services/netns_hook/cni_config.h"

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "berth/network/v1/network.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"

namespace berth {
namespace netns_hook {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using json = nlohmann::json;
namespace nv1 = ::berth::network::v1;

// --- LoadNetwork.

class LoadNetworkTest : public ::testing::Test {
 protected:
  void Write(const std::string& file, const std::string& content) {
    std::ofstream out(dir_.Join(file), std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << file;
  }
  ShortTempDir dir_;
};

TEST_F(LoadNetworkTest, FindsAListByItsName) {
  Write("10-alpha.conflist", R"({"cniVersion": "1.0.0", "name": "alpha",
      "plugins": [{"type": "loopback"}]})");
  Write("20-berth.conflist", R"({"cniVersion": "1.0.0", "name": "berth",
      "plugins": [{"type": "bridge", "bridge": "berth0"},
                  {"type": "portmap", "capabilities": {"portMappings": true}},
                  {"type": "firewall"}]})");
  Write("notes.txt", "not a configuration");
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "berth");
  ASSERT_TRUE(network.ok()) << network.status();
  EXPECT_EQ(network->name, "berth");
  EXPECT_EQ(network->cni_version, "1.0.0");
  EXPECT_EQ(network->path, dir_.Join("20-berth.conflist"));
  ASSERT_EQ(network->conflist["plugins"].size(), 3);
  EXPECT_EQ(network->conflist["plugins"][0]["bridge"], "berth0");
}

TEST_F(LoadNetworkTest, WrapsAConfOfOnePluginAsAList) {
  Write("99-single.conf", R"({"cniVersion": "0.4.0", "name": "single",
      "type": "bridge", "bridge": "cni0", "disableCheck": true})");
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "single");
  ASSERT_TRUE(network.ok()) << network.status();
  EXPECT_EQ(network->name, "single");
  EXPECT_EQ(network->cni_version, "0.4.0");
  EXPECT_EQ(network->path, dir_.Join("99-single.conf"));
  ASSERT_EQ(network->conflist["plugins"].size(), 1);
  EXPECT_EQ(network->conflist["plugins"][0]["type"], "bridge");
  EXPECT_EQ(network->conflist["plugins"][0]["bridge"], "cni0");
  EXPECT_EQ(network->conflist["disableCheck"], true);
}

TEST_F(LoadNetworkTest, TheFirstFileOfANameWins) {
  Write("20-dup.conflist", R"({"cniVersion": "1.0.0", "name": "dup",
      "plugins": [{"type": "second"}]})");
  Write("10-dup.conflist", R"({"cniVersion": "1.0.0", "name": "dup",
      "plugins": [{"type": "first"}]})");
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "dup");
  ASSERT_TRUE(network.ok()) << network.status();
  EXPECT_EQ(network->conflist["plugins"][0]["type"], "first");
}

TEST_F(LoadNetworkTest, NotFoundNamesTheDirectoryAndTheNetworksFound) {
  Write("10-alpha.conflist", R"({"cniVersion": "1.0.0", "name": "alpha",
      "plugins": [{"type": "loopback"}]})");
  Write("20-beta.conf", R"({"cniVersion": "1.0.0", "name": "beta",
      "type": "bridge"})");
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "gamma");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(network.status().message(),
            absl::StrCat("no CNI network \"gamma\" in ", dir_.path(),
                         " (networks found: alpha, beta)"));

  network = LoadNetwork(dir_.Join("nosuch"), "gamma");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(network.status().message(), AllOf(HasSubstr(dir_.Join("nosuch")),
                                                HasSubstr("does not exist")));
}

TEST_F(LoadNetworkTest, AMalformedFileIsNamedWithItsJsonError) {
  Write("10-alpha.conflist", R"({"cniVersion": "1.0.0", "name": "alpha",
      "plugins": [{"type": "loopback"}]})");
  Write("20-bad.conflist", R"({"cniVersion": "1.0.0", "name": )");
  // The network asked for is not there, and the bad file may be it.
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "berth");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(network.status().message(),
              AllOf(HasSubstr(dir_.Join("20-bad.conflist")),
                    HasSubstr("not valid JSON"), HasSubstr("parse error"),
                    HasSubstr("networks found: alpha")));
  // Others still load.
  EXPECT_TRUE(LoadNetwork(dir_.path(), "alpha").ok());
}

TEST_F(LoadNetworkTest, AnInvalidListOfTheNameIsNamedWithItsFault) {
  Write("10-broken.conflist", R"({"cniVersion": "1.0.0", "name": "broken",
      "plugins": [{"type": "bridge"}, {"bridge": "x"}]})");
  Write("20-nover.conflist", R"({"name": "nover",
      "plugins": [{"type": "bridge"}]})");
  Write("30-space.conflist", R"({"cniVersion": "1.0.0", "name": "a b",
      "plugins": [{"type": "bridge"}]})");
  absl::StatusOr<CniNetwork> network = LoadNetwork(dir_.path(), "broken");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(network.status().message(),
            absl::StrCat(dir_.Join("10-broken.conflist"),
                         ": plugins[1].type is missing"));
  network = LoadNetwork(dir_.path(), "nover");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(network.status().message(),
              AllOf(HasSubstr("20-nover.conflist"), HasSubstr("cniVersion")));
  network = LoadNetwork(dir_.path(), "a b");
  EXPECT_EQ(network.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      network.status().message(),
      AllOf(HasSubstr("30-space.conflist"), HasSubstr("network name \"a b\"")));
}

// --- ParseResult.

TEST(ParseResultTest, TakesTheSandboxInterfaceAndItsAddresses) {
  const json result = json::parse(R"({
    "cniVersion": "1.0.0",
    "interfaces": [
      {"name": "berth0", "mac": "aa:bb:cc:dd:ee:01"},
      {"name": "veth1234", "mac": "aa:bb:cc:dd:ee:02"},
      {"name": "eth0", "mac": "aa:bb:cc:dd:ee:03",
       "sandbox": "/var/run/netns/berth-a"}],
    "ips": [
      {"address": "172.26.64.1/20", "interface": 0},
      {"address": "172.26.64.5/20", "gateway": "172.26.64.1", "interface": 2},
      {"address": "fd00:26::5/64", "gateway": "fd00:26::1", "interface": 2}],
    "routes": [{"dst": "0.0.0.0/0"}],
    "dns": {}})");
  absl::StatusOr<CniResult> parsed = ParseResult(result, "eth0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->raw, result);
  EXPECT_EQ(parsed->interface_name, "eth0");
  ASSERT_EQ(parsed->addresses.size(), 2);
  EXPECT_EQ(parsed->addresses[0].cidr, "172.26.64.5/20");
  EXPECT_EQ(parsed->addresses[0].gateway, "172.26.64.1");
  EXPECT_EQ(parsed->addresses[1].cidr, "fd00:26::5/64");
  EXPECT_EQ(parsed->addresses[1].gateway, "fd00:26::1");
}

TEST(ParseResultTest, PrefersTheSandboxInterfaceOfTheNameAskedFor) {
  const json result = json::parse(R"({"cniVersion": "1.0.0",
    "interfaces": [{"name": "eth0", "sandbox": "/ns"},
                   {"name": "net1", "sandbox": "/ns"}],
    "ips": [{"address": "10.1.0.2/24", "interface": 0},
            {"address": "10.2.0.2/24", "gateway": "10.2.0.1",
             "interface": 1}]})");
  absl::StatusOr<CniResult> parsed = ParseResult(result, "net1");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->interface_name, "net1");
  ASSERT_EQ(parsed->addresses.size(), 1);
  EXPECT_EQ(parsed->addresses[0].cidr, "10.2.0.2/24");
}

TEST(ParseResultTest, TakesTheOnlySandboxInterfaceWhateverItsName) {
  // What the loopback plugin prints, whatever CNI_IFNAME says.
  const json result = json::parse(R"({"cniVersion": "1.0.0",
    "interfaces": [{"name": "lo", "mac": "00:00:00:00:00:00",
                    "sandbox": "/var/run/netns/x"}],
    "ips": [{"interface": 0, "address": "127.0.0.1/8"},
            {"interface": 0, "address": "::1/128"}], "dns": {}})");
  absl::StatusOr<CniResult> parsed = ParseResult(result, "eth0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->interface_name, "lo");
  ASSERT_EQ(parsed->addresses.size(), 2);
  EXPECT_EQ(parsed->addresses[0].cidr, "127.0.0.1/8");
  EXPECT_EQ(parsed->addresses[0].gateway, "");
}

TEST(ParseResultTest, WithoutInterfacesTakesEveryAddress) {
  // What host-local (an IPAM plugin) prints.
  const json result = json::parse(R"({"cniVersion": "0.4.0",
    "ips": [{"version": "4", "address": "10.1.0.2/16",
             "gateway": "10.1.0.1"},
            {"version": "6", "address": "fd00::2/64"}]})");
  absl::StatusOr<CniResult> parsed = ParseResult(result, "eth0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->interface_name, "eth0");
  ASSERT_EQ(parsed->addresses.size(), 2);
  EXPECT_EQ(parsed->addresses[0].cidr, "10.1.0.2/16");
  EXPECT_EQ(parsed->addresses[0].gateway, "10.1.0.1");
  EXPECT_EQ(parsed->addresses[1].cidr, "fd00::2/64");

  parsed = ParseResult(json::parse(R"({"cniVersion": "1.0.0"})"), "eth0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->addresses, IsEmpty());
}

TEST(ParseResultTest, ReadsTheIp4AndIp6OfVersion020) {
  const json result = json::parse(R"({"cniVersion": "0.2.0",
    "ip4": {"ip": "10.2.0.3/16", "gateway": "10.2.0.1",
            "routes": [{"dst": "0.0.0.0/0"}]},
    "ip6": {"ip": "fd00::3/64"}})");
  absl::StatusOr<CniResult> parsed = ParseResult(result, "eth0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->interface_name, "eth0");
  ASSERT_EQ(parsed->addresses.size(), 2);
  EXPECT_EQ(parsed->addresses[0].cidr, "10.2.0.3/16");
  EXPECT_EQ(parsed->addresses[0].gateway, "10.2.0.1");
  EXPECT_EQ(parsed->addresses[1].cidr, "fd00::3/64");
}

TEST(ParseResultTest, NamesTheFieldOfAMalformedResult) {
  struct Case {
    const char* result;
    const char* field;
  };
  const Case cases[] = {
      {R"([1, 2])", "not a JSON object"},
      {R"({"ips": [{"address": "10.0.0.5"}]})", "ips[0].address \"10.0.0.5\""},
      {R"({"ips": [{"address": "10.0.0.5/33"}]})", "ips[0].address"},
      {R"({"ips": [{"address": "10.0.0.5/24", "gateway": "gw"}]})",
       "ips[0].gateway \"gw\""},
      {R"({"interfaces": [{"name": "eth0", "sandbox": "/ns"}],
           "ips": [{"address": "10.0.0.5/24", "interface": 3}]})",
       "ips[0].interface 3"},
      {R"({"interfaces": [{"mac": "x"}]})", "interfaces[0]"},
      {R"({"ips": {"address": "10.0.0.5/24"}})", "ips is not an array"},
      {R"({"ip4": {"ip": "nonsense"}})", "ip4.ip \"nonsense\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CniResult> parsed =
        ParseResult(json::parse(c.result), "eth0");
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << c.result;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.field)) << c.result;
  }
}

// --- What the runner checks and gives plugins.

TEST(CniErrorOfTest, ReadsMsgDetailsAndCode) {
  EXPECT_EQ(CniErrorOf(R"({"code": 7, "msg": "no IP", "details": "pool"})"),
            "no IP; pool (CNI error code 7)");
  EXPECT_EQ(CniErrorOf(R"({"msg": "bad"})"), "bad");
  EXPECT_EQ(CniErrorOf(R"({"code": 11})"), "(no message) (CNI error code 11)");
  // Not a CNI error: the caller quotes the output instead.
  EXPECT_EQ(CniErrorOf("panic: nil map"), "");
  EXPECT_EQ(CniErrorOf(R"({"cniVersion": "1.0.0"})"), "");
  EXPECT_EQ(CniErrorOf(R"(["msg"])"), "");
}

TEST(PluginConfigTest, GivesEachPluginOnlyTheCapabilitiesItDeclares) {
  absl::StatusOr<CniNetwork> network = NetworkFromJson(
      json::parse(R"({"cniVersion": "1.0.0", "name": "net", "plugins": [
        {"type": "a", "name": "x", "prevResult": {"stale": true},
         "capabilities": {"portMappings": true, "dns": false}},
        {"type": "b", "capabilities": {"dns": true, "mac": true}}]})"),
      "test");
  ASSERT_TRUE(network.ok()) << network.status();
  CniRuntime runtime;
  runtime.container_id = "c1";
  nv1::PortMapping mapping;
  mapping.set_host_port(8080);
  mapping.set_container_port(80);
  mapping.set_protocol(nv1::PROTOCOL_UDP);
  runtime.port_mappings = {mapping};
  runtime.capability_args["dns"] = {{"nameservers", {"10.0.0.53"}}};
  const json prev = {{"cniVersion", "1.0.0"}};

  const json first = PluginConfig(*network, 0, runtime, nullptr);
  EXPECT_EQ(first["name"], "net");
  EXPECT_EQ(first["cniVersion"], "1.0.0");
  EXPECT_FALSE(first.contains("prevResult"));
  EXPECT_EQ(first["runtimeConfig"],
            json::parse(R"({"portMappings": [{"hostPort": 8080,
                "containerPort": 80, "protocol": "udp"}]})"));

  const json second = PluginConfig(*network, 1, runtime, &prev);
  EXPECT_EQ(second["prevResult"], prev);
  EXPECT_EQ(second["runtimeConfig"],
            json::parse(R"({"dns": {"nameservers": ["10.0.0.53"]}})"));
}

TEST(CniVersionTest, CheckAndDelPrevResultCameWith040) {
  EXPECT_FALSE(HasCheckAndDelPrevResult("0.3.1"));
  EXPECT_TRUE(HasCheckAndDelPrevResult("0.4.0"));
  EXPECT_TRUE(HasCheckAndDelPrevResult("1.0.0"));
  EXPECT_TRUE(ChecksDisabled(json::parse(R"({"disableCheck": "true"})")));
  EXPECT_FALSE(ChecksDisabled(json::parse(R"({"disableCheck": false})")));
  EXPECT_FALSE(ChecksDisabled(json::object()));
}

// What berth-netns' reconcile reads of every list: an "ipam" that host-local
// could not read (not an object, a type or dataDir of the wrong type) is
// skipped, never thrown on (it made berth-netns crash-loop).
TEST(HostLocalLeaseDirsTest, TakesHostLocalDataDirsAndSkipsWhatIsMalformed) {
  absl::StatusOr<CniNetwork> network = NetworkFromJson(
      json::parse(R"({"cniVersion": "1.0.0", "name": "net", "plugins": [
        {"type": "bridge", "ipam": {"type": "host-local",
                                    "dataDir": "/var/lib/berth/ipam"}},
        {"type": "bridge", "ipam": {"type": "host-local"}},
        {"type": "bridge", "ipam": {"type": "host-local",
                                    "dataDir": "/var/lib/berth/ipam"}},
        {"type": "bridge", "ipam": "host-local"},
        {"type": "bridge", "ipam": ["host-local"]},
        {"type": "bridge", "ipam": null},
        {"type": "bridge", "ipam": {"type": 7}},
        {"type": "bridge", "ipam": {"type": "host-local", "dataDir": 7}},
        {"type": "bridge", "ipam": {"type": "host-local", "dataDir": "rel"}},
        {"type": "bridge", "ipam": {"type": "dhcp"}},
        {"type": "portmap"}]})"),
      "test");
  ASSERT_TRUE(network.ok()) << network.status();
  EXPECT_EQ(HostLocalLeaseDirs(*network),
            (std::vector<std::string>{"/var/lib/berth/ipam/net",
                                      "/var/lib/cni/networks/net"}));

  absl::StatusOr<CniNetwork> none =
      NetworkFromJson(json::parse(R"({"cniVersion": "1.0.0", "name": "x",
                      "plugins": [{"type": "bridge", "ipam": 1}]})"),
                      "test");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(HostLocalLeaseDirs(*none), IsEmpty());
}

}  // namespace
}  // namespace netns_hook
}  // namespace berth
