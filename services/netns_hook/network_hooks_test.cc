// LinuxNetworkHooks against real network namespaces and Debian's CNI
// plugins (root, outside Bazel's sandbox). Every test has its own namespace
// directory, state and configuration directories, bridge, subnet and name
// prefix, and counts what exists of it before and after: namespaces, veths on
// its bridge, IP leases and iptables rules. Traffic goes only between its own
// namespaces and its own bridge address.

#include "services/netns_hook/network_hooks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/netns_hook/netns.h"
#include "services/netns_hook/test_support.h"

namespace berth::netns_hook {
namespace {

namespace nv1 = ::berth::network::v1;
using ::berth::netns_hook::testing::Count;
using ::berth::netns_hook::testing::Describe;
using ::berth::netns_hook::testing::Footprint;
using ::berth::netns_hook::testing::ListenerGotPing;
using ::berth::netns_hook::testing::ListenIn;
using ::berth::netns_hook::testing::Output;
using ::berth::netns_hook::testing::Ping;
using ::berth::testing::PathExists;
using ::berth::testing::ShortTempDir;
using ::testing::HasSubstr;

// An IPv4 address without its prefix: "10.1.2.3/24" -> "10.1.2.3".
std::string Ip(const std::string& cidr) {
  return cidr.substr(0, cidr.find('/'));
}

class NetworkHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, CNI)";
    if (!PathExists("/usr/lib/cni/bridge")) {
      GTEST_SKIP() << "no CNI plugins in /usr/lib/cni "
                      "(containernetworking-plugins; tools/dev installs it)";
    }
    static int counter = 0;
    ++counter;
    tag_ = absl::StrCat("t", getpid() % 100000, "x", counter);
    plugins_ = temp_.Join("plugins");
    options_ = berth::netns_hook::testing::TestOptions(
        temp_.path(), tag_, (getpid() + counter) % 200, plugins_, &gateway_);
  }

  void TearDown() override {
    if (options_.bridge_name.empty()) return;
    hooks_.reset();
    Output(absl::StrCat("ip link del ", options_.bridge_name, " 2>/dev/null"));
    // Prepare bound the namespace directory to itself.
    umount2(options_.netns_dir.c_str(), MNT_DETACH);
    // Anything left would be reported by the tests' own footprints.
  }

  absl::Status StartHooks() {
    absl::StatusOr<std::unique_ptr<LinuxNetworkHooks>> hooks =
        LinuxNetworkHooks::Start(options_);
    if (!hooks.ok()) return hooks.status();
    hooks_ = *std::move(hooks);
    return absl::OkStatus();
  }

  Footprint Count() { return berth::netns_hook::testing::Count(options_); }

  // A CNI plugin of the test: a shell script `body`.
  void WritePlugin(const std::string& type, const std::string& body) {
    berth::netns_hook::testing::WritePlugin(plugins_, type, body);
  }

  // A network: the default bridge plugin's config followed by a plugin of
  // type `extra_type`.
  void WriteNetwork(const std::string& name, const std::string& extra_type) {
    LinuxNetworkHooksOptions copy = options_;
    copy.bridge_network = name;
    nlohmann::json conflist =
        nlohmann::json::parse(LinuxNetworkHooks::DefaultBridgeConflist(copy));
    nlohmann::json plugins = nlohmann::json::array();
    plugins.push_back(conflist["plugins"][0]);
    plugins.push_back({{"type", extra_type}});
    conflist["plugins"] = plugins;
    std::ofstream(absl::StrCat(options_.cni_config_dir, "/", name, ".conflist"))
        << conflist.dump(2);
  }

  nv1::PrerunRequest Request(const std::string& id, nv1::NetworkMode mode) {
    nv1::PrerunRequest request;
    request.set_allocation_id(id);
    request.set_mode(mode);
    return request;
  }

  ShortTempDir temp_;
  std::string tag_;
  std::string gateway_;
  std::string plugins_;
  LinuxNetworkHooksOptions options_;
  std::unique_ptr<LinuxNetworkHooks> hooks_;
};

