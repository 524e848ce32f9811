// The berth-netns binary over gRPC (root, real namespaces and CNI plugins):
// Prerun and Postrun through the socket, state kept across a restart, and a
// kill -9 in the middle of a Prerun followed by a restart leaving nothing.

#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "berth/network/v1/network.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "services/common/dial.h"
#include "services/common/peer_test_util.h"
#include "services/common/test_util.h"
#include "services/netns_hook/test_support.h"

extern char** environ;

namespace berth::netns_hook {
namespace {

namespace nv1 = ::berth::network::v1;
using ::berth::netns_hook::testing::Count;
using ::berth::netns_hook::testing::Footprint;
using ::berth::netns_hook::testing::Output;
using ::berth::netns_hook::testing::WritePlugin;
using ::berth::testing::FileMode;
using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;

class BerthNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, CNI)";
    if (!PathExists("/usr/lib/cni/bridge")) {
      GTEST_SKIP() << "no CNI plugins in /usr/lib/cni";
    }
    tag_ = absl::StrCat("s", getpid() % 100000);
    plugins_ = temp_.Join("plugins");
    options_ = testing::TestOptions(temp_.path(), tag_, 200 + getpid() % 50,
                                    plugins_, nullptr);
    runtime_ = temp_.Join("run");
  }

  void TearDown() override {
    Stop(SIGKILL);
    Output(absl::StrCat("ip link del ", options_.bridge_name, " 2>/dev/null"));
    umount2(options_.netns_dir.c_str(), MNT_DETACH);
  }

  // Starts berth-netns on the test's directories and waits for its socket.
  void Start() {
    const std::string binary = RunfilePath("services/netns_hook/berth-netns");
    std::vector<std::string> args = {
        binary,
        "--runtime_dir=" + runtime_,
        // The binary adds /netns to it.
        "--state_dir=" +
            std::string(absl::StripSuffix(options_.state_dir, "/state")) +
            "/root",
        "--netns_dir=" + options_.netns_dir,
        "--namespace_prefix=" + options_.prefix,
        "--cni_config_dir=" + options_.cni_config_dir,
        "--cni_path=" + plugins_ + ":/usr/lib/cni",
        "--bridge_network=" + options_.bridge_network,
        "--bridge_name=" + options_.bridge_name,
        "--bridge_subnet=" + options_.bridge_subnet,
    };
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(),
                          environ),
              0);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(runtime_ + "/netns.sock", absl::Seconds(30));
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = nv1::NetworkService::NewStub(*channel);
  }

  // Stops it with `signal`; the exit status.
  int Stop(int signal) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    stub_.reset();
    return status;
  }

  grpc::Status Prerun(const nv1::PrerunRequest& request,
                      nv1::PrerunResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    return stub_->Prerun(&context, request, response);
  }

  grpc::Status Postrun(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    nv1::PostrunRequest request;
    request.set_allocation_id(id);
    nv1::PostrunResponse response;
    return stub_->Postrun(&context, request, &response);
  }

  // The state directory as the binary uses it.
  LinuxNetworkHooksOptions BinaryOptions() const {
    LinuxNetworkHooksOptions options = options_;
    options.state_dir =
        std::string(absl::StripSuffix(options_.state_dir, "/state")) +
        "/root/netns";
    return options;
  }

  ShortTempDir temp_;
  std::string tag_;
  std::string plugins_;
  std::string runtime_;
  LinuxNetworkHooksOptions options_;
  pid_t pid_ = -1;
  std::unique_ptr<nv1::NetworkService::Stub> stub_;
};

