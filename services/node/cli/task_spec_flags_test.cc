#include "services/node/cli/task_spec_flags.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/node/cli/cli_args.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::optional<std::string> FakeEnv(const std::string& name) {
  if (name == "FROM_HERE") return "local value";
  return std::nullopt;
}

absl::StatusOr<std::string> FakeFile(const std::string& path) {
  if (path == "/etc/profile.json")
    return R"({"defaultAction": "SCMP_ACT_ALLOW"})";
  if (path == "/x/vars.env") {
    // A byte order mark, CRLF, a comment, blank lines, a variable from here,
    // one unset here, an empty value and a value with '=' and spaces.
    return "\xEF\xBB\xBF"
           "A=1\r\n# a comment\n\n   B=two words \n"
           "FROM_HERE\nUNSET_HERE\nEMPTY=\nURL=a=b\nSHARED=file\n";
  }
  if (path == "/x/bad.env") return "A=1\n\n=oops\n";
  if (path == "/x/space.env") return "MY VAR=1\n";
  if (path == "/x/labels") {
    return "# team labels\ntier=web\n\n  owner=ops team\nflag\nshared=file\n";
  }
  if (path == "/x/bad-labels") return "ok=1\n=v\n";
  return absl::InvalidArgumentError(
      absl::StrCat("cannot open ", path, ": No such file or directory"));
}

absl::StatusOr<nodepb::TaskSpec> SpecOf(const std::vector<std::string>& args,
                                        nodepb::TaskSpec base = {}) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(RunFlagSpecs(), args, PositionalMode::kStopAtFirst);
  if (!parsed.ok()) return parsed.status();
  return TaskSpecFromRunFlags(*parsed, parsed->positional, std::move(base),
                              FakeEnv, FakeFile);
}

std::string ErrorOf(const std::vector<std::string>& args) {
  return std::string(SpecOf(args).status().message());
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
  // Sizes past what the node takes (2^63 bytes) are refused, not wrapped.
  EXPECT_EQ(*ParseMemoryBytes("8388607t"), uint64_t{8388607} << 40);
  for (const char* huge : {"8388608t", "9223372036854775808",
                           "99999999999999999999999g", "1e400"}) {
    absl::StatusOr<uint64_t> bytes = ParseMemoryBytes(huge);
    EXPECT_FALSE(bytes.ok()) << huge << ": " << *bytes;
  }
  EXPECT_THAT(ParseMemoryBytes("8388608t").status().message(),
              ::testing::HasSubstr("\"8388608t\" is too large: at most 8 EiB"));
}

