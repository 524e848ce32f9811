// CniRunner with fake plugins: shell scripts, written by the test into
// temporary plugin directories, that record their stdin, environment and
// file descriptors and print canned results and errors.

#include "services/netns_hook/cni_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/network/v1/network.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/netns_hook/cni_config.h"

namespace berth {
namespace netns_hook {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::ReadFileOrEmpty;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using json = nlohmann::json;
namespace nv1 = ::berth::network::v1;

void WriteFile(const std::string& path, const std::string& content,
               mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << path;
  }
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

json ReadJson(const std::string& path) {
  const std::string content = ReadFileOrEmpty(path);
  EXPECT_FALSE(content.empty()) << path << " is missing or empty";
  return json::parse(content, nullptr, /*allow_exceptions=*/false);
}

// The result a fake plugin of type `type` prints on ADD.
json ResultOf(const std::string& type, int n) {
  return {
      {"cniVersion", "1.0.0"},
      {"interfaces", {{{"name", "eth0"}, {"sandbox", "/var/run/netns/test"}}}},
      {"ips",
       {{{"address", absl::StrCat("10.0.0.", n, "/24")},
         {"gateway", "10.0.0.1"},
         {"interface", 0}}}},
      {"from", type}};
}

bool ProcessRunning(int pid) {
  const std::string stat =
      ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         stat[paren + 2] != 'Z' && stat[paren + 2] != 'X';
}

class CniTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* sub : {"plugins", "more-plugins", "log", "conf"}) {
      ASSERT_EQ(mkdir(dir_.Join(sub).c_str(), 0755), 0) << sub;
    }
  }

  std::string PluginDir() const { return dir_.Join("plugins"); }
  std::string MorePluginDir() const { return dir_.Join("more-plugins"); }
  std::string Log(absl::string_view name) const {
    return dir_.Join(absl::StrCat("log/", name));
  }

  CniRunner Runner(absl::Duration timeout = absl::Seconds(30)) const {
    return CniRunner({PluginDir(), MorePluginDir()}, timeout);
  }

  // A fake plugin: records "<type> <command>" in log/calls, its stdin in
  // log/<type>.<command>.stdin and its environment in
  // log/<type>.<command>.env; then runs `before` (which may print and exit);
  // then prints ResultOf(type, n) on ADD and exits 0.
  void WritePlugin(const std::string& type, int n,
                   const std::string& before = "",
                   const std::string& dir = "") {
    const std::string script = absl::StrCat(
        "#!/bin/sh\n", "log='", dir_.Join("log"), "'\n", "t='", type, "'\n",
        "echo \"$t $CNI_COMMAND\" >> \"$log/calls\"\n",
        "cat > \"$log/$t.$CNI_COMMAND.stdin\"\n",
        "env > \"$log/$t.$CNI_COMMAND.env\"\n", before, "\n",
        "if [ \"$CNI_COMMAND\" = ADD ]; then\n", "cat <<'RESULT'\n",
        ResultOf(type, n).dump(2), "\nRESULT\n", "fi\n", "exit 0\n");
    WriteFile(absl::StrCat(dir.empty() ? PluginDir() : dir, "/", type), script,
              0755);
  }

  // The network "testnet" of `plugins`.
  static CniNetwork Network(const json& plugins,
                            const std::string& version = "1.0.0") {
    json list = {
        {"cniVersion", version}, {"name", "testnet"}, {"plugins", plugins}};
    absl::StatusOr<CniNetwork> network = NetworkFromJson(list, "test");
    EXPECT_TRUE(network.ok()) << network.status();
    return network.ok() ? *network : CniNetwork{};
  }

  // alpha (portMappings), beta (none), gamma (bandwidth, dns; portMappings
  // declared false).
  CniNetwork ThreePlugins(const std::string& version = "1.0.0") {
    WritePlugin("alpha", 1);
    WritePlugin("beta", 2);
    WritePlugin("gamma", 3);
    return Network(
        {{{"type", "alpha"},
          {"name", "ignored"},
          {"cniVersion", "0.0.1"},
          {"own", "a"},
          {"capabilities", {{"portMappings", true}}}},
         {{"type", "beta"}, {"prevResult", {{"stale", true}}}},
         {{"type", "gamma"},
          {"capabilities",
           {{"portMappings", false}, {"bandwidth", true}, {"dns", true}}}}},
        version);
  }

  static CniRuntime Runtime() {
    CniRuntime runtime;
    runtime.container_id = "alloc-1234";
    runtime.netns_path = "/var/run/netns/berth-alloc-1234";
    runtime.ifname = "eth0";
    nv1::PortMapping http;
    http.set_label("http");
    http.set_host_port(8080);
    http.set_container_port(80);
    http.set_protocol(nv1::PROTOCOL_TCP);
    http.set_host_ip("127.0.0.1");
    nv1::PortMapping dns;
    dns.set_label("dns");
    dns.set_host_port(5353);
    dns.set_container_port(53);
    dns.set_protocol(nv1::PROTOCOL_UDP);
    runtime.port_mappings = {http, dns};
    runtime.capability_args["bandwidth"] = {{"ingressRate", 1000}};
    return runtime;
  }

  std::string Calls() const { return ReadFileOrEmpty(Log("calls")); }

  // The environment a plugin recorded, as name → value.
  std::map<std::string, std::string> Env(const std::string& type,
                                         const std::string& command) const {
    std::map<std::string, std::string> env;
    for (absl::string_view line : absl::StrSplit(
             ReadFileOrEmpty(Log(absl::StrCat(type, ".", command, ".env"))),
             '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv =
          absl::StrSplit(line, absl::MaxSplits('=', 1));
      env[kv.first] = kv.second;
    }
    return env;
  }

  json Stdin(const std::string& type, const std::string& command) const {
    return ReadJson(Log(absl::StrCat(type, ".", command, ".stdin")));
  }

  ShortTempDir dir_;
};