TEST_F(BerthNetnsTest, ServesPrerunAndPostrunAndKeepsStateAcrossARestart) {
  Start();
  const Footprint before = Count(BinaryOptions());
  nv1::PrerunRequest request;
  request.set_allocation_id("svc1");
  request.set_mode(nv1::NETWORK_MODE_BRIDGE);
  nv1::PrerunResponse first;
  ASSERT_TRUE(Prerun(request, &first).ok());
  EXPECT_TRUE(first.created());
  ASSERT_EQ(first.status().addresses_size(), 1);
  EXPECT_TRUE(PathExists(first.status().namespace_path()));
  // The default network was written on first start.
  EXPECT_TRUE(PathExists(absl::StrCat(options_.cni_config_dir, "/",
                                      options_.bridge_network, ".conflist")));

  EXPECT_EQ(WEXITSTATUS(Stop(SIGTERM)), 0);
  Start();
  nv1::PrerunResponse again;
  ASSERT_TRUE(Prerun(request, &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.status().addresses(0).cidr(),
            first.status().addresses(0).cidr());

  grpc::ClientContext context;
  nv1::ListNetworksResponse list;
  ASSERT_TRUE(
      stub_->ListNetworks(&context, nv1::ListNetworksRequest(), &list).ok());
  ASSERT_EQ(list.networks_size(), 1);
  EXPECT_EQ(list.networks(0).allocation_id(), "svc1");

  ASSERT_TRUE(Postrun("svc1").ok());
  ASSERT_TRUE(Postrun("svc1").ok());
  EXPECT_EQ(Count(BinaryOptions()), before);

  request.set_allocation_id("bad/id");
  nv1::PrerunResponse refused;
  grpc::Status status = Prerun(request, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("allocation_id"));
}

// netns.sock is root's (and berth-netns' own uid's): 0600, and a caller of
// another uid past the file's permissions is refused, its Prerun never run.
TEST_F(BerthNetnsTest, RefusesCallersOfOtherUids) {
  Start();
  const std::string socket = runtime_ + "/netns.sock";
  EXPECT_EQ(FileMode(socket), 0600);
  {
    absl::StatusOr<base::UniqueFd> fd =
        berth::testing::ConnectAs(socket, berth::testing::Caller{});
    ASSERT_TRUE(fd.ok()) << fd.status();
    std::unique_ptr<nv1::NetworkService::Stub> other =
        nv1::NetworkService::NewStub(
            berth::testing::ChannelOverConnection(*std::move(fd)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    nv1::PrerunRequest request;
    request.set_allocation_id("intruder");
    request.set_mode(nv1::NETWORK_MODE_NONE);
    nv1::PrerunResponse response;
    grpc::Status status = other->Prerun(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << status.error_message();
    EXPECT_THAT(status.error_message(),
                ::testing::HasSubstr("uid 65534 may not call " + socket));
  }
  grpc::ClientContext context;
  nv1::ListNetworksResponse list;
  ASSERT_TRUE(
      stub_->ListNetworks(&context, nv1::ListNetworksRequest(), &list).ok());
  EXPECT_EQ(list.networks_size(), 0);
  EXPECT_EQ(WEXITSTATUS(Stop(SIGTERM)), 0);
}

TEST_F(BerthNetnsTest, KillDashNineMidPrerunThenRestartLeavesNothing) {
  // A plugin after the bridge that says it started, then hangs: the service
  // is killed while the bridge's veth, lease and rules exist.
  const std::string marker = temp_.Join("slow-started");
  WritePlugin(plugins_, "berth-test-slow",
              absl::StrCat("cat >/dev/null\n"
                           "if [ \"$CNI_COMMAND\" = ADD ]; then\n"
                           "  echo $$ > ",
                           marker,
                           "\n  sleep 60\nfi\n"
                           "echo '{\"cniVersion\":\"1.0.0\"}'\n"));
  Start();
  const LinuxNetworkHooksOptions binary_options = BinaryOptions();
  const Footprint before = Count(binary_options);
  const std::string network = absl::StrCat("slow-", tag_);
  {
    // The bridge plugin of the default network, then the slow one.
    const std::string conflist = ReadFileOrEmpty(absl::StrCat(
        options_.cni_config_dir, "/", options_.bridge_network, ".conflist"));
    nlohmann::json parsed = nlohmann::json::parse(conflist);
    parsed["name"] = network;
    nlohmann::json plugins = nlohmann::json::array();
    plugins.push_back(parsed["plugins"][0]);
    plugins.push_back({{"type", "berth-test-slow"}});
    parsed["plugins"] = plugins;
    std::ofstream(
        absl::StrCat(options_.cni_config_dir, "/", network, ".conflist"))
        << parsed.dump(2);
  }
  nv1::PrerunRequest request;
  request.set_allocation_id("crash1");
  request.set_mode(nv1::NETWORK_MODE_CNI);
  request.set_cni_network(network);
  grpc::Status prerun_status;
  std::thread caller([&] {
    nv1::PrerunResponse response;
    prerun_status = Prerun(request, &response);
  });
  ASSERT_TRUE(WaitFor([&] { return PathExists(marker); }, absl::Seconds(30)));
  // Half made: namespace, veth, lease and masquerade rules of the bridge.
  const Footprint half = Count(binary_options);
  EXPECT_EQ(half.namespaces, before.namespaces + 1);
  EXPECT_EQ(half.veths, before.veths + 1);
  EXPECT_EQ(half.leases, before.leases + 1);
  EXPECT_GT(half.rules, before.rules);
  Stop(SIGKILL);
  caller.join();
  EXPECT_FALSE(prerun_status.ok());
  // The slow plugin outlives the service; it is the test's to stop.
  const std::string plugin_pid = ReadFileOrEmpty(marker);
  if (!plugin_pid.empty()) kill(std::stoi(plugin_pid), SIGKILL);

  Start();  // reconciles
  EXPECT_EQ(Count(binary_options), before);
  nv1::PrerunResponse response;
  // The allocation can be made again afterwards (with the default network).
  request.set_mode(nv1::NETWORK_MODE_BRIDGE);
  request.clear_cni_network();
  ASSERT_TRUE(Prerun(request, &response).ok());
  ASSERT_TRUE(Postrun("crash1").ok());
  EXPECT_EQ(Count(binary_options), before);
}

}  // namespace
}  // namespace berth::netns_hook