TEST(ParseCpuMillicoresTest, Fractions) {
  EXPECT_EQ(*ParseCpuMillicores("0.5"), 500u);
  EXPECT_EQ(*ParseCpuMillicores("2"), 2000u);
  EXPECT_EQ(*ParseCpuMillicores("1.25"), 1250u);
  EXPECT_FALSE(ParseCpuMillicores("0").ok());
  EXPECT_FALSE(ParseCpuMillicores("0.0001").ok());
  EXPECT_FALSE(ParseCpuMillicores("half").ok());
  // The node's bound, a million CPUs; beyond it cpu.max quotas would wrap.
  EXPECT_EQ(*ParseCpuMillicores("1000000"), 1'000'000'000u);
  EXPECT_THAT(ParseCpuMillicores("1000000.001").status().message(),
              ::testing::HasSubstr("is too many CPUs: at most 1000000"));
  EXPECT_FALSE(ParseCpuMillicores("184467440737096").ok());
  EXPECT_FALSE(ParseCpuMillicores("1e300").ok());
  EXPECT_FALSE(ParseCpuMillicores("inf").ok());
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

TEST(TaskSpecFromRunFlagsTest, IsolationFlags) {
  absl::StatusOr<nodepb::TaskSpec> spec = SpecOf({"-v",
                                                  "/srv/data:/data:ro",
                                                  "--volume",
                                                  "/srv/logs:/logs:rw",
                                                  "-v",
                                                  "/srv/cache:/cache",
                                                  "--tmpfs",
                                                  "/scratch",
                                                  "--read-only",
                                                  "--cap-add",
                                                  "net_admin",
                                                  "--cap-add",
                                                  "CAP_SYS_PTRACE",
                                                  "--cap-drop",
                                                  "ALL",
                                                  "--privileged",
                                                  "--security-opt",
                                                  "no-new-privileges=false",
                                                  "--security-opt",
                                                  "seccomp=/etc/profile.json",
                                                  "--userns",
                                                  "auto",
                                                  "-u",
                                                  "alice:staff",
                                                  "/bin/true"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const driverpb::Isolation& isolation = spec->isolation();
  ASSERT_EQ(isolation.mounts_size(), 4);
  EXPECT_EQ(isolation.mounts(0).type(), driverpb::MOUNT_TYPE_BIND);
  EXPECT_EQ(isolation.mounts(0).source(), "/srv/data");
  EXPECT_EQ(isolation.mounts(0).destination(), "/data");
  EXPECT_TRUE(isolation.mounts(0).read_only());
  EXPECT_FALSE(isolation.mounts(1).read_only());
  EXPECT_FALSE(isolation.mounts(2).read_only());
  EXPECT_EQ(isolation.mounts(3).type(), driverpb::MOUNT_TYPE_TMPFS);
  EXPECT_EQ(isolation.mounts(3).source(), "");
  EXPECT_EQ(isolation.mounts(3).destination(), "/scratch");
  EXPECT_TRUE(isolation.readonly_rootfs());
  EXPECT_THAT(isolation.cap_add(), ElementsAre("NET_ADMIN", "SYS_PTRACE"));
  EXPECT_THAT(isolation.cap_drop(), ElementsAre("ALL"));
  EXPECT_TRUE(isolation.privileged());
  EXPECT_TRUE(isolation.allow_privilege_escalation());
  EXPECT_EQ(isolation.seccomp().type(), driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
  EXPECT_EQ(isolation.seccomp().custom_profile_json(),
            R"({"defaultAction": "SCMP_ACT_ALLOW"})");
  EXPECT_EQ(spec->userns(), "auto");
  EXPECT_EQ(spec->user(), "alice:staff");

  absl::StatusOr<nodepb::TaskSpec> other = SpecOf(
      {"--security-opt", "seccomp=unconfined", "--security-opt",
       "no-new-privileges", "--userns", "host", "-u", "1000:100", "/bin/true"});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->isolation().seccomp().type(),
            driverpb::SECCOMP_PROFILE_TYPE_UNCONFINED);
  EXPECT_FALSE(other->isolation().allow_privilege_escalation());
  EXPECT_EQ(other->userns(), "host");
  EXPECT_EQ(other->user(), "1000:100");
  EXPECT_TRUE(SpecOf({"--security-opt", "no-new-privileges:true", "x"})
                  .ok());  // Docker's older spelling

  // Nothing asked: no isolation at all.
  EXPECT_FALSE(SpecOf({"/bin/true"})->has_isolation());
}

TEST(TaskSpecFromRunFlagsTest, IsolationFlagsReplaceTheBaseSpec) {
  nodepb::TaskSpec base;
  driverpb::Mount* mount = base.mutable_isolation()->add_mounts();
  mount->set_type(driverpb::MOUNT_TYPE_BIND);
  mount->set_source("/json");
  mount->set_destination("/json");
  base.mutable_isolation()->add_cap_add("CHOWN");
  absl::StatusOr<nodepb::TaskSpec> kept = SpecOf({"x"}, base);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->isolation().mounts_size(), 1);
  EXPECT_THAT(kept->isolation().cap_add(), ElementsAre("CHOWN"));
  absl::StatusOr<nodepb::TaskSpec> replaced =
      SpecOf({"--tmpfs", "/t", "--cap-add", "KILL", "x"}, base);
  ASSERT_TRUE(replaced.ok());
  ASSERT_EQ(replaced->isolation().mounts_size(), 1);
  EXPECT_EQ(replaced->isolation().mounts(0).destination(), "/t");
  EXPECT_THAT(replaced->isolation().cap_add(), ElementsAre("KILL"));
}

TEST(TaskSpecFromRunFlagsTest, BadIsolationFlagsNameTheFlagAndValue) {
  EXPECT_THAT(ErrorOf({"-v", "data:/data", "x"}),
              HasSubstr("--volume: \"data:/data\": the source \"data\" is "
                        "not an absolute host path (named volumes are not "
                        "supported)"));
  EXPECT_THAT(ErrorOf({"-v", "/srv", "x"}),
              HasSubstr("--volume: \"/srv\" must be SRC:DST[:ro|rw]"));
  EXPECT_THAT(ErrorOf({"-v", "/srv:data", "x"}),
              HasSubstr("--volume: \"/srv:data\": the destination \"data\" "
                        "is not an absolute path"));
  EXPECT_THAT(ErrorOf({"-v", "/srv:/data:z", "x"}),
              HasSubstr("--volume: \"/srv:/data:z\": the mode \"z\" must be "
                        "ro or rw"));
  EXPECT_THAT(ErrorOf({"-v", "/a:/b:ro:x", "x"}),
              HasSubstr("--volume: \"/a:/b:ro:x\""));
  EXPECT_THAT(ErrorOf({"--tmpfs", "tmp", "x"}),
              HasSubstr("--tmpfs: \"tmp\" is not an absolute path"));
  EXPECT_THAT(ErrorOf({"--tmpfs", "/run:size=64m", "x"}),
              HasSubstr("--tmpfs: \"/run:size=64m\": tmpfs options are not "
                        "supported"));
  EXPECT_THAT(ErrorOf({"--cap-add", "FLY", "x"}),
              HasSubstr("--cap-add: \"FLY\" is not a capability"));
  EXPECT_THAT(ErrorOf({"--cap-drop", "", "x"}),
              HasSubstr("--cap-drop: \"\" is not a capability"));
  EXPECT_THAT(ErrorOf({"--security-opt", "apparmor=unconfined", "x"}),
              HasSubstr("--security-opt: \"apparmor=unconfined\" must be "
                        "no-new-privileges[=true|false], seccomp=unconfined "
                        "or seccomp=PATH"));
  EXPECT_THAT(ErrorOf({"--security-opt", "no-new-privileges=maybe", "x"}),
              HasSubstr("--security-opt: \"no-new-privileges=maybe\""));
  EXPECT_THAT(ErrorOf({"--security-opt", "seccomp=", "x"}),
              HasSubstr("--security-opt: \"seccomp=\""));
  EXPECT_THAT(ErrorOf({"--security-opt", "seccomp=/nope.json", "x"}),
              HasSubstr("--security-opt: \"seccomp=/nope.json\": cannot open "
                        "/nope.json: No such file or directory"));
  EXPECT_THAT(ErrorOf({"--userns", "private", "x"}),
              HasSubstr("--userns \"private\": must be auto or host"));
  EXPECT_THAT(ErrorOf({"-u", "alice:", "x"}),
              HasSubstr("--user: \"alice:\" must be NAME, UID, NAME:GROUP or "
                        "UID:GID"));
  EXPECT_THAT(ErrorOf({"-u", ":staff", "x"}), HasSubstr("--user: \":staff\""));
  EXPECT_THAT(ErrorOf({"-u", "a:b:c", "x"}), HasSubstr("--user: \"a:b:c\""));
}

// `berth run`'s positional arguments and --entrypoint as a TaskSpec.
absl::StatusOr<nodepb::TaskSpec> ImageSpecOf(
    const std::vector<std::string>& args, nodepb::TaskSpec base = {}) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(RunFlagSpecs(), args, PositionalMode::kStopAtFirst);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<RunTarget> target = RunTargetFromArgs(*parsed);
  if (!target.ok()) return target.status();
  absl::StatusOr<nodepb::TaskSpec> spec = TaskSpecFromRunFlags(
      *parsed, target->command, std::move(base), FakeEnv, FakeFile);
  if (!spec.ok()) return spec.status();
  if (absl::Status s = ApplyRunImage(*parsed, target->image, &*spec); !s.ok()) {
    return s;
  }
  return spec;
}

std::vector<std::string> CommandOf(const nodepb::TaskSpec& spec) {
  std::vector<std::string> words;
  const auto& fields = spec.driver_config().fields();
  if (auto it = fields.find("command"); it != fields.end()) {
    words.push_back(it->second.string_value());
  }
  if (auto it = fields.find("args"); it != fields.end()) {
    for (const auto& value : it->second.list_value().values()) {
      words.push_back(value.string_value());
    }
  }
  return words;
}

TEST(RunTargetTest, ImageThenItsCommandAsDockerHasIt) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      ImageSpecOf({"-d", "busybox", "echo", "hi", "-n"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image().reference(), "busybox");
  EXPECT_FALSE(spec->image().override_entrypoint());
  EXPECT_THAT(CommandOf(*spec), ElementsAre("echo", "hi", "-n"));

  // The image alone: its own Cmd (no command in the driver config).
  spec = ImageSpecOf({"registry:5000/team/app:1.2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image().reference(), "registry:5000/team/app:1.2");
  EXPECT_TRUE(CommandOf(*spec).empty());

  // A "--" right after the image is dropped.
  spec = ImageSpecOf({"busybox", "--", "ls", "-l"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(CommandOf(*spec), ElementsAre("ls", "-l"));
}

// docker run --health-interval 200ms IMAGE: the settings alone, which the
// node puts over the image's HEALTHCHECK; no image, no HEALTHCHECK.
TEST(RunTargetTest, HealthSettingsWithoutACommandChangeTheImagesCheck) {
  absl::StatusOr<nodepb::TaskSpec> spec = ImageSpecOf(
      {"--health-interval", "200ms", "--health-retries", "2", "health"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image().reference(), "health");
  EXPECT_TRUE(spec->healthcheck().test().empty());
  EXPECT_EQ(spec->healthcheck().interval().nanos(), 200000000);
  EXPECT_EQ(spec->healthcheck().retries(), 2u);

  // A --json-spec's test stays, retimed.
  nodepb::TaskSpec base;
  base.mutable_healthcheck()->add_test("CMD");
  base.mutable_healthcheck()->add_test("/probe");
  spec =
      ImageSpecOf({"--health-timeout", "3s", "--", "/bin/sleep", "60"}, base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->healthcheck().test(), ElementsAre("CMD", "/probe"));
  EXPECT_EQ(spec->healthcheck().timeout().seconds(), 3);

  EXPECT_EQ(ImageSpecOf({"--health-on-failure", "kill", "--", "/bin/true"})
                .status()
                .message(),
            "--health-on-failure without --health-cmd changes an image's "
            "HEALTHCHECK, and this task has no image: give --health-cmd");
  nodepb::TaskSpec off;
  off.mutable_healthcheck()->add_test("NONE");
  EXPECT_EQ(ImageSpecOf({"--health-interval", "1s", "health"}, off)
                .status()
                .message(),
            "--health-interval needs --health-cmd: the --json-spec's health "
            "check is [\"NONE\"] (off)");
}

TEST(RunTargetTest, DashDashFirstRunsNoImage) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      ImageSpecOf({"-d", "--", "/bin/sh", "-c", "echo hi"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->has_image());
  EXPECT_THAT(CommandOf(*spec), ElementsAre("/bin/sh", "-c", "echo hi"));
  // Whatever follows "--" at once is the command, not an image.
  spec = ImageSpecOf({"--name", "x", "--", "busybox", "true"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->has_image());
  EXPECT_THAT(CommandOf(*spec), ElementsAre("busybox", "true"));
}

TEST(RunTargetTest, EntrypointReplacesOrClearsTheImages) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      ImageSpecOf({"--entrypoint", "/bin/echo", "busybox", "hi"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->image().override_entrypoint());
  EXPECT_THAT(spec->image().entrypoint(), ElementsAre("/bin/echo"));
  EXPECT_THAT(CommandOf(*spec), ElementsAre("hi"));

  spec = ImageSpecOf({"--entrypoint", "", "busybox", "ls"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->image().override_entrypoint());
  EXPECT_TRUE(spec->image().entrypoint().empty());

  spec = ImageSpecOf({"--entrypoint=", "busybox"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->image().override_entrypoint());

  // A --json-spec's image takes --entrypoint too; the command line's image
  // replaces the base's reference.
  nodepb::TaskSpec base;
  base.mutable_image()->set_reference("alpine");
  spec = ImageSpecOf({"--entrypoint", "/bin/sh", "--", "-c", "true"}, base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image().reference(), "alpine");
  EXPECT_THAT(spec->image().entrypoint(), ElementsAre("/bin/sh"));
  spec = ImageSpecOf({"busybox"}, base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image().reference(), "busybox");
}

TEST(RunTargetTest, ErrorsNameTheArgument) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      ImageSpecOf({"--entrypoint", "/bin/echo", "--", "/bin/true"});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(),
              HasSubstr("--entrypoint replaces an image's Entrypoint, and "
                        "this task has no image"));
  spec = ImageSpecOf({"/bin/sh", "-c", "true"});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(),
              HasSubstr("\"/bin/sh\" is not an image reference: to run a host "
                        "command without an image, put it after --"));
  spec = ImageSpecOf({"", "true"});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("IMAGE"));
}

TEST(ParsePullPolicyTest, Values) {
  EXPECT_EQ(*ParsePullPolicy("missing"), PullPolicy::kMissing);
  EXPECT_EQ(*ParsePullPolicy("always"), PullPolicy::kAlways);
  EXPECT_EQ(*ParsePullPolicy("never"), PullPolicy::kNever);
  absl::StatusOr<PullPolicy> bad = ParsePullPolicy("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "\"sometimes\" must be missing, always or never");
}

// --- Issue 17's flags.

TEST(ParseUlimitTest, DockerNamesValuesAndUnlimited) {
  absl::StatusOr<driverpb::Rlimit> nofile = ParseUlimit("nofile=1024:4096");
  ASSERT_TRUE(nofile.ok()) << nofile.status();
  EXPECT_EQ(nofile->type(), "RLIMIT_NOFILE");
  EXPECT_EQ(nofile->soft(), 1024u);
  EXPECT_EQ(nofile->hard(), 4096u);
  absl::StatusOr<driverpb::Rlimit> core = ParseUlimit("core=0");
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(core->type(), "RLIMIT_CORE");
  EXPECT_EQ(core->soft(), 0u);
  EXPECT_EQ(core->hard(), 0u);
  absl::StatusOr<driverpb::Rlimit> memlock = ParseUlimit("memlock=-1:-1");
  ASSERT_TRUE(memlock.ok());
  EXPECT_EQ(memlock->soft(), UINT64_MAX);
  EXPECT_EQ(memlock->hard(), UINT64_MAX);
  absl::StatusOr<driverpb::Rlimit> nproc = ParseUlimit("NPROC=100:unlimited");
  ASSERT_TRUE(nproc.ok());
  EXPECT_EQ(nproc->type(), "RLIMIT_NPROC");
  EXPECT_EQ(nproc->soft(), 100u);
  EXPECT_EQ(nproc->hard(), UINT64_MAX);
  EXPECT_EQ(ParseUlimit("rlimit_stack=8192")->type(), "RLIMIT_STACK");
  EXPECT_EQ(ParseUlimit("as=1")->type(), "RLIMIT_AS");
}

TEST(ParseUlimitTest, Errors) {
  EXPECT_EQ(ParseUlimit("nofile=10:5").status().message(),
            "soft limit 10 is above the hard limit 5");
  EXPECT_EQ(ParseUlimit("nofile=unlimited:5").status().message(),
            "soft limit unlimited is above the hard limit 5");
  EXPECT_EQ(ParseUlimit("nofile").status().message(),
            "must be NAME=SOFT[:HARD], e.g. nofile=1024:4096");
  EXPECT_THAT(std::string(ParseUlimit("files=1").status().message()),
              HasSubstr("unknown limit \"files\": use one of as, core, cpu"));
  EXPECT_EQ(ParseUlimit("nofile=x").status().message(),
            "the soft limit \"x\" is not a whole number, unlimited or -1");
  EXPECT_EQ(ParseUlimit("nofile=1:-2").status().message(),
            "the hard limit \"-2\" is not a whole number, unlimited or -1");
  EXPECT_FALSE(ParseUlimit("nofile=").ok());
  EXPECT_FALSE(ParseUlimit("nofile=1:2:3").ok());
}

TEST(ParseExtraHostTest, ColonOrEqualsAndIpv6) {
  absl::StatusOr<nodepb::HostEntry> v4 = ParseExtraHost("db.internal:10.0.0.5");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->hostname(), "db.internal");
  EXPECT_EQ(v4->ip(), "10.0.0.5");
  absl::StatusOr<nodepb::HostEntry> v6 = ParseExtraHost("db:::1");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->hostname(), "db");
  EXPECT_EQ(v6->ip(), "::1");
  absl::StatusOr<nodepb::HostEntry> equals = ParseExtraHost("cache=fd00::2");
  ASSERT_TRUE(equals.ok()) << equals.status();
  EXPECT_EQ(equals->hostname(), "cache");
  EXPECT_EQ(equals->ip(), "fd00::2");
  absl::StatusOr<nodepb::HostEntry> bracketed = ParseExtraHost("web=[::1]");
  ASSERT_TRUE(bracketed.ok()) << bracketed.status();
  EXPECT_EQ(bracketed->ip(), "::1");
}

TEST(ParseExtraHostTest, Errors) {
  EXPECT_EQ(ParseExtraHost("db").status().message(),
            "must be NAME:IP or NAME=IP");
  EXPECT_EQ(ParseExtraHost("db:10.0.0.300").status().message(),
            "\"10.0.0.300\" is not an IPv4 or IPv6 address");
  EXPECT_EQ(ParseExtraHost(":10.0.0.1").status().message(),
            "\"\" is not a host name (letters, digits, '-' and '.')");
  EXPECT_EQ(ParseExtraHost("bad_name:10.0.0.1").status().message(),
            "\"bad_name\" is not a host name (letters, digits, '-' and '.')");
  EXPECT_EQ(ParseExtraHost("gw:host-gateway").status().message(),
            "host-gateway is not supported: give the host's address");
  EXPECT_FALSE(ParseExtraHost("db:").ok());
}

TEST(ParseGoDurationTest, GoForms) {
  EXPECT_EQ(*ParseGoDuration("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseGoDuration("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseGoDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseGoDuration("1h"), absl::Hours(1));
  EXPECT_EQ(*ParseGoDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseGoDuration("0"), absl::ZeroDuration());
  EXPECT_EQ(ParseGoDuration("30").status().message(),
            "is not a duration: a number and a unit (ms, s, m, h), e.g. 30s, "
            "1m30s or 500ms");
  EXPECT_FALSE(ParseGoDuration("").ok());
  EXPECT_FALSE(ParseGoDuration("soon").ok());
  EXPECT_FALSE(ParseGoDuration("inf").ok());
  EXPECT_EQ(ParseGoDuration("-5s").status().message(), "is negative");
  EXPECT_EQ(ParseGoDuration("10us").status().message(),
            "must be 0 or at least 1ms");
}

TEST(CanonicalSignalTest, NamesAndNumbers) {
  EXPECT_EQ(*CanonicalSignal("SIGQUIT"), "SIGQUIT");
  EXPECT_EQ(*CanonicalSignal("quit"), "SIGQUIT");
  EXPECT_EQ(*CanonicalSignal("sigusr1"), "SIGUSR1");
  EXPECT_EQ(*CanonicalSignal("9"), "SIGKILL");
  EXPECT_EQ(*CanonicalSignal("15"), "SIGTERM");
  EXPECT_EQ(*CanonicalSignal("40"), "40");  // real-time: no name
  EXPECT_EQ(CanonicalSignal("SIGFOO").status().message(),
            "is not a signal: a name (SIGTERM, TERM) or a number");
  EXPECT_FALSE(CanonicalSignal("SIG").ok());
  EXPECT_FALSE(CanonicalSignal("").ok());
  EXPECT_FALSE(CanonicalSignal("0").ok());
  EXPECT_FALSE(CanonicalSignal("-9").ok());
  EXPECT_FALSE(CanonicalSignal("1000").ok());
}

TEST(TaskSpecFromRunFlagsTest, LabelsFromFlagsAndFiles) {
  nodepb::TaskSpec base;
  (*base.mutable_labels())["from"] = "base";
  (*base.mutable_labels())["shared"] = "base";
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--label", "app=web", "-l", "empty", "--label", "eq=a=b",
              "--label-file", "/x/labels", "--label", "shared=flag", "x"},
             base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& labels = spec->labels();
  EXPECT_EQ(labels.size(), 8u);
  EXPECT_EQ(labels.at("from"), "base");
  EXPECT_EQ(labels.at("app"), "web");
  EXPECT_EQ(labels.at("empty"), "");
  EXPECT_EQ(labels.at("eq"), "a=b");
  EXPECT_EQ(labels.at("tier"), "web");
  EXPECT_EQ(labels.at("owner"), "ops team");
  EXPECT_EQ(labels.at("flag"), "");
  // The flag wins over the file, which wins over the base.
  EXPECT_EQ(labels.at("shared"), "flag");
}

TEST(TaskSpecFromRunFlagsTest, EnvFileAsDockerReadsIt) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--env-file", "/x/vars.env", "-e", "SHARED=flag", "x"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& env = spec->env();
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(env.at("B"), "two words ");
  EXPECT_EQ(env.at("FROM_HERE"), "local value");
  EXPECT_EQ(env.count("UNSET_HERE"), 0u);
  EXPECT_EQ(env.at("EMPTY"), "");
  EXPECT_EQ(env.at("URL"), "a=b");
  EXPECT_EQ(env.at("SHARED"), "flag");
  EXPECT_EQ(env.size(), 6u);
}

TEST(TaskSpecFromRunFlagsTest, NamesAndDns) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--hostname", "web-1.local", "--dns", "10.0.0.53", "--dns",
              "2001:db8::53", "--dns-search", "corp.example", "--dns-search",
              ".", "--dns-option", "ndots:2", "--add-host", "db:10.0.0.5",
              "--add-host", "v6=[::1]", "x"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->hostname(), "web-1.local");
  EXPECT_THAT(spec->network().dns().servers(),
              ElementsAre("10.0.0.53", "2001:db8::53"));
  EXPECT_THAT(spec->network().dns().searches(),
              ElementsAre("corp.example", "."));
  EXPECT_THAT(spec->network().dns().options(), ElementsAre("ndots:2"));
  ASSERT_EQ(spec->extra_hosts_size(), 2);
  EXPECT_EQ(spec->extra_hosts(0).hostname(), "db");
  EXPECT_EQ(spec->extra_hosts(0).ip(), "10.0.0.5");
  EXPECT_EQ(spec->extra_hosts(1).hostname(), "v6");
  EXPECT_EQ(spec->extra_hosts(1).ip(), "::1");
  // Nothing asked: no DNS message, no hostname.
  absl::StatusOr<nodepb::TaskSpec> plain = SpecOf({"x"});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_network());
  EXPECT_EQ(plain->hostname(), "");
}