// --- ADD.

TEST_F(CniTest, AddGivesEachPluginItsOwnConfigAndChainsPrevResult) {
  const CniNetwork network = ThreePlugins();
  absl::StatusOr<CniResult> result = Runner().Add(network, Runtime());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Calls(), "alpha ADD\nbeta ADD\ngamma ADD\n");

  // alpha: its own object, the list's name and version, no prevResult, and
  // the port mappings it declared.
  const json alpha = Stdin("alpha", "ADD");
  EXPECT_EQ(alpha["type"], "alpha");
  EXPECT_EQ(alpha["own"], "a");
  EXPECT_EQ(alpha["name"], "testnet");
  EXPECT_EQ(alpha["cniVersion"], "1.0.0");
  EXPECT_FALSE(alpha.contains("prevResult"));
  EXPECT_EQ(alpha["capabilities"], json({{"portMappings", true}}));
  EXPECT_EQ(alpha["runtimeConfig"], json::parse(R"({"portMappings": [
      {"hostPort": 8080, "containerPort": 80, "protocol": "tcp",
       "hostIP": "127.0.0.1"},
      {"hostPort": 5353, "containerPort": 53, "protocol": "udp"}]})"));

  // beta: alpha's result as prevResult (its own stale one replaced), and no
  // runtimeConfig: it declares no capability.
  const json beta = Stdin("beta", "ADD");
  EXPECT_EQ(beta["name"], "testnet");
  EXPECT_EQ(beta["cniVersion"], "1.0.0");
  EXPECT_EQ(beta["prevResult"], ResultOf("alpha", 1));
  EXPECT_FALSE(beta.contains("runtimeConfig"));

  // gamma: beta's result; only bandwidth (declared and given), not
  // portMappings (declared false), not dns (declared, not given).
  const json gamma = Stdin("gamma", "ADD");
  EXPECT_EQ(gamma["prevResult"], ResultOf("beta", 2));
  EXPECT_EQ(gamma["runtimeConfig"],
            json({{"bandwidth", {{"ingressRate", 1000}}}}));

  // The last plugin's result.
  EXPECT_EQ(result->raw, ResultOf("gamma", 3));
  EXPECT_EQ(result->interface_name, "eth0");
  ASSERT_EQ(result->addresses.size(), 1);
  EXPECT_EQ(result->addresses[0].cidr, "10.0.0.3/24");
  EXPECT_EQ(result->addresses[0].gateway, "10.0.0.1");
}

