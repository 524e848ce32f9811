#include "services/node/cli/task_spec_flags.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

}  // namespace
}  // namespace berth::cli