TEST(TaskSpecFromRunFlagsTest, NameFlagsReplaceTheBasesLists) {
  nodepb::TaskSpec base;
  base.mutable_network()->mutable_dns()->add_servers("1.1.1.1");
  base.mutable_network()->mutable_dns()->add_searches("base.example");
  nodepb::HostEntry* old = base.add_extra_hosts();
  old->set_hostname("old");
  old->set_ip("10.9.9.9");
  base.add_ulimits()->set_type("RLIMIT_CORE");
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--dns", "8.8.8.8", "--add-host", "new=10.1.1.1", "--ulimit",
              "nofile=5", "x"},
             base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->network().dns().servers(), ElementsAre("8.8.8.8"));
  // Not given: kept.
  EXPECT_THAT(spec->network().dns().searches(), ElementsAre("base.example"));
  ASSERT_EQ(spec->extra_hosts_size(), 1);
  EXPECT_EQ(spec->extra_hosts(0).hostname(), "new");
  ASSERT_EQ(spec->ulimits_size(), 1);
  EXPECT_EQ(spec->ulimits(0).type(), "RLIMIT_NOFILE");
}

TEST(TaskSpecFromRunFlagsTest, UlimitsStopAndTerminal) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--ulimit", "nofile=1024:4096", "--ulimit", "core=0", "--ulimit",
              "nofile=2048", "--stop-signal", "quit", "--stop-timeout", "30",
              "-it", "--init", "--detach-keys", "ctrl-a,d", "x"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->ulimits_size(), 2);
  // The later nofile replaces the first, in its place.
  EXPECT_EQ(spec->ulimits(0).type(), "RLIMIT_NOFILE");
  EXPECT_EQ(spec->ulimits(0).soft(), 2048u);
  EXPECT_EQ(spec->ulimits(0).hard(), 2048u);
  EXPECT_EQ(spec->ulimits(1).type(), "RLIMIT_CORE");
  EXPECT_EQ(spec->stop_signal(), "SIGQUIT");
  EXPECT_EQ(spec->stop_timeout().seconds(), 30);
  EXPECT_TRUE(spec->stdin_open());
  EXPECT_TRUE(spec->tty());
  absl::StatusOr<nodepb::TaskSpec> plain = SpecOf({"x"});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->stdin_open());
  EXPECT_FALSE(plain->tty());
  EXPECT_FALSE(plain->has_stop_timeout());
  EXPECT_EQ(plain->stop_signal(), "");
  EXPECT_FALSE(plain->has_healthcheck());
}

