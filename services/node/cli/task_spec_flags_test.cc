#include "services/node/cli/task_spec_flags.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/node/cli/cli_args.h"

namespace berth::cli {
namespace {

namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;
using ::testing::HasSubstr;

std::optional<std::string> FakeEnv(const std::string& name) {
  if (name == "FROM_HERE") return "local value";
  return std::nullopt;
}

absl::StatusOr<nodepb::TaskSpec> SpecOf(const std::vector<std::string>& args,
                                        nodepb::TaskSpec base = {}) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(RunFlagSpecs(), args, PositionalMode::kStopAtFirst);
  if (!parsed.ok()) return parsed.status();
  return TaskSpecFromRunFlags(*parsed, parsed->positional, std::move(base),
                              FakeEnv);
}

TEST(ParseMemoryBytesTest, Units) {
  EXPECT_EQ(*ParseMemoryBytes("64m"), 64u << 20);
  EXPECT_EQ(*ParseMemoryBytes("64M"), 64u << 20);
  EXPECT_EQ(*ParseMemoryBytes("1.5g"), 3u << 29);
  EXPECT_EQ(*ParseMemoryBytes("512k"), 512u << 10);
  EXPECT_EQ(*ParseMemoryBytes("100MiB"), 100u << 20);
  EXPECT_EQ(*ParseMemoryBytes("4096"), 4096u);
  EXPECT_EQ(*ParseMemoryBytes("10b"), 10u);
  EXPECT_FALSE(ParseMemoryBytes("64x").ok());
  EXPECT_FALSE(ParseMemoryBytes("m").ok());
  EXPECT_FALSE(ParseMemoryBytes("0").ok());
  EXPECT_FALSE(ParseMemoryBytes("-5m").ok());
}

TEST(ParseCpuMillicoresTest, Fractions) {
  EXPECT_EQ(*ParseCpuMillicores("0.5"), 500u);
  EXPECT_EQ(*ParseCpuMillicores("2"), 2000u);
  EXPECT_EQ(*ParseCpuMillicores("1.25"), 1250u);
  EXPECT_FALSE(ParseCpuMillicores("0").ok());
  EXPECT_FALSE(ParseCpuMillicores("0.0001").ok());
  EXPECT_FALSE(ParseCpuMillicores("half").ok());
  EXPECT_FALSE(ParseCpuMillicores("-1").ok());
}

TEST(ParseRestartPolicyTest, Modes) {
  EXPECT_EQ(ParseRestartPolicy("no")->mode(), nodepb::RESTART_MODE_NEVER);
  EXPECT_EQ(ParseRestartPolicy("always")->mode(), nodepb::RESTART_MODE_ALWAYS);
  absl::StatusOr<nodepb::RestartPolicy> on_failure =
      ParseRestartPolicy("on-failure:3");
  ASSERT_TRUE(on_failure.ok());
  EXPECT_EQ(on_failure->mode(), nodepb::RESTART_MODE_ON_FAILURE);
  EXPECT_EQ(on_failure->attempts(), 3u);
  EXPECT_EQ(ParseRestartPolicy("on-failure")->attempts(), 0u);
  EXPECT_FALSE(ParseRestartPolicy("on-failure:x").ok());
  EXPECT_FALSE(ParseRestartPolicy("sometimes").ok());
}

TEST(ParsePortMappingTest, Forms) {
  absl::StatusOr<netpb::PortMapping> tcp = ParsePortMapping("8080:80");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->host_port(), 8080u);
  EXPECT_EQ(tcp->container_port(), 80u);
  EXPECT_EQ(tcp->protocol(), netpb::PROTOCOL_TCP);
  absl::StatusOr<netpb::PortMapping> udp =
      ParsePortMapping("127.0.0.1:5353:53/udp");
  ASSERT_TRUE(udp.ok());
  EXPECT_EQ(udp->host_ip(), "127.0.0.1");
  EXPECT_EQ(udp->host_port(), 5353u);
  EXPECT_EQ(udp->container_port(), 53u);
  EXPECT_EQ(udp->protocol(), netpb::PROTOCOL_UDP);
  EXPECT_FALSE(ParsePortMapping("80").ok());
  EXPECT_FALSE(ParsePortMapping("8080:80/sctp").ok());
  EXPECT_FALSE(ParsePortMapping("70000:80").ok());
  EXPECT_FALSE(ParsePortMapping("0:80").ok());
}