TEST_F(CniTest, PluginsGetTheCniEnvironmentAndPathOnlyAndNoFdOfOurs) {
  // Something of ours that must not reach the plugin: an environment
  // variable and a file descriptor without O_CLOEXEC.
  ASSERT_EQ(setenv("BERTH_CNI_TEST_SECRET", "leaked", 1), 0);
  WriteFile(dir_.Join("leak-marker"), "x");
  const int marker = open(dir_.Join("leak-marker").c_str(), O_RDONLY);
  ASSERT_GE(marker, 0);
  WritePlugin("alpha", 1,
              "ls -l /proc/$$/fd > \"$log/$t.$CNI_COMMAND.fds\" 2>&1");
  CniRuntime runtime = Runtime();
  runtime.ifname = "net1";
  runtime.args = {{"K8S_POD_NAME", "web"}, {"IgnoreUnknown", "1"}};
  absl::StatusOr<CniResult> result =
      Runner().Add(Network({{{"type", "alpha"}}}), runtime);
  close(marker);
  unsetenv("BERTH_CNI_TEST_SECRET");
  ASSERT_TRUE(result.ok()) << result.status();

  std::map<std::string, std::string> env = Env("alpha", "ADD");
  // What sh itself adds to what it was given.
  for (const char* shell : {"PWD", "OLDPWD", "SHLVL", "_"}) env.erase(shell);
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"CNI_COMMAND", "ADD"},
                     {"CNI_CONTAINERID", "alloc-1234"},
                     {"CNI_NETNS", "/var/run/netns/berth-alloc-1234"},
                     {"CNI_IFNAME", "net1"},
                     {"CNI_ARGS", "K8S_POD_NAME=web;IgnoreUnknown=1"},
                     {"CNI_PATH", PluginDir() + ":" + MorePluginDir()},
                     {"PATH", kCniPluginPathEnv},
                 }));

  // stdin is a pipe (stdout and stderr are too, but the shell's redirection
  // of this very listing moves them); the marker fd is not there.
  const std::string fds = ReadFileOrEmpty(Log("alpha.ADD.fds"));
  EXPECT_THAT(fds, HasSubstr(" 0 -> pipe:"));
  EXPECT_THAT(fds, Not(HasSubstr("leak-marker")));
}

TEST_F(CniTest, AddStopsAtAPluginErrorAndQuotesItsJsonError) {
  const CniNetwork network = ThreePlugins();
  WritePlugin("beta", 2, R"(if [ "$CNI_COMMAND" = ADD ]; then
  echo '{"cniVersion": "1.0.0", "code": 7, "msg": "invalid bridge name",'
  echo ' "details": "bridge \"br 0\" has a space"}'
  exit 1
fi)");
  absl::StatusOr<CniResult> result = Runner().Add(network, Runtime());
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition)
      << result.status();
  EXPECT_THAT(
      result.status().message(),
      AllOf(HasSubstr("CNI ADD"), HasSubstr("network \"testnet\""),
            HasSubstr("container alloc-1234"), HasSubstr("plugin \"beta\""),
            HasSubstr("invalid bridge name"),
            HasSubstr("bridge \"br 0\" has a space"),
            HasSubstr("CNI error code 7")));
  // Stopped there, and alpha is not undone: that is the caller's Del.
  EXPECT_EQ(Calls(), "alpha ADD\nbeta ADD\n");
}

TEST_F(CniTest, AddQuotesStderrOfAPluginThatExitsWithoutJson) {
  WritePlugin("alpha", 1, R"(echo "boom: no bridge here" >&2; exit 3)");
  absl::StatusOr<CniResult> result =
      Runner().Add(Network({{{"type", "alpha"}}}), Runtime());
  ASSERT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition)
      << result.status();
  EXPECT_THAT(
      result.status().message(),
      AllOf(HasSubstr("plugin \"alpha\""), HasSubstr("CNI ADD"),
            HasSubstr("network \"testnet\""), HasSubstr("exited with code 3"),
            HasSubstr("stderr: \"boom: no bridge here\"")));
}