TEST(TaskSpecFromRunFlagsTest, HealthCheck) {
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--health-cmd", "wget -q -O- localhost:80 || exit 1",
              "--health-interval", "1m30s", "--health-timeout", "500ms",
              "--health-start-period", "5s", "--health-retries", "5",
              "--health-on-failure", "restart", "x"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const nodepb::HealthCheck& check = spec->healthcheck();
  EXPECT_THAT(check.test(),
              ElementsAre("CMD-SHELL", "wget -q -O- localhost:80 || exit 1"));
  EXPECT_EQ(check.interval().seconds(), 90);
  EXPECT_EQ(check.interval().nanos(), 0);
  EXPECT_EQ(check.timeout().seconds(), 0);
  EXPECT_EQ(check.timeout().nanos(), 500000000);
  EXPECT_EQ(check.start_period().seconds(), 5);
  EXPECT_EQ(check.retries(), 5u);
  EXPECT_EQ(check.on_failure(), nodepb::HEALTH_FAILURE_ACTION_RESTART);
  for (const auto& [word, action] :
       std::vector<std::pair<std::string, nodepb::HealthFailureAction>>{
           {"none", nodepb::HEALTH_FAILURE_ACTION_NONE},
           {"kill", nodepb::HEALTH_FAILURE_ACTION_KILL},
           {"stop", nodepb::HEALTH_FAILURE_ACTION_STOP}}) {
    EXPECT_EQ(SpecOf({"--health-cmd", "true", "--health-on-failure", word, "x"})
                  ->healthcheck()
                  .on_failure(),
              action)
        << word;
  }
  absl::StatusOr<nodepb::TaskSpec> none = SpecOf({"--no-healthcheck", "x"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->healthcheck().test(), ElementsAre("NONE"));
}

TEST(TaskSpecFromRunFlagsTest, HealthFlagsChangeTheBasesCheck) {
  nodepb::TaskSpec base;
  base.mutable_healthcheck()->add_test("CMD");
  base.mutable_healthcheck()->add_test("/bin/check");
  base.mutable_healthcheck()->set_retries(7);
  absl::StatusOr<nodepb::TaskSpec> spec =
      SpecOf({"--health-interval", "10s", "x"}, base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->healthcheck().test(), ElementsAre("CMD", "/bin/check"));
  EXPECT_EQ(spec->healthcheck().interval().seconds(), 10);
  EXPECT_EQ(spec->healthcheck().retries(), 7u);
  absl::StatusOr<nodepb::TaskSpec> off =
      SpecOf({"--no-healthcheck", "x"}, base);
  ASSERT_TRUE(off.ok());
  EXPECT_THAT(off->healthcheck().test(), ElementsAre("NONE"));
  EXPECT_EQ(off->healthcheck().retries(), 0u);
}

TEST(TaskSpecFromRunFlagsTest, DockerSpellingsAndBerthsAreOneFlag) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--cpus", "1.5", "--pids-limit", "64", "--network", "host", "x"},
           {"--cpu", "1.5", "--pids", "64", "--net", "host", "x"},
           {"--cpus=0.5", "--cpu=1.5", "--pids=1", "--pids-limit=64",
            "--network=none", "--net=host", "x"}}) {
    absl::StatusOr<nodepb::TaskSpec> spec = SpecOf(args);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->resources().cpu_millicores(), 1500u) << args[0];
    EXPECT_EQ(spec->resources().pids_limit(), 64u) << args[0];
    EXPECT_EQ(spec->network().mode(), netpb::NETWORK_MODE_HOST) << args[0];
  }
  // The error names the flag as it was typed.
  EXPECT_EQ(ErrorOf({"--cpus", "lots", "x"}),
            "--cpus: \"lots\" is not a number of CPUs (e.g. 0.5 or 2)");
  EXPECT_EQ(ErrorOf({"--cpu", "lots", "x"}),
            "--cpu: \"lots\" is not a number of CPUs (e.g. 0.5 or 2)");
  EXPECT_EQ(ErrorOf({"--pids-limit", "0", "x"}),
            "--pids-limit \"0\": must be a whole number from 1 to 4194304 "
            "(the kernel's most pids)");
  // Integers past what the node takes: refused here, naming flag and value.
  EXPECT_EQ(ErrorOf({"--pids-limit", "4194305", "x"}),
            "--pids-limit \"4194305\": must be a whole number from 1 to "
            "4194304 (the kernel's most pids)");
  EXPECT_EQ(ErrorOf({"--pids-limit", "18446744073709551616", "x"}),
            "--pids-limit \"18446744073709551616\": must be a whole number "
            "from 1 to 4194304 (the kernel's most pids)");
  EXPECT_EQ(ErrorOf({"--cpus", "184467440737096", "x"}),
            "--cpus: \"184467440737096\" is too many CPUs: at most 1000000");
  EXPECT_EQ(ErrorOf({"--memory", "9e18", "x"}),
            "--memory: \"9e18\" has an unknown unit \"e18\": use b, k, m or g");
  EXPECT_EQ(ErrorOf({"--memory", "9000000t", "x"}),
            "--memory: \"9000000t\" is too large: at most 8 EiB (2^63 bytes) "
            "less one");
  EXPECT_EQ(ErrorOf({"--log-max-files", "4294967296", "x"}),
            "--log-max-files \"4294967296\": must be a whole number from 1 "
            "to 1024");
  EXPECT_EQ(ErrorOf({"--log-max-files", "1025", "x"}),
            "--log-max-files \"1025\": must be a whole number from 1 to 1024");
  EXPECT_EQ(ErrorOf({"--stop-timeout", "4294967295", "x"}),
            "--stop-timeout \"4294967295\": is above the most the node "
            "allows, 86400 (24h)");
  EXPECT_EQ(ErrorOf({"--stop-timeout", "4294967296", "x"}),
            "--stop-timeout \"4294967296\": must be a whole number of "
            "seconds");
  EXPECT_EQ(ErrorOf({"--restart", "on-failure:4294967296", "x"}),
            "--restart: on-failure:4294967296: the attempts must be a whole "
            "number");
  EXPECT_EQ(ErrorOf({"-p", "65536:80", "x"}),
            "--publish: host port \"65536\" is not a port (1-65535)");
  EXPECT_EQ(ErrorOf({"--net", "mesh", "x"}),
            "--net: \"mesh\" must be none, host, bridge or cni:NAME");
}