TEST(TaskSpecFromRunFlagsTest, EveryFlag) {
  absl::StatusOr<nodepb::TaskSpec> spec = SpecOf({"--name",
                                                  "web",
                                                  "--net",
                                                  "cni:mynet",
                                                  "-p",
                                                  "8080:80",
                                                  "-p",
                                                  "9090:90/udp",
                                                  "--cpu",
                                                  "0.5",
                                                  "--memory",
                                                  "64m",
                                                  "--pids",
                                                  "32",
                                                  "-e",
                                                  "A=1",
                                                  "-e",
                                                  "FROM_HERE",
                                                  "-e",
                                                  "UNSET_HERE",
                                                  "--restart",
                                                  "on-failure:2",
                                                  "--user",
                                                  "nobody",
                                                  "-w",
                                                  "data",
                                                  "--log-max-size",
                                                  "1m",
                                                  "--log-max-files",
                                                  "3",
                                                  "/bin/sh",
                                                  "-c",
                                                  "echo hi"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "web");
  EXPECT_EQ(spec->driver(), "exec");
  const auto& fields = spec->driver_config().fields();
  EXPECT_EQ(fields.at("command").string_value(), "/bin/sh");
  ASSERT_EQ(fields.at("args").list_value().values_size(), 2);
  EXPECT_EQ(fields.at("args").list_value().values(0).string_value(), "-c");
  EXPECT_EQ(fields.at("args").list_value().values(1).string_value(), "echo hi");
  EXPECT_EQ(fields.at("work_dir").string_value(), "data");
  EXPECT_EQ(spec->network().mode(), netpb::NETWORK_MODE_CNI);
  EXPECT_EQ(spec->network().cni_network(), "mynet");
  ASSERT_EQ(spec->network().port_mappings_size(), 2);
  EXPECT_EQ(spec->network().port_mappings(1).protocol(), netpb::PROTOCOL_UDP);
  EXPECT_EQ(spec->resources().cpu_millicores(), 500u);
  EXPECT_EQ(spec->resources().memory_bytes(), 64u * 1024 * 1024);
  EXPECT_EQ(spec->resources().pids_limit(), 32u);
  EXPECT_EQ(spec->logs().max_file_bytes(), 1024u * 1024);
  EXPECT_EQ(spec->logs().max_files(), 3u);
  EXPECT_EQ(spec->env().at("A"), "1");
  EXPECT_EQ(spec->env().at("FROM_HERE"), "local value");
  EXPECT_EQ(spec->env().count("UNSET_HERE"), 0u);
  EXPECT_EQ(spec->restart().mode(), nodepb::RESTART_MODE_ON_FAILURE);
  EXPECT_EQ(spec->restart().attempts(), 2u);
  EXPECT_EQ(spec->user(), "nobody");
}

TEST(TaskSpecFromRunFlagsTest, NetModes) {
  EXPECT_EQ(SpecOf({"--net", "none", "true"})->network().mode(),
            netpb::NETWORK_MODE_NONE);
  EXPECT_EQ(SpecOf({"--net", "host", "true"})->network().mode(),
            netpb::NETWORK_MODE_HOST);
  EXPECT_EQ(SpecOf({"--net", "bridge", "true"})->network().mode(),
            netpb::NETWORK_MODE_BRIDGE);
  EXPECT_FALSE(SpecOf({"--net", "cni:", "true"}).ok());
  EXPECT_FALSE(SpecOf({"--net", "overlay", "true"}).ok());
}

TEST(TaskSpecFromRunFlagsTest, FlagsReplaceTheBaseSpec) {
  nodepb::TaskSpec base;
  base.set_name("from-json");
  base.set_driver("sandbox");
  base.mutable_resources()->set_memory_bytes(1);
  (*base.mutable_driver_config()->mutable_fields())["command"].set_string_value(
      "/bin/json");
  absl::StatusOr<nodepb::TaskSpec> kept = SpecOf({}, base);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->driver(), "sandbox");
  EXPECT_EQ(kept->driver_config().fields().at("command").string_value(),
            "/bin/json");
  absl::StatusOr<nodepb::TaskSpec> replaced =
      SpecOf({"--name", "flag", "-m", "2k", "/bin/flag"}, base);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->name(), "flag");
  EXPECT_EQ(replaced->driver(), "sandbox");
  EXPECT_EQ(replaced->resources().memory_bytes(), 2048u);
  EXPECT_EQ(replaced->driver_config().fields().at("command").string_value(),
            "/bin/flag");
}

TEST(TaskSpecFromRunFlagsTest, ErrorsNameTheFlagAndValue) {
  EXPECT_THAT(std::string(SpecOf({"--memory", "lots", "x"}).status().message()),
              HasSubstr("--memory: \"lots\""));
  EXPECT_THAT(std::string(SpecOf({"--cpu", "0", "x"}).status().message()),
              HasSubstr("--cpu: \"0\""));
  EXPECT_THAT(std::string(SpecOf({"--pids", "-1", "x"}).status().message()),
              HasSubstr("--pids \"-1\""));
  EXPECT_THAT(
      std::string(SpecOf({"--log-max-files", "0", "x"}).status().message()),
      HasSubstr("--log-max-files \"0\""));
  EXPECT_THAT(std::string(SpecOf({"-p", "80", "x"}).status().message()),
              HasSubstr("--publish: \"80\""));
  EXPECT_THAT(
      std::string(SpecOf({"--restart", "maybe", "x"}).status().message()),
      HasSubstr("--restart: \"maybe\""));
  EXPECT_THAT(std::string(SpecOf({"-e", "=v", "x"}).status().message()),
              HasSubstr("--env \"=v\""));
}

}  // namespace
}  // namespace berth::cli