TEST_F(NetworkHooksTest, NoneHasAWorkingLoopbackAndPostrunIsIdempotent) {
  ASSERT_TRUE(StartHooks().ok());
  absl::StatusOr<nv1::PrerunResponse> prerun =
      hooks_->Prerun(Request("none1", nv1::NETWORK_MODE_NONE));
  ASSERT_TRUE(prerun.ok()) << prerun.status();
  const std::string path = prerun->status().namespace_path();
  EXPECT_EQ(path,
            absl::StrCat(options_.netns_dir, "/", options_.prefix, "none1"));
  EXPECT_TRUE(prerun->created());
  const pid_t listener = ListenIn(path, "127.0.0.1", 7000);
  ASSERT_GT(listener, 0);
  absl::StatusOr<int> pinged =
      RunInNamespace(path, [] { return Ping("127.0.0.1", 7000) ? 0 : 1; });
  ASSERT_TRUE(pinged.ok()) << pinged.status();
  EXPECT_EQ(*pinged, 0);
  EXPECT_TRUE(ListenerGotPing(listener));

  EXPECT_TRUE(hooks_->Postrun("none1").ok());
  EXPECT_FALSE(PathExists(path));
  EXPECT_TRUE(hooks_->Postrun("none1").ok());
  EXPECT_TRUE(hooks_->Postrun("never-made").ok());
  EXPECT_EQ(Count(), Footprint());
}

TEST_F(NetworkHooksTest, HostModeMakesNothing) {
  ASSERT_TRUE(StartHooks().ok());
  absl::StatusOr<nv1::PrerunResponse> prerun =
      hooks_->Prerun(Request("host1", nv1::NETWORK_MODE_HOST));
  ASSERT_TRUE(prerun.ok()) << prerun.status();
  EXPECT_EQ(prerun->status().namespace_path(), "");
  EXPECT_EQ(Count(), Footprint());
  absl::StatusOr<std::vector<nv1::NetworkStatus>> list = hooks_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].mode(), nv1::NETWORK_MODE_HOST);
  EXPECT_TRUE(hooks_->Postrun("host1").ok());
  EXPECT_TRUE(hooks_->List()->empty());
}

TEST_F(NetworkHooksTest, TwoBridgeAllocationsReachEachOther) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  absl::StatusOr<nv1::PrerunResponse> a =
      hooks_->Prerun(Request("a", nv1::NETWORK_MODE_BRIDGE));
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<nv1::PrerunResponse> b =
      hooks_->Prerun(Request("b", nv1::NETWORK_MODE_BRIDGE));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->status().addresses_size(), 1);
  ASSERT_EQ(b->status().addresses_size(), 1);
  EXPECT_EQ(a->status().interface_name(), "eth0");
  EXPECT_EQ(a->status().addresses(0).gateway(), gateway_);
  EXPECT_EQ(a->status().cni_network(), options_.bridge_network);
  const std::string b_ip = Ip(b->status().addresses(0).cidr());
  EXPECT_NE(Ip(a->status().addresses(0).cidr()), b_ip);
  EXPECT_EQ(Count().veths, before.veths + 2);
  EXPECT_EQ(Count().leases, before.leases + 2);

  const pid_t listener = ListenIn(b->status().namespace_path(), b_ip, 7001);
  ASSERT_GT(listener, 0);
  absl::StatusOr<int> pinged = RunInNamespace(
      a->status().namespace_path(), [&] { return Ping(b_ip, 7001) ? 0 : 1; });
  ASSERT_TRUE(pinged.ok()) << pinged.status();
  EXPECT_EQ(*pinged, 0) << "a could not reach b at " << b_ip;
  EXPECT_TRUE(ListenerGotPing(listener));

  ASSERT_TRUE(hooks_->Postrun("a").ok());
  ASSERT_TRUE(hooks_->Postrun("b").ok());
  EXPECT_EQ(Count(), before) << Describe(options_);
}

TEST_F(NetworkHooksTest, PrerunTwiceMakesNothingTwice) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  nv1::PrerunRequest request = Request("twice", nv1::NETWORK_MODE_BRIDGE);
  absl::StatusOr<nv1::PrerunResponse> first = hooks_->Prerun(request);
  ASSERT_TRUE(first.ok()) << first.status();
  const Footprint once = Count();
  absl::StatusOr<nv1::PrerunResponse> second = hooks_->Prerun(request);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(first->created());
  EXPECT_FALSE(second->created());
  EXPECT_EQ(first->status().DebugString(), second->status().DebugString());
  EXPECT_EQ(Count(), once);
  // Another mode for the same allocation is refused, naming it.
  absl::StatusOr<nv1::PrerunResponse> other =
      hooks_->Prerun(Request("twice", nv1::NETWORK_MODE_NONE));
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  ASSERT_TRUE(hooks_->Postrun("twice").ok());
  ASSERT_TRUE(hooks_->Postrun("twice").ok());
  EXPECT_EQ(Count(), before) << Describe(options_);
}