TEST(TaskSpecFromRunFlagsTest, BadNewFlagsNameTheFlagAndValue) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ulimit", "nofile=10:5"},
       "--ulimit \"nofile=10:5\": soft limit 10 is above the hard limit "
       "5"},
      {{"--ulimit", "fds=10"},
       "--ulimit \"fds=10\": unknown limit \"fds\": use one of as, core, "
       "cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, "
       "rss, rtprio, rttime, sigpending, stack"},
      {{"--add-host", "db"}, "--add-host \"db\": must be NAME:IP or NAME=IP"},
      {{"--add-host", "db:10.0.0"},
       "--add-host \"db:10.0.0\": \"10.0.0\" is not an IPv4 or IPv6 "
       "address"},
      {{"--label", "=v"}, "--label \"=v\": the label's key is empty"},
      {{"--label-file", "/x/bad-labels"},
       "--label-file \"/x/bad-labels\": line 2: \"=v\": the label's key "
       "is empty"},
      {{"--label-file", "/x/none"},
       "--label-file \"/x/none\": cannot open /x/none: No such file or "
       "directory"},
      {{"--env-file", "/x/bad.env"},
       "--env-file \"/x/bad.env\": line 3: no variable name in \"=oops\""},
      {{"--env-file", "/x/space.env"},
       "--env-file \"/x/space.env\": line 1: the variable name \"MY "
       "VAR\" holds white space"},
      {{"--env-file", "/x/none.env"},
       "--env-file \"/x/none.env\": cannot open /x/none.env: No such file "
       "or directory"},
      {{"--dns", "8.8.8"}, "--dns \"8.8.8\": is not an IPv4 or IPv6 address"},
      {{"--dns", "dns.google"},
       "--dns \"dns.google\": is not an IPv4 or IPv6 address"},
      {{"--dns-search", "bad domain"},
       "--dns-search \"bad domain\": is not a domain name (letters, "
       "digits, '-' and '.')"},
      {{"--dns-option", "ndots: 2"},
       "--dns-option \"ndots: 2\": is not a resolv.conf option (one word, "
       "e.g. ndots:2)"},
      {{"--hostname", "web_1"},
       "--hostname \"web_1\": is not a host name: at most 63 letters, "
       "digits, '-' and '.', starting and ending with a letter or digit"},
      {{"--hostname", std::string(64, 'a')},
       absl::StrCat("--hostname \"", std::string(64, 'a'),
                    "\": is not a host name: at most 63 letters, digits, "
                    "'-' and '.', starting and ending with a letter or "
                    "digit")},
      {{"--stop-signal", "SIGFOO"},
       "--stop-signal \"SIGFOO\": is not a signal: a name (SIGTERM, "
       "TERM) or a number"},
      {{"--stop-timeout", "10s"},
       "--stop-timeout \"10s\": must be a whole number of seconds"},
      {{"--stop-timeout", "-1"},
       "--stop-timeout \"-1\": must be a whole number of seconds"},
      {{"--health-cmd", "true", "--health-interval", "30"},
       "--health-interval \"30\": is not a duration: a number and a unit "
       "(ms, s, m, h), e.g. 30s, 1m30s or 500ms"},
      {{"--health-cmd", "true", "--health-timeout", "-1s"},
       "--health-timeout \"-1s\": is negative"},
      {{"--health-cmd", "true", "--health-start-period", "soon"},
       "--health-start-period \"soon\": is not a duration: a number and "
       "a unit (ms, s, m, h), e.g. 30s, 1m30s or 500ms"},
      {{"--health-cmd", "true", "--health-retries", "many"},
       "--health-retries \"many\": must be a whole number (0: the "
       "default, 3)"},
      {{"--health-cmd", "true", "--health-on-failure", "panic"},
       "--health-on-failure \"panic\": must be none, kill, restart or "
       "stop"},
      {{"--health-cmd", ""}, "--health-cmd \"\": is empty"},
      {{"--no-healthcheck", "--health-cmd", "true"},
       "--no-healthcheck cannot be used with --health-cmd"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> with_command = args;
    with_command.push_back("x");
    EXPECT_EQ(ErrorOf(with_command), message) << args[0];
  }
}

TEST(RunFlagSpecsTest, GroupedAsDockersHelpAndEveryFlagOnce) {
  std::vector<std::string> names;
  std::vector<std::string> groups;
  for (const FlagSpec& spec : RunFlagSpecs()) {
    EXPECT_FALSE(spec.group.empty()) << spec.name;
    EXPECT_EQ(std::count(names.begin(), names.end(), spec.name), 0)
        << spec.name;
    names.push_back(spec.name);
    for (const std::string& alias : spec.aliases) names.push_back(alias);
    if (groups.empty() || groups.back() != spec.group) {
      // A group's flags are together.
      EXPECT_EQ(std::count(groups.begin(), groups.end(), spec.group), 0)
          << spec.group;
      groups.push_back(spec.group);
    }
  }
  EXPECT_THAT(groups, ElementsAre("Options", "Terminal", "Image", "Resources",
                                  "Network", "Mounts", "Security", "Health"));
}

}  // namespace
}  // namespace berth::cli