TEST_F(CniTest, AddSaysWhatIsWrongWithAResult) {
  const CniRunner runner = Runner();
  WritePlugin("alpha", 1, "exit 0");
  absl::StatusOr<CniResult> result =
      runner.Add(Network({{{"type", "alpha"}}}), Runtime());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), AllOf(HasSubstr("plugin \"alpha\""),
                                               HasSubstr("printed no result")));

  WritePlugin("alpha", 1, "echo 'all good'; exit 0");
  result = runner.Add(Network({{{"type", "alpha"}}}), Runtime());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("not JSON"), HasSubstr("\"all good\"")));

  WritePlugin("alpha", 1,
              R"(echo '{"cniVersion": "1.0.0", "ips": [{"address": "x"}]}')"
              "; exit 0");
  result = runner.Add(Network({{{"type", "alpha"}}}), Runtime());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      result.status().message(),
      AllOf(HasSubstr("plugin \"alpha\""), HasSubstr("ips[0].address \"x\"")));
}

TEST_F(CniTest, AHangingPluginIsKilledWithItsChildrenAtTheTimeout) {
  WritePlugin("hang", 1, "sleep 60 & echo $! > \"$log/child\"; wait");
  absl::StatusOr<CniResult> result =
      Runner(absl::Milliseconds(500))
          .Add(Network({{{"type", "hang"}}}), Runtime());
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << result.status();
  EXPECT_THAT(result.status().message(),
              AllOf(HasSubstr("plugin \"hang\""), HasSubstr("CNI ADD"),
                    HasSubstr("network \"testnet\""), HasSubstr("500ms"),
                    HasSubstr("killed")));
  // Its child, which held its stdout, went with it (SIGKILL to the group).
  int child = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::StripAsciiWhitespace(ReadFileOrEmpty(Log("child"))), &child));
  EXPECT_TRUE(WaitFor([child] { return !ProcessRunning(child); }))
      << "the plugin's child " << child << " still runs";
}

TEST_F(CniTest, LargeConfigurationsAndOutputsPassWithoutDeadlock) {
  // A 300 KB configuration (more than a pipe holds), and a plugin that
  // writes 1 MB on stdout and 300 KB on stderr before reading anything.
  const std::string big(300 << 10, 'c');
  WriteFile(
      PluginDir() + "/big",
      absl::StrCat("#!/bin/sh\n", "head -c 307200 /dev/zero | tr '\\0' e >&2\n",
                   "printf '{\"cniVersion\": \"1.0.0\", \"big\": \"'\n",
                   "head -c 1048576 /dev/zero | tr '\\0' o\n", "printf '\"}'\n",
                   "cat > '", Log("big.stdin"), "'\n"),
      0755);
  absl::StatusOr<CniResult> result =
      Runner().Add(Network({{{"type", "big"}, {"payload", big}}}), Runtime());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->raw["big"], std::string(1 << 20, 'o'));
  EXPECT_EQ(ReadJson(Log("big.stdin"))["payload"], big);
}

// --- Finding plugins.

TEST_F(CniTest, AMissingPluginNamesTheDirectoriesSearched) {
  const CniRunner runner = Runner();
  absl::StatusOr<std::string> path = runner.FindPlugin("nosuch");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(path.status().message(),
            absl::StrCat("CNI plugin \"nosuch\" not found in ", PluginDir(),
                         ", ", MorePluginDir()));

  WritePlugin("alpha", 1);
  absl::StatusOr<CniResult> result = runner.Add(
      Network({{{"type", "alpha"}}, {{"type", "nosuch"}}}), Runtime());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      result.status().message(),
      AllOf(HasSubstr("CNI ADD of network \"testnet\""),
            HasSubstr(absl::StrCat("CNI plugin \"nosuch\" not found in ",
                                   PluginDir(), ", ", MorePluginDir()))));
  EXPECT_EQ(Calls(), "alpha ADD\n");
}