TEST_F(NetworkHooksTest, APortMappingReachesAListenerInTheNamespace) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  nv1::PrerunRequest request = Request("ports", nv1::NETWORK_MODE_BRIDGE);
  nv1::PortMapping* mapping = request.add_port_mappings();
  mapping->set_label("http");
  mapping->set_host_port(18000 + getpid() % 1000);
  mapping->set_container_port(8080);
  mapping->set_protocol(nv1::PROTOCOL_TCP);
  absl::StatusOr<nv1::PrerunResponse> prerun = hooks_->Prerun(request);
  ASSERT_TRUE(prerun.ok()) << prerun.status();
  EXPECT_EQ(prerun->status().port_mappings_size(), 1);
  EXPECT_GT(Count().rules, before.rules);
  const pid_t listener =
      ListenIn(prerun->status().namespace_path(), "0.0.0.0", 8080);
  ASSERT_GT(listener, 0);
  // From the host, to the bridge's own address: DNAT into the namespace.
  EXPECT_TRUE(Ping(gateway_, static_cast<int>(mapping->host_port())));
  EXPECT_TRUE(ListenerGotPing(listener));
  ASSERT_TRUE(hooks_->Postrun("ports").ok());
  EXPECT_EQ(Count(), before) << Describe(options_);
}

TEST_F(NetworkHooksTest, AFailingPluginIsNamedAndLeavesNothing) {
  WritePlugin("berth-test-fail",
              "cat >/dev/null\n"
              "echo '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"no "
              "luck\",\"details\":\"the test plugin always fails ADD\"}'\n"
              "[ \"$CNI_COMMAND\" = ADD ] && exit 1\nexit 0\n");
  ASSERT_TRUE(StartHooks().ok());
  const std::string network = absl::StrCat("broken-", tag_);
  WriteNetwork(network, "berth-test-fail");
  const Footprint before = Count();
  nv1::PrerunRequest request = Request("fails", nv1::NETWORK_MODE_CNI);
  request.set_cni_network(network);
  absl::StatusOr<nv1::PrerunResponse> prerun = hooks_->Prerun(request);
  EXPECT_TRUE(absl::IsFailedPrecondition(prerun.status())) << prerun.status();
  EXPECT_THAT(prerun.status().message(), HasSubstr("berth-test-fail"));
  EXPECT_THAT(prerun.status().message(), HasSubstr("no luck"));
  EXPECT_THAT(prerun.status().message(), HasSubstr("allocation fails"));
  // The bridge plugin had run: its veth, lease and rules are gone again.
  EXPECT_EQ(Count(), before) << Describe(options_);
  EXPECT_TRUE(hooks_->List()->empty());
}

TEST_F(NetworkHooksTest, AMissingPluginNamesThePathsSearched) {
  ASSERT_TRUE(StartHooks().ok());
  const std::string network = absl::StrCat("missing-", tag_);
  WriteNetwork(network, "berth-no-such-plugin");
  const Footprint before = Count();
  nv1::PrerunRequest request = Request("missing", nv1::NETWORK_MODE_CNI);
  request.set_cni_network(network);
  absl::StatusOr<nv1::PrerunResponse> prerun = hooks_->Prerun(request);
  EXPECT_TRUE(absl::IsFailedPrecondition(prerun.status())) << prerun.status();
  EXPECT_THAT(prerun.status().message(), HasSubstr("berth-no-such-plugin"));
  EXPECT_THAT(prerun.status().message(), HasSubstr(plugins_));
  EXPECT_THAT(prerun.status().message(), HasSubstr("/usr/lib/cni"));
  EXPECT_EQ(Count(), before) << Describe(options_);

  request.set_cni_network("no-such-network");
  EXPECT_TRUE(absl::IsInvalidArgument(hooks_->Prerun(request).status()));
}