TEST_F(CniTest, FindPluginSearchesTheDirectoriesInOrder) {
  WritePlugin("both", 1, "", PluginDir());
  WritePlugin("both", 1, "", MorePluginDir());
  WritePlugin("second", 1, "", MorePluginDir());
  WriteFile(PluginDir() + "/noexec", "#!/bin/sh\n", 0644);
  WritePlugin("noexec", 1, "", MorePluginDir());
  ASSERT_EQ(mkdir((PluginDir() + "/adir").c_str(), 0755), 0);
  const CniRunner runner = Runner();
  EXPECT_EQ(runner.FindPlugin("both").value_or(""), PluginDir() + "/both");
  EXPECT_EQ(runner.FindPlugin("second").value_or(""),
            MorePluginDir() + "/second");
  EXPECT_EQ(runner.FindPlugin("noexec").value_or(""),
            MorePluginDir() + "/noexec");
  EXPECT_EQ(runner.FindPlugin("adir").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runner.FindPlugin("../plugins/both").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.FindPlugin("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- DEL and CHECK.

TEST_F(CniTest, DelRunsInReverseOrderWithPrevResult) {
  const CniNetwork network = ThreePlugins();
  const json cached = ResultOf("gamma", 3);
  ASSERT_TRUE(Runner().Del(network, Runtime(), &cached).ok());
  EXPECT_EQ(Calls(), "gamma DEL\nbeta DEL\nalpha DEL\n");
  for (const char* type : {"alpha", "beta", "gamma"}) {
    const json config = Stdin(type, "DEL");
    EXPECT_EQ(config["prevResult"], cached) << type;
    EXPECT_EQ(config["name"], "testnet") << type;
    EXPECT_EQ(Env(type, "DEL")["CNI_COMMAND"], "DEL") << type;
  }
  // DEL gets the capability arguments as ADD did.
  EXPECT_EQ(Stdin("alpha", "DEL")["runtimeConfig"]["portMappings"].size(), 2);
}

TEST_F(CniTest, DelWithoutACachedResultGivesNoPrevResult) {
  const CniNetwork network = ThreePlugins();
  CniRuntime runtime = Runtime();
  runtime.netns_path = "";  // The namespace is gone: DEL still runs.
  ASSERT_TRUE(Runner().Del(network, runtime, nullptr).ok());
  EXPECT_EQ(Calls(), "gamma DEL\nbeta DEL\nalpha DEL\n");
  for (const char* type : {"alpha", "beta", "gamma"}) {
    EXPECT_FALSE(Stdin(type, "DEL").contains("prevResult")) << type;
    EXPECT_EQ(Env(type, "DEL")["CNI_NETNS"], "") << type;
  }
}

TEST_F(CniTest, DelGivesNoPrevResultBeforeCniVersion040) {
  const CniNetwork network = ThreePlugins("0.3.1");
  const json cached = ResultOf("gamma", 3);
  ASSERT_TRUE(Runner().Del(network, Runtime(), &cached).ok());
  EXPECT_EQ(Calls(), "gamma DEL\nbeta DEL\nalpha DEL\n");
  EXPECT_FALSE(Stdin("alpha", "DEL").contains("prevResult"));
  EXPECT_EQ(Stdin("alpha", "DEL")["cniVersion"], "0.3.1");
}

TEST_F(CniTest, DelKeepsGoingPastFailingAndMissingPlugins) {
  WritePlugin("alpha", 1);
  WritePlugin("beta", 2, R"(if [ "$CNI_COMMAND" = DEL ]; then
  echo '{"code": 11, "msg": "try again later"}'; exit 1
fi)");
  WritePlugin("gamma", 3);
  const CniNetwork network = Network({{{"type", "alpha"}},
                                      {{"type", "nosuch"}},
                                      {{"type", "beta"}},
                                      {{"type", "gamma"}}});
  const json cached = ResultOf("gamma", 3);
  absl::Status status = Runner().Del(network, Runtime(), &cached);
  EXPECT_EQ(Calls(), "gamma DEL\nbeta DEL\nalpha DEL\n");
  // The first error.
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr("CNI DEL"), HasSubstr("plugin \"beta\""),
            HasSubstr("try again later"), HasSubstr("CNI error code 11")));
}

TEST_F(CniTest, CheckRunsInOrderWithPrevResultAndStopsAtAFailure) {
  const CniNetwork network = ThreePlugins();
  const json cached = ResultOf("gamma", 3);
  ASSERT_TRUE(Runner().Check(network, Runtime(), cached).ok());
  EXPECT_EQ(Calls(), "alpha CHECK\nbeta CHECK\ngamma CHECK\n");
  for (const char* type : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(Stdin(type, "CHECK")["prevResult"], cached) << type;
    EXPECT_EQ(Env(type, "CHECK")["CNI_COMMAND"], "CHECK") << type;
  }

  ASSERT_EQ(unlink(Log("calls").c_str()), 0);
  WritePlugin("beta", 2, R"(if [ "$CNI_COMMAND" = CHECK ]; then
  echo '{"code": 999, "msg": "expected rule not found"}'; exit 1
fi)");
  absl::Status status = Runner().Check(network, Runtime(), cached);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("CNI CHECK"), HasSubstr("plugin \"beta\""),
                    HasSubstr("expected rule not found")));
  EXPECT_EQ(Calls(), "alpha CHECK\nbeta CHECK\n");
}