TEST_F(NetworkHooksTest, PrerunsOfDifferentAllocationsRunAtOnce) {
  // Each ADD waits until the other allocation's ADD has started: serialized
  // Preruns would time out here.
  const std::string rendezvous = temp_.Join("rendezvous");
  mkdir(rendezvous.c_str(), 0755);
  WritePlugin("berth-test-meet",
              absl::StrCat(
                  "in=$(cat)\n"
                  "if [ \"$CNI_COMMAND\" = ADD ]; then\n"
                  "  touch ",
                  rendezvous,
                  "/$CNI_CONTAINERID\n"
                  "  for i in $(seq 100); do\n"
                  "    [ $(ls ",
                  rendezvous,
                  " | wc -l) -ge 2 ] && break\n"
                  "    sleep 0.1\n"
                  "  done\n"
                  "  [ $(ls ",
                  rendezvous,
                  " | wc -l) -ge 2 ] || { echo "
                  "'{\"code\":11,\"msg\":\"the other Prerun never started\"}'; "
                  "exit 1; }\n"
                  "fi\n"
                  // A chained plugin passes its prevResult on.
                  "printf '%s' \"$in\" | /usr/bin/python3 -c 'import "
                  "json,sys; d=json.load(sys.stdin); "
                  "print(json.dumps(d.get(\"prevResult\", "
                  "{\"cniVersion\": d[\"cniVersion\"]})))'\n"));
  ASSERT_TRUE(StartHooks().ok());
  const std::string network = absl::StrCat("meet-", tag_);
  WriteNetwork(network, "berth-test-meet");
  absl::Status status_a, status_b;
  std::thread a([&] {
    nv1::PrerunRequest request = Request("meet-a", nv1::NETWORK_MODE_CNI);
    request.set_cni_network(network);
    status_a = hooks_->Prerun(request).status();
  });
  std::thread b([&] {
    nv1::PrerunRequest request = Request("meet-b", nv1::NETWORK_MODE_CNI);
    request.set_cni_network(network);
    status_b = hooks_->Prerun(request).status();
  });
  a.join();
  b.join();
  EXPECT_TRUE(status_a.ok()) << status_a;
  EXPECT_TRUE(status_b.ok()) << status_b;
  EXPECT_TRUE(hooks_->Postrun("meet-a").ok());
  EXPECT_TRUE(hooks_->Postrun("meet-b").ok());
}

TEST_F(NetworkHooksTest, StartRemovesWhatBelongsToNoAllocation) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  nv1::PrerunRequest request = Request("orphan", nv1::NETWORK_MODE_BRIDGE);
  request.add_port_mappings()->set_host_port(19000 + getpid() % 1000);
  request.mutable_port_mappings(0)->set_container_port(80);
  ASSERT_TRUE(hooks_->Prerun(request).ok());
  ASSERT_TRUE(hooks_->Prerun(Request("kept", nv1::NETWORK_MODE_BRIDGE)).ok());
  const Footprint with_two = Count();
  // The orphan's record vanishes, as if its allocation ended while the
  // service was down and its state was lost.
  hooks_.reset();
  ASSERT_EQ(
      unlink(
          absl::StrCat(options_.state_dir, "/allocations/orphan.json").c_str()),
      0);
  ASSERT_TRUE(StartHooks().ok());
  EXPECT_THAT(hooks_->reconciled(), ::testing::Contains(HasSubstr("orphan")));
  const Footprint after = Count();
  EXPECT_EQ(after.namespaces, with_two.namespaces - 1);
  EXPECT_EQ(after.veths, with_two.veths - 1);
  EXPECT_EQ(after.leases, with_two.leases - 1);
  EXPECT_LT(after.rules, with_two.rules);
  // The kept allocation is untouched and still known.
  absl::StatusOr<nv1::PrerunResponse> kept =
      hooks_->Prerun(Request("kept", nv1::NETWORK_MODE_BRIDGE));
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->created());
  ASSERT_TRUE(hooks_->Postrun("kept").ok());
  EXPECT_EQ(Count(), before) << Describe(options_);
}

// The firewall plugin's per-address rules in CNI-FORWARD of `ip` (they
// carry no container id).
std::vector<std::string> ForwardRulesOf(const std::string& ip) {
  std::vector<std::string> found;
  for (absl::string_view line :
       absl::StrSplit(Output("iptables-save -t filter 2>/dev/null"), '\n')) {
    if (absl::StartsWith(line, "-A CNI-FORWARD ") &&
        absl::StrContains(line, absl::StrCat(" ", ip, "/32 "))) {
      found.emplace_back(line);
    }
  }
  return found;
}