TEST_F(CniTest, CheckRunsNothingWhenDisabledOrBeforeCniVersion040) {
  ThreePlugins();
  const json cached = ResultOf("gamma", 3);
  json list = {{"cniVersion", "1.0.0"},
               {"name", "testnet"},
               {"disableCheck", true},
               {"plugins", {{{"type", "alpha"}}}}};
  absl::StatusOr<CniNetwork> disabled = NetworkFromJson(list, "test");
  ASSERT_TRUE(disabled.ok()) << disabled.status();
  EXPECT_TRUE(Runner().Check(*disabled, Runtime(), cached).ok());

  absl::Status status =
      Runner().Check(ThreePlugins("0.3.1"), Runtime(), cached);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("0.3.1"));
  EXPECT_EQ(Calls(), "");
}

TEST_F(CniTest, ARuntimeTheSpecForbidsRunsNothing) {
  const CniNetwork network = ThreePlugins();
  const CniRunner runner = Runner();
  struct Case {
    const char* field;
    void (*change)(CniRuntime*);
  };
  const Case cases[] = {
      {"container_id", [](CniRuntime* r) { r->container_id = ""; }},
      {"container_id", [](CniRuntime* r) { r->container_id = "-x"; }},
      {"container_id", [](CniRuntime* r) { r->container_id = "a b"; }},
      {"ifname", [](CniRuntime* r) { r->ifname = "much-too-long-name"; }},
      {"ifname", [](CniRuntime* r) { r->ifname = "eth:0"; }},
      {"ifname", [](CniRuntime* r) { r->ifname = ""; }},
      {"netns_path", [](CniRuntime* r) { r->netns_path = ""; }},
      {"args",
       [](CniRuntime* r) {
         r->args = {{"A", "b;c"}};
       }},
      {"args",
       [](CniRuntime* r) {
         r->args = {{"A=B", "c"}};
       }},
      {"host_port",
       [](CniRuntime* r) { r->port_mappings[0].set_host_port(0); }},
      {"container_port",
       [](CniRuntime* r) { r->port_mappings[1].set_container_port(70000); }},
      {"host_ip",
       [](CniRuntime* r) { r->port_mappings[0].set_host_ip("localhost"); }},
      {"portMappings",
       [](CniRuntime* r) {
         r->capability_args["portMappings"] = json::array();
       }},
  };
  for (const Case& c : cases) {
    CniRuntime runtime = Runtime();
    c.change(&runtime);
    absl::StatusOr<CniResult> result = runner.Add(network, runtime);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << c.field << ": " << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr(c.field));
  }
  EXPECT_EQ(Calls(), "");
}

}  // namespace
}  // namespace netns_hook
}  // namespace berth