// berth-netns killed during the CNI ADD: its record says the ADD was begun
// (cni_added) but holds no result. The next start's teardown rebuilds the
// result from the container's leases, so that the firewall plugin's DEL
// removes its rules of the address (a DEL without a result left them, found
// by tools/chaos).
TEST_F(NetworkHooksTest, AnAddInterruptedBeforeItsResultLeavesNoFirewallRule) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  absl::StatusOr<nv1::PrerunResponse> made =
      hooks_->Prerun(Request("cut", nv1::NETWORK_MODE_BRIDGE));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_GT(made->status().addresses_size(), 0);
  const std::string ip = Ip(made->status().addresses(0).cidr());
  ASSERT_FALSE(ForwardRulesOf(ip).empty())
      << "the firewall plugin made no CNI-FORWARD rule of " << ip;
  hooks_.reset();
  // The record as a kill between the ADD's start and its end leaves it.
  const std::string path =
      absl::StrCat(options_.state_dir, "/allocations/cut.json");
  std::ifstream in(path);
  nlohmann::json record = nlohmann::json::parse(in);
  in.close();
  ASSERT_TRUE(record["cni_added"].get<bool>());
  record["phase"] = "creating";
  record["cni_result"] = nullptr;
  std::ofstream(path) << record.dump();

  ASSERT_TRUE(StartHooks().ok());
  EXPECT_THAT(hooks_->reconciled(), ::testing::Contains(HasSubstr("cut")));
  EXPECT_THAT(ForwardRulesOf(ip), ::testing::IsEmpty());
  EXPECT_EQ(Count(), before) << Describe(options_);
  // Made again under the same allocation id, and removed: nothing left.
  ASSERT_TRUE(hooks_->Prerun(Request("cut", nv1::NETWORK_MODE_BRIDGE)).ok());
  ASSERT_TRUE(hooks_->Postrun("cut").ok());
  EXPECT_THAT(ForwardRulesOf(ip), ::testing::IsEmpty());
  EXPECT_EQ(Count(), before) << Describe(options_);
}

// A configuration list whose "ipam" is not an object (or holds a type or
// dataDir of the wrong type) made berth-netns throw while reconciling at
// every start: a crash loop. It is skipped; the service starts and works.
TEST_F(NetworkHooksTest, StartSurvivesMalformedIpamInAConfigurationList) {
  ASSERT_EQ(mkdir(options_.cni_config_dir.c_str(), 0755), 0)
      << options_.cni_config_dir;
  const std::vector<std::string> ipams = {
      R"("host-local")", R"(["host-local"])", R"({"type": 7})",
      R"({"type": "host-local", "dataDir": 7})"};
  for (size_t i = 0; i < ipams.size(); ++i) {
    std::ofstream(
        absl::StrCat(options_.cni_config_dir, "/", i, "-bad", ".conflist"))
        << absl::StrCat(R"({"cniVersion": "1.0.0", "name": "bad)", i,
                        R"(", "plugins": [{"type": "bridge", "ipam": )",
                        ipams[i], "}]}");
  }
  absl::Status started = StartHooks();
  ASSERT_TRUE(started.ok()) << started;
  const Footprint before = Count();
  ASSERT_TRUE(hooks_->Prerun(Request("a", nv1::NETWORK_MODE_BRIDGE)).ok());
  ASSERT_TRUE(hooks_->Postrun("a").ok());
  // Started again over the same lists: the reconcile reads them again.
  hooks_.reset();
  started = StartHooks();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(Count(), before) << Describe(options_);
}

TEST_F(NetworkHooksTest, TwoHundredCyclesLeaveNothing) {
  ASSERT_TRUE(StartHooks().ok());
  const Footprint before = Count();
  for (int i = 0; i < 200; ++i) {
    const std::string id = absl::StrCat("cycle", i % 7);
    nv1::PrerunRequest request = Request(
        id, i % 3 == 0 ? nv1::NETWORK_MODE_NONE : nv1::NETWORK_MODE_BRIDGE);
    if (i % 3 == 2) {
      nv1::PortMapping* mapping = request.add_port_mappings();
      mapping->set_host_port(20000 + i);
      mapping->set_container_port(80);
    }
    absl::StatusOr<nv1::PrerunResponse> prerun = hooks_->Prerun(request);
    ASSERT_TRUE(prerun.ok()) << "cycle " << i << ": " << prerun.status();
    ASSERT_TRUE(hooks_->Postrun(id).ok()) << "cycle " << i;
  }
  EXPECT_EQ(Count(), before) << Describe(options_);
}

}  // namespace
}  // namespace berth::netns_hook
