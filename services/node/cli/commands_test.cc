// The command line against a FakeNodeService served on a Unix socket in a
// temporary directory: the requests each subcommand makes, what it prints
// and how it exits.

#include "services/node/cli/commands.h"

#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/node/cli/cli_test_fixture.h"
#include "services/node/cli/fake_node_service.h"

namespace berth::cli {
namespace {

namespace driverpb = ::berth::driver::v1;
namespace imagepb = ::berth::image::v1;
namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;
namespace statspb = ::berth::stats::v1;
using ::berth::cli::testing::CliResult;
using ::berth::cli::testing::CliTest;
using ::berth::cli::testing::FakeNodeService;
using ::berth::cli::testing::MemFile;
using ::berth::cli::testing::ReadBack;
using ::google::protobuf::util::MessageDifferencer;
using ::google::protobuf::util::TimeUtil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kWebId[] = "aaaabbbbccccddddeeeeffff00001111";
constexpr char kDbId[] = "1234567890ab1234567890ab12345678";
const absl::Time kNow = absl::FromUnixSeconds(1700000000);

nodepb::Task MakeTask(const std::string& id, const std::string& name,
                      nodepb::TaskState state) {
  nodepb::Task task;
  task.set_id(id);
  task.mutable_spec()->set_name(name);
  task.mutable_spec()->set_driver("exec");
  auto& fields =
      *task.mutable_spec()->mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value("/bin/sleep");
  fields["args"].mutable_list_value()->add_values()->set_string_value("100");
  task.set_state(state);
  *task.mutable_created_at() = TimeUtil::SecondsToTimestamp(
      absl::ToUnixSeconds(kNow - absl::Seconds(5)));
  return task;
}

nodepb::TaskLogsResponse Chunk(nodepb::LogStream stream,
                               const std::string& data) {
  nodepb::TaskLogsResponse chunk;
  chunk.set_stream(stream);
  chunk.set_data(data);
  return chunk;
}

nodepb::TaskStatsResponse Sample(const std::string& id, double cpu_percent,
                                 uint64_t memory, int processes) {
  nodepb::TaskStatsResponse response;
  statspb::TaskResourceUsage& usage = *response.mutable_usage();
  usage.set_task_id(id);
  usage.mutable_usage()->mutable_cpu()->set_percent(cpu_percent);
  usage.mutable_usage()->mutable_memory()->set_usage(memory);
  for (int pid = 1; pid <= processes; ++pid) (*usage.mutable_processes())[pid];
  return response;
}

class CommandsTest : public CliTest {
 protected:
  CliEnvironment Environment(int in, int out, int err) override {
    CliEnvironment env = CliTest::Environment(in, out, err);
    env.now = [] { return kNow; };
    env.stats_refresh = absl::Milliseconds(20);
    return env;
  }
};

// --- Socket, help, usage errors.

TEST_F(CommandsTest, UnreachableNodeIsOneLine) {
  const std::string absent = dir_.Join("absent.sock");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--socket", absent, "ps"},
        std::vector<std::string>{"--socket=" + absent, "run", "--", "true"},
        std::vector<std::string>{"--socket", absent, "node", "status"}}) {
    CliResult result = Run(args);
    EXPECT_EQ(result.code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err,
              absl::StrCat("berth: cannot reach berth-node at ", absent,
                           ": is it running? (tools/dev up)\n"));
  }
  // A file that is no socket.
  const std::string file = dir_.Join("not-a-socket");
  std::ofstream(file) << "x";
  CliResult result = Run({"--socket", file, "ps"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err, absl::StrCat("berth: cannot reach berth-node at ", file,
                                     ": is it running? (tools/dev up)\n"));
}

// A user who may not reach node.sock (not root, not in its group) is told
// so, not that berth-node is down.
TEST_F(CommandsTest, ASocketTheUserMayNotReachSaysWhoMayCall) {
  const std::string private_dir = dir_.Join("private");
  ASSERT_EQ(mkdir(private_dir.c_str(), 0700), 0);
  const std::string socket_path = private_dir + "/node.sock";
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    // nobody, without the capabilities root passes through permissions with.
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(3);
    }
    CliResult result = Run({"--socket", socket_path, "ps"});
    const std::string text = absl::StrCat(result.code, " ", result.err);
    (void)!write(report[1], text.data(), text.size());
    _exit(0);
  }
  close(report[1]);
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(report[0], buffer, sizeof(buffer))) > 0)
    text.append(buffer, n);
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    // Bazel's sandbox maps only root into its user namespace (the target is
    // tagged no-sandbox for this).
    GTEST_SKIP() << "cannot become uid 65534 here";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(text, absl::StrCat("1 berth: permission denied on ", socket_path,
                               ": only root and members of berth-node's "
                               "--socket_group (default berth) may call it; "
                               "an administrator adds you with 'usermod -aG "
                               "berth USER' (then log in again)\n"));
}

TEST_F(CommandsTest, SocketResolution) {
  CliEnvironment env = Environment(0, 1, 2);
  variables_.clear();
  EXPECT_EQ(ResolveNodeSocket("", env), "/run/berth/node.sock");
  variables_["BERTH_RUNTIME_DIR"] = "/tmp/rt";
  EXPECT_EQ(ResolveNodeSocket("", env), "/tmp/rt/node.sock");
  variables_["BERTH_NODE_SOCKET"] = "/tmp/n.sock";
  EXPECT_EQ(ResolveNodeSocket("", env), "/tmp/n.sock");
  EXPECT_EQ(ResolveNodeSocket("/x.sock", env), "/x.sock");
}

TEST_F(CommandsTest, HelpOnEverySubcommand) {
  const std::vector<std::vector<std::string>> commands = {{"run"},
                                                          {"ps"},
                                                          {"inspect"},
                                                          {"logs"},
                                                          {"exec"},
                                                          {"stats"},
                                                          {"stop"},
                                                          {"rm"},
                                                          {"node", "status"},
                                                          {"image", "pull"},
                                                          {"image", "import"},
                                                          {"image", "ls"},
                                                          {"image", "inspect"},
                                                          {"image", "rm"},
                                                          {"image", "prune"},
                                                          {"image", "tag"}};
  for (const auto& command : commands) {
    for (const char* flag : {"--help", "-h"}) {
      std::vector<std::string> args = command;
      args.push_back(flag);
      CliResult result = Run(args);
      const std::string name = absl::StrJoin(command, " ");
      EXPECT_EQ(result.code, 0) << name;
      EXPECT_THAT(result.out, StartsWith(absl::StrCat("usage: berth ", name)))
          << name;
      EXPECT_THAT(result.out, HasSubstr("--help")) << name;
      EXPECT_EQ(result.err, "") << name;
    }
  }
  CliResult top = Run({"--help"});
  EXPECT_EQ(top.code, 0);
  EXPECT_THAT(top.out, StartsWith("usage: berth [--socket=PATH] COMMAND"));
  for (const char* name : {"run", "ps", "inspect", "logs", "exec", "stats",
                           "stop", "rm", "node status"}) {
    EXPECT_THAT(top.out, HasSubstr(absl::StrCat("  ", name, " "))) << name;
  }
  EXPECT_THAT(Run({"node", "--help"}).out,
              StartsWith("usage: berth node status"));
  EXPECT_THAT(Run({"help", "logs"}).out, StartsWith("usage: berth logs"));
  // The image group, and docker's spellings.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"image", "--help"},
        std::vector<std::string>{"image", "-h"},
        std::vector<std::string>{"help", "image"}}) {
    CliResult group = Run(args);
    EXPECT_EQ(group.code, 0) << absl::StrJoin(args, " ");
    EXPECT_THAT(group.out, StartsWith("usage: berth image COMMAND"));
    EXPECT_THAT(group.out, HasSubstr("\n  pull "));
    EXPECT_THAT(group.out, HasSubstr("\n  prune "));
  }
  EXPECT_THAT(Run({"help", "image", "pull"}).out,
              StartsWith("usage: berth image pull [FLAGS] REFERENCE"));
  EXPECT_THAT(Run({"images", "--help"}).out,
              StartsWith("usage: berth image ls"));
  EXPECT_THAT(Run({"pull", "-h"}).out, StartsWith("usage: berth image pull"));
  EXPECT_THAT(Run({"rmi", "--help"}).out, StartsWith("usage: berth image rm"));
  EXPECT_THAT(Run({"help", "rmi"}).out, StartsWith("usage: berth image rm"));
  EXPECT_THAT(Run({"run", "--help"}).out,
              StartsWith("usage: berth run [FLAGS] IMAGE [COMMAND [ARGS...]]\n"
                         "       berth run [FLAGS] -- COMMAND [ARGS...]\n"));
  EXPECT_THAT(Run({"run", "--help"}).out, HasSubstr("--entrypoint=CMD"));
  EXPECT_THAT(top.out, HasSubstr("\n  image pull "));
  CliResult version = Run({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out, absl::StrCat("berth ", kVersion, "\n"));
  EXPECT_TRUE(fake_.run_requests().empty());
}

TEST_F(CommandsTest, UsageErrorsExit2NamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"run", "--bogus", "--", "true"},
       "berth run: unknown flag --bogus; see 'berth run --help'\n"},
      {{"ps", "-z"}, "berth ps: unknown flag -z; see 'berth ps --help'\n"},
      {{"frob"}, "berth: unknown command \"frob\"; see 'berth --help'\n"},
      {{"--frob", "ps"}, "berth: unknown flag --frob; see 'berth --help'\n"},
      {{"node", "frob"},
       "berth node: unknown command \"frob\"; see 'berth node --help'\n"},
      {{"run"},
       "berth run: an IMAGE or a command is required: berth run [FLAGS] "
       "IMAGE [COMMAND [ARGS...]], or berth run [FLAGS] -- COMMAND [ARGS...] "
       "for none; see 'berth run --help'\n"},
      {{"run", "--"},
       "berth run: an IMAGE or a command is required: berth run [FLAGS] "
       "IMAGE [COMMAND [ARGS...]], or berth run [FLAGS] -- COMMAND [ARGS...] "
       "for none; see 'berth run --help'\n"},
      {{"run", "/bin/sh", "-c", "true"},
       "berth run: \"/bin/sh\" is not an image reference: to run a host "
       "command without an image, put it after --: berth run [FLAGS] -- "
       "COMMAND [ARGS...]; see 'berth run --help'\n"},
      {{"run", "--entrypoint", "/bin/echo", "--", "/bin/true"},
       "berth run: --entrypoint replaces an image's Entrypoint, and this "
       "task has no image: berth run [FLAGS] --entrypoint CMD IMAGE "
       "[ARGS...]; see 'berth run --help'\n"},
      {{"run", "--pull", "sometimes", "busybox"},
       "berth run: --pull \"sometimes\" must be missing, always or never; see "
       "'berth run --help'\n"},
      {{"image"}, ""},  // the group's usage, checked below
      {{"image", "frob"},
       "berth image: unknown command \"frob\"; see 'berth image --help'\n"},
      {{"image", "pull"},
       "berth image pull: takes exactly one REFERENCE; see 'berth image pull "
       "--help'\n"},
      {{"pull", "a", "b"},
       "berth image pull: takes exactly one REFERENCE; see 'berth image pull "
       "--help'\n"},
      {{"image", "pull", "--progress", "fancy", "busybox"},
       "berth image pull: --progress \"fancy\" must be auto, tty or plain; "
       "see 'berth image pull --help'\n"},
      {{"image", "pull", "--platform", "linux", "busybox"},
       "berth image pull: --platform: \"linux\" must be OS/ARCH[/VARIANT], "
       "e.g. linux/amd64; see 'berth image pull --help'\n"},
      {{"image", "pull", "Busybox"},
       "berth image pull: invalid reference \"Busybox\": repository name "
       "must be lowercase; see 'berth image pull --help'\n"},
      {{"run", "Busybox", "true"},
       "berth run: invalid reference \"Busybox\": repository name must be "
       "lowercase; see 'berth run --help'\n"},
      {{"image", "pull", "--bogus", "busybox"},
       "berth image pull: unknown flag --bogus; see 'berth image pull "
       "--help'\n"},
      {{"image", "import"},
       "berth image import: takes exactly one FILE (- for stdin); see "
       "'berth image import --help'\n"},
      {{"image", "import", "/nonexistent/x.tar"},
       "berth image import: cannot open /nonexistent/x.tar: No such file or "
       "directory; see 'berth image import --help'\n"},
      {{"image", "ls", "busybox"},
       "berth image ls: unexpected argument \"busybox\"; see 'berth image ls "
       "--help'\n"},
      {{"images", "-z"},
       "berth image ls: unknown flag -z; see 'berth image ls --help'\n"},
      {{"image", "inspect"},
       "berth image inspect: at least one REFERENCE is required; see 'berth "
       "image inspect --help'\n"},
      {{"rmi"},
       "berth image rm: at least one REFERENCE is required; see 'berth image "
       "rm --help'\n"},
      {{"image", "prune", "x"},
       "berth image prune: unexpected argument \"x\"; see 'berth image "
       "prune --help'\n"},
      {{"image", "tag", "busybox"},
       "berth image tag: takes exactly a SOURCE and a TARGET; see 'berth "
       "image tag --help'\n"},
      {{"run", "--memory", "64q", "true"},
       "berth run: --memory: \"64q\" has an unknown unit \"q\": use b, k, m "
       "or g; see 'berth run --help'\n"},
      {{"run", "-d", "--rm", "true"},
       "berth run: --rm cannot be used with -d; see 'berth run --help'\n"},
      {{"logs", "--tail", "x", "web"},
       "berth logs: --tail \"x\" must be a number of lines above zero or "
       "'all'; see 'berth logs --help'\n"},
      {{"inspect"},
       "berth inspect: takes exactly one TASK; see 'berth inspect --help'\n"},
      {{"exec", "web"},
       "berth exec: a COMMAND is required; see 'berth exec --help'\n"},
      {{"stop"},
       "berth stop: at least one TASK is required; see 'berth stop --help'\n"},
      {{"stop", "--timeout", "soon", "web"},
       "berth stop: --timeout \"soon\" must be a number of seconds; see "
       "'berth stop --help'\n"},
  };
  for (const Case& c : cases) {
    CliResult result = Run(c.args);
    EXPECT_EQ(result.code, 2) << absl::StrJoin(c.args, " ");
    if (c.args == std::vector<std::string>{"image"}) {
      EXPECT_THAT(result.err, StartsWith("usage: berth image COMMAND"));
    } else {
      EXPECT_EQ(result.err, c.err);
    }
    EXPECT_EQ(result.out, "");
  }
  EXPECT_TRUE(fake_.run_requests().empty());
  EXPECT_TRUE(images_.pull_requests().empty());
  EXPECT_TRUE(images_.inspect_requests().empty());
  CliResult bare = Run({});
  EXPECT_EQ(bare.code, 2);
  EXPECT_THAT(bare.err, StartsWith("usage: berth"));
}

// --- run

TEST_F(CommandsTest, RunDetachedBuildsTheSpecAndPrintsTheId) {
  CliResult result = Run(
      {"run",     "-d",    "--name",    "web",      "--net",  "bridge", "-p",
       "8080:80", "--cpu", "0.5",       "--memory", "64m",    "--pids", "16",
       "-e",      "A=1",   "--restart", "always",   "--user", "nobody", "-w",
       "srv",     "--",    "/bin/sh",   "-c",       "echo hi"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "00112233445566778899aabbccddeeff\n");
  EXPECT_EQ(result.err, "");
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 1u);
  const nodepb::TaskSpec& spec = requests[0].spec();
  EXPECT_EQ(spec.name(), "web");
  EXPECT_EQ(spec.driver(), "exec");
  EXPECT_EQ(spec.driver_config().fields().at("command").string_value(),
            "/bin/sh");
  EXPECT_EQ(spec.driver_config().fields().at("args").list_value().values_size(),
            2);
  EXPECT_EQ(spec.driver_config().fields().at("work_dir").string_value(), "srv");
  EXPECT_EQ(spec.network().mode(), netpb::NETWORK_MODE_BRIDGE);
  ASSERT_EQ(spec.network().port_mappings_size(), 1);
  EXPECT_EQ(spec.network().port_mappings(0).host_port(), 8080u);
  EXPECT_EQ(spec.resources().cpu_millicores(), 500u);
  EXPECT_EQ(spec.resources().memory_bytes(), 67108864u);
  EXPECT_EQ(spec.resources().pids_limit(), 16u);
  EXPECT_EQ(spec.env().at("A"), "1");
  EXPECT_EQ(spec.restart().mode(), nodepb::RESTART_MODE_ALWAYS);
  EXPECT_EQ(spec.user(), "nobody");
  EXPECT_FALSE(requests[0].remove_on_start_failure());  // no --rm
  EXPECT_TRUE(fake_.logs_requests().empty());
}

TEST_F(CommandsTest, RunIsolationFlagsReachTheSpec) {
  const std::string profile = dir_.Join("profile.json");
  std::ofstream(profile) << R"({"defaultAction": "SCMP_ACT_ERRNO"})";
  CliResult result =
      Run({"run", "-d", "-v", "/srv:/data:ro", "--tmpfs", "/tmp", "--read-only",
           "--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE",
           "--security-opt", absl::StrCat("seccomp=", profile), "--userns",
           "auto", "-u", "app:app", "--", "/bin/true"});
  EXPECT_EQ(result.code, 0) << result.err;
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 1u);
  const nodepb::TaskSpec& spec = requests[0].spec();
  ASSERT_EQ(spec.isolation().mounts_size(), 2);
  EXPECT_EQ(spec.isolation().mounts(0).source(), "/srv");
  EXPECT_TRUE(spec.isolation().mounts(0).read_only());
  EXPECT_TRUE(spec.isolation().readonly_rootfs());
  EXPECT_EQ(spec.isolation().seccomp().custom_profile_json(),
            R"({"defaultAction": "SCMP_ACT_ERRNO"})");
  EXPECT_EQ(spec.userns(), "auto");
  EXPECT_EQ(spec.user(), "app:app");

  // inspect shows what was asked.
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  *web.mutable_spec()->mutable_isolation() = spec.isolation();
  web.mutable_spec()->set_userns("auto");
  fake_.AddTask(web);
  CliResult inspected = Run({"inspect", "web"});
  EXPECT_THAT(inspected.out, HasSubstr("\"isolation\": {"));
  EXPECT_THAT(inspected.out, HasSubstr("\"destination\": \"/data\""));
  EXPECT_THAT(inspected.out, HasSubstr("\"userns\": \"auto\""));
}

TEST_F(CommandsTest, RunBadIsolationFlagsAreUsageErrors) {
  CliResult named = Run({"run", "-v", "data:/data", "--", "true"});
  EXPECT_EQ(named.code, 2);
  EXPECT_THAT(named.err,
              StartsWith("berth run: --volume: \"data:/data\": the source "
                         "\"data\" is not an absolute host path (named "
                         "volumes are not supported)"));
  const std::string missing = dir_.Join("missing.json");
  CliResult unreadable = Run({"run", "--security-opt",
                              absl::StrCat("seccomp=", missing), "--", "true"});
  EXPECT_EQ(unreadable.code, 2);
  EXPECT_THAT(unreadable.err,
              HasSubstr(absl::StrCat("--security-opt: \"seccomp=", missing,
                                     "\": cannot open ", missing)));
  EXPECT_EQ(Run({"run", "--cap-add", "FLY", "--", "true"}).code, 2);
  EXPECT_TRUE(fake_.run_requests().empty());
}

TEST_F(CommandsTest, RunIssue17FlagsReachTheSpecAndInspectShowsThem) {
  const std::string env_file = dir_.Join("app.env");
  std::ofstream(env_file) << "# settings\nMODE=prod\nFROM_FILE\n";
  const std::string label_file = dir_.Join("labels");
  std::ofstream(label_file) << "team=ops\n";
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--label", "tier=web"},
      {"--label-file", label_file},
      {"--env-file", env_file},
      {"--hostname", "web-1"},
      {"--dns", "10.0.0.53"},
      {"--dns-search", "corp.example"},
      {"--dns-option", "ndots:2"},
      {"--add-host", "db:10.0.0.5"},
      {"--ulimit", "nofile=1024:4096"},
      {"--stop-signal", "SIGQUIT"},
      {"--stop-timeout", "20"},
      {"--health-cmd", "test -e /ready"},
      {"--health-interval", "10s"},
      {"--health-retries", "2"},
      {"--health-on-failure", "restart"},
      {"--cpus", "1.5"},
      {"--pids-limit", "32"},
      {"--network", "none"},
  };
  std::vector<std::string> args = {"run", "-d", "--init"};
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    args.push_back(value);
  }
  args.insert(args.end(), {"--", "/bin/true"});
  CliResult result = Run(args);
  EXPECT_EQ(result.code, 0) << result.err;
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 1u);
  const nodepb::TaskSpec& spec = requests[0].spec();
  EXPECT_EQ(spec.labels().at("tier"), "web");
  EXPECT_EQ(spec.labels().at("team"), "ops");
  EXPECT_EQ(spec.env().at("MODE"), "prod");
  EXPECT_EQ(spec.env().count("FROM_FILE"), 0u);  // unset here
  EXPECT_EQ(spec.hostname(), "web-1");
  EXPECT_EQ(spec.network().dns().servers(0), "10.0.0.53");
  EXPECT_EQ(spec.network().dns().searches(0), "corp.example");
  EXPECT_EQ(spec.network().dns().options(0), "ndots:2");
  EXPECT_EQ(spec.network().mode(), netpb::NETWORK_MODE_NONE);
  ASSERT_EQ(spec.extra_hosts_size(), 1);
  EXPECT_EQ(spec.extra_hosts(0).ip(), "10.0.0.5");
  ASSERT_EQ(spec.ulimits_size(), 1);
  EXPECT_EQ(spec.ulimits(0).type(), "RLIMIT_NOFILE");
  EXPECT_EQ(spec.ulimits(0).hard(), 4096u);
  EXPECT_EQ(spec.stop_signal(), "SIGQUIT");
  EXPECT_EQ(spec.stop_timeout().seconds(), 20);
  EXPECT_EQ(spec.healthcheck().test(1), "test -e /ready");
  EXPECT_EQ(spec.healthcheck().interval().seconds(), 10);
  EXPECT_EQ(spec.healthcheck().retries(), 2u);
  EXPECT_EQ(spec.healthcheck().on_failure(),
            nodepb::HEALTH_FAILURE_ACTION_RESTART);
  EXPECT_EQ(spec.resources().cpu_millicores(), 1500u);
  EXPECT_EQ(spec.resources().pids_limit(), 32u);

  // inspect prints the whole Task: the new fields with it.
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  *web.mutable_spec() = spec;
  web.mutable_spec()->set_name("web");
  web.mutable_health()->set_status(nodepb::HEALTH_STATUS_HEALTHY);
  fake_.AddTask(web);
  CliResult inspected = Run({"inspect", "web"});
  EXPECT_EQ(inspected.code, 0) << inspected.err;
  for (const char* field :
       {"\"labels\": {", "\"tier\": \"web\"", "\"hostname\": \"web-1\"",
        "\"extraHosts\": [", "\"ulimits\": [", "\"type\": \"RLIMIT_NOFILE\"",
        "\"stopSignal\": \"SIGQUIT\"", "\"stopTimeout\": \"20s\"",
        "\"healthcheck\": {", "\"CMD-SHELL\"",
        "\"onFailure\": \"HEALTH_FAILURE_ACTION_RESTART\"", "\"searches\": [",
        "\"status\": \"HEALTH_STATUS_HEALTHY\""}) {
    EXPECT_THAT(inspected.out, HasSubstr(field));
  }
}

TEST_F(CommandsTest, RunIssue17BadValuesAreUsageErrorsNamingFlagAndValue) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ulimit", "nofile=10:5"},
       "berth run: --ulimit \"nofile=10:5\": soft limit 10 is above the hard "
       "limit 5; see 'berth run --help'\n"},
      {{"--add-host", "db"},
       "berth run: --add-host \"db\": must be NAME:IP or NAME=IP; see 'berth "
       "run --help'\n"},
      {{"--label", "=x"},
       "berth run: --label \"=x\": the label's key is empty; see 'berth run "
       "--help'\n"},
      {{"--dns", "1.2.3"},
       "berth run: --dns \"1.2.3\": is not an IPv4 or IPv6 address; see "
       "'berth run --help'\n"},
      {{"--stop-signal", "NOPE"},
       "berth run: --stop-signal \"NOPE\": is not a signal: a name (SIGTERM, "
       "TERM) or a number; see 'berth run --help'\n"},
      {{"--health-cmd", "true", "--health-interval", "5"},
       "berth run: --health-interval \"5\": is not a duration: a number and a "
       "unit (ms, s, m, h), e.g. 30s, 1m30s or 500ms; see 'berth run "
       "--help'\n"},
      {{"--cpu", "many"},
       "berth run: --cpu: \"many\" is not a number of CPUs (e.g. 0.5 or 2); "
       "see 'berth run --help'\n"},
      // Settings alone change an image's HEALTHCHECK; this task has none.
      {{"--health-interval", "1s"},
       "berth run: --health-interval without --health-cmd changes an image's "
       "HEALTHCHECK, and this task has no image: give --health-cmd; see "
       "'berth run --help'\n"},
  };
  for (const auto& [flags, err] : cases) {
    std::vector<std::string> args = {"run", "-d"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "/bin/true"});
    CliResult result = Run(args);
    EXPECT_EQ(result.code, 2) << flags[0];
    EXPECT_EQ(result.err, err);
    EXPECT_EQ(result.out, "");
  }
  EXPECT_TRUE(fake_.run_requests().empty());
}

TEST_F(CommandsTest, RunAttachedCopiesOutputAndExitsWithTheTasksCode) {
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  outcome.mutable_exit_result()->set_exit_code(3);
  fake_.SetRunOutcome(outcome);
  const std::string binary("\x00\xff\r\nbytes", 9);
  fake_.SetLogs(kWebId, {Chunk(nodepb::LOG_STREAM_STDOUT, "out 1\n"),
                         Chunk(nodepb::LOG_STREAM_STDERR, "err 1\n"),
                         Chunk(nodepb::LOG_STREAM_STDOUT, binary)});
  CliResult result = Run({"run", "--", "/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(result.code, 3);
  EXPECT_EQ(result.out, "out 1\n" + binary);
  EXPECT_EQ(result.err, "err 1\n");
  ASSERT_EQ(fake_.logs_requests().size(), 1u);
  EXPECT_EQ(fake_.logs_requests()[0].task_id(), kWebId);
  EXPECT_TRUE(fake_.logs_requests()[0].follow());
  EXPECT_TRUE(fake_.remove_requests().empty());
}

TEST_F(CommandsTest, RunFollowsAgainWhenOutputEndsBeforeTheTask) {
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  outcome.mutable_exit_result()->set_exit_code(4);
  fake_.SetRunOutcome(outcome, /*logs_calls=*/3);
  // Every TaskLogs call sends the whole output again, as a follow from the
  // start does.
  fake_.SetLogs(kWebId, {Chunk(nodepb::LOG_STREAM_STDOUT, "abc"),
                         Chunk(nodepb::LOG_STREAM_STDERR, "e1\n"),
                         Chunk(nodepb::LOG_STREAM_STDOUT, "def\n")});
  CliResult result = Run({"run", "--", "/bin/true"});
  EXPECT_EQ(result.code, 4);
  EXPECT_EQ(result.out, "abcdef\n");
  EXPECT_EQ(result.err, "e1\n");
  EXPECT_EQ(fake_.logs_requests().size(), 3u);
}

TEST_F(CommandsTest, RunPassesCtrlCToTheTaskAsAStop) {
  fake_.SetRunOutcome(MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED),
                      /*logs_calls=*/1 << 30);
  CliResult result;
  std::thread cli([&] { result = Run({"run", "--", "sleep", "100"}); });
  ASSERT_TRUE(
      berth::testing::WaitFor([&] { return !fake_.logs_requests().empty(); }));
  kill(getpid(), SIGINT);
  cli.join();
  EXPECT_EQ(result.code, 130) << result.err;
  const std::vector<nodepb::StopTaskRequest> stops = fake_.stop_requests();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].task_id(), kWebId);
  EXPECT_EQ(stops[0].signal(), "SIGINT");
}

TEST_F(CommandsTest, RunKilledBySignalExits128PlusSignal) {
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  outcome.mutable_exit_result()->set_signal(9);
  fake_.SetRunOutcome(outcome);
  EXPECT_EQ(Run({"run", "--", "sleep", "100"}).code, 137);
}

TEST_F(CommandsTest, RunThatFailedToStartExits125WithTheError) {
  nodepb::Task outcome = MakeTask(kWebId, "web", nodepb::TASK_STATE_FAILED);
  outcome.set_error(
      "driver_config.command: \"nope\" is not on the task's PATH");
  fake_.SetRunOutcome(outcome);
  CliResult result = Run({"run", "--name", "web", "--", "nope"});
  EXPECT_EQ(result.code, 125);
  EXPECT_EQ(result.err,
            "berth: task web failed to start: driver_config.command: \"nope\" "
            "is not on the task's PATH\n");
}

TEST_F(CommandsTest, RunRmRemovesTheTaskAfterItEnds) {
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  outcome.mutable_exit_result()->set_exit_code(0);
  fake_.SetRunOutcome(outcome);
  CliResult result = Run({"run", "--rm", "--", "true"});
  EXPECT_EQ(result.code, 0) << result.err;
  ASSERT_EQ(fake_.remove_requests().size(), 1u);
  EXPECT_EQ(fake_.remove_requests()[0].task_id(), kWebId);
  // And should it fail to start, the node removes it (nothing stays).
  ASSERT_EQ(fake_.run_requests().size(), 1u);
  EXPECT_TRUE(fake_.run_requests()[0].remove_on_start_failure());
}

TEST_F(CommandsTest, RunRmThatCannotRemoveSaysWhyAndKeepsTheTasksCode) {
  nodepb::Task outcome = MakeTask(kWebId, "web", nodepb::TASK_STATE_EXITED);
  outcome.mutable_exit_result()->set_exit_code(3);
  fake_.SetRunOutcome(outcome);
  fake_.FailCalls("RemoveTask",
                  grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                               "task web: its mounts are still held"));
  CliResult result = Run({"run", "--rm", "--name", "web", "--", "false"});
  EXPECT_EQ(result.code, 3) << result.err;
  EXPECT_THAT(result.err,
              HasSubstr("berth: task web: its mounts are still held\n"));
}

TEST_F(CommandsTest, RunNodeErrorIsOneLine) {
  fake_.FailCalls("RunTask",
                  grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "spec.driver: no driver \"nope\" on this node"));
  CliResult result = Run({"run", "--driver", "nope", "--", "true"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "berth: spec.driver: no driver \"nope\" on this node\n");
}

// gRPC's bare "Deadline Exceeded" (the CLI's deadline passed) is said in
// words naming the node; a deadline the node reports keeps its message.
TEST_F(CommandsTest, ADeadlineIsSaidInWords) {
  fake_.FailCalls("RunTask", grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                          "Deadline Exceeded"));
  CliResult result = Run({"run", "--", "true"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err, absl::StrCat("berth: berth-node at ", socket_path_,
                                     " did not answer in time (it may still "
                                     "be at work: see berth ps -a)\n"));
  fake_.FailCalls("RunTask",
                  grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                               "berth-netns Prerun (/x): timed out"));
  result = Run({"run", "--", "true"});
  EXPECT_EQ(result.err, "berth: berth-netns Prerun (/x): timed out\n");
}

TEST_F(CommandsTest, RunJsonSpecFromFileAndStdin) {
  const std::string path = dir_.Join("spec.json");
  std::ofstream(path) << R"({"name": "from-json", "driver": "sandbox",
      "driverConfig": {"command": "/bin/echo", "args": ["a"]},
      "resources": {"memoryBytes": "1048576"}})";
  EXPECT_EQ(Run({"run", "-d", "--json-spec", path, "--cpu", "2"}).code, 0);
  EXPECT_EQ(Run({"run", "-d", "--json-spec", "-"},
                R"({"driverConfig": {"command": "/bin/true"}})")
                .code,
            0);
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 2u);
  const nodepb::TaskSpec& file_spec = requests[0].spec();
  EXPECT_EQ(file_spec.name(), "from-json");
  EXPECT_EQ(file_spec.driver(), "sandbox");
  EXPECT_EQ(file_spec.resources().memory_bytes(), 1048576u);
  EXPECT_EQ(file_spec.resources().cpu_millicores(), 2000u);
  EXPECT_EQ(file_spec.driver_config().fields().at("command").string_value(),
            "/bin/echo");
  const nodepb::TaskSpec& stdin_spec = requests[1].spec();
  EXPECT_EQ(stdin_spec.driver(), "exec");
  EXPECT_EQ(stdin_spec.driver_config().fields().at("command").string_value(),
            "/bin/true");

  CliResult bad = Run({"run", "--json-spec", "-"}, R"({"nmae": "x"})");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, StartsWith("berth run: --json-spec -: not a "
                                  "berth.node.v1.TaskSpec in JSON"));
}

// --- ps, inspect, logs

TEST_F(CommandsTest, PsTable) {
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  nodepb::Task db = MakeTask(kDbId, "db", nodepb::TASK_STATE_EXITED);
  db.mutable_exit_result()->set_exit_code(2);
  *db.mutable_created_at() = TimeUtil::SecondsToTimestamp(
      absl::ToUnixSeconds(kNow - absl::Minutes(3)));
  db.mutable_spec()->mutable_image()->set_reference("busybox");
  fake_.AddTask(web);
  fake_.AddTask(db);

  // IMAGE: the task's image as given, empty for one without.
  CliResult running = Run({"ps"});
  EXPECT_EQ(running.code, 0) << running.err;
  EXPECT_EQ(running.out,
            "ID             NAME   IMAGE   DRIVER   STATE     CREATED         "
            "EXIT   COMMAND\n"
            "aaaabbbbcccc   web            exec     running   5 seconds ago   "
            "-      /bin/sleep 100\n");
  CliResult all = Run({"ps", "-a"});
  EXPECT_THAT(all.out, HasSubstr("1234567890ab   db     busybox   exec     "
                                 "exited    3 minutes ago   2      "
                                 "/bin/sleep 100\n"));
  ASSERT_EQ(fake_.list_requests().size(), 2u);
  EXPECT_FALSE(fake_.list_requests()[0].all());
  EXPECT_TRUE(fake_.list_requests()[1].all());

  EXPECT_EQ(Run({"ps", "--all", "-q"}).out, "aaaabbbbcccc\n1234567890ab\n");
}

TEST_F(CommandsTest, PsJsonIsTheListTasksResponse) {
  CliResult empty = Run({"ps", "--json"});
  EXPECT_EQ(empty.code, 0);
  EXPECT_EQ(empty.out, "{\n \"tasks\": []\n}\n");

  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  CliResult result = Run({"ps", "--json"});
  EXPECT_EQ(result.code, 0);
  nodepb::ListTasksResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(result.out, &parsed).ok())
      << result.out;
  ASSERT_EQ(parsed.tasks_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(
      parsed.tasks(0), MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING)));
}

TEST_F(CommandsTest, InspectPrintsTheTaskAsJson) {
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  fake_.AddTask(web);
  CliResult result = Run({"inspect", "web"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("\n \"id\": \"aaaabbbb"));  // indented
  nodepb::Task parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(result.out, &parsed).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, web));

  CliResult missing = Run({"inspect", "nope"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "berth: no task \"nope\"\n");
}

TEST_F(CommandsTest, LogsSplitsStreamsAndPassesTailAndFollow) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  fake_.SetLogs(kWebId, {Chunk(nodepb::LOG_STREAM_STDERR, "warn\n"),
                         Chunk(nodepb::LOG_STREAM_STDOUT, "line\n")});
  CliResult result = Run({"logs", "-f", "--tail", "5", "web"});
  EXPECT_EQ(result.code, 0);
  EXPECT_EQ(result.out, "line\n");
  EXPECT_EQ(result.err, "warn\n");
  CliResult all = Run({"logs", "--tail=all", "web"});
  EXPECT_EQ(all.code, 0);
  ASSERT_EQ(fake_.logs_requests().size(), 2u);
  EXPECT_TRUE(fake_.logs_requests()[0].follow());
  EXPECT_EQ(fake_.logs_requests()[0].tail_lines(), 5u);
  EXPECT_FALSE(fake_.logs_requests()[1].follow());
  EXPECT_EQ(fake_.logs_requests()[1].tail_lines(), 0u);
  CliResult missing = Run({"logs", "nope"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "berth: no task \"nope\"\n");
}

// --- exec

TEST_F(CommandsTest, ExecInteractiveForwardsStdinAndExitsWithTheCode) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  driverpb::ExecTaskStreamingResponse err;
  err.set_stderr("to stderr\n");
  driverpb::ExitResult exit;
  exit.set_exit_code(7);
  fake_.SetExecScript({err}, exit);
  CliResult result =
      Run({"exec", "-i", "web", "--", "/bin/cat", "-"}, "hello from stdin\n");
  EXPECT_EQ(result.code, 7);
  EXPECT_EQ(result.out, "hello from stdin\n");
  EXPECT_EQ(result.err, "to stderr\n");
  std::vector<driverpb::ExecTaskStreamingRequest> requests =
      fake_.exec_requests();
  ASSERT_GE(requests.size(), 3u);
  ASSERT_TRUE(requests[0].has_setup());
  EXPECT_EQ(requests[0].setup().task_id(), "web");
  EXPECT_THAT(requests[0].setup().command(), ElementsAre("/bin/cat", "-"));
  EXPECT_FALSE(requests[0].setup().tty());
  EXPECT_EQ(requests[1].stdin(), "hello from stdin\n");
  EXPECT_TRUE(requests.back().has_stdin_close());
}

TEST_F(CommandsTest, ExecForwardsLargeBinaryStdinInChunks) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  std::string input(200 * 1024 + 7, '\0');
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<char>((i * 131) % 251);
  }
  CliResult result = Run({"exec", "-i", "web", "--", "cat"}, input);
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_TRUE(result.out == input)
      << "echoed " << result.out.size() << " bytes of " << input.size();
  size_t frames = 0;
  for (const auto& request : fake_.exec_requests()) {
    if (!request.has_stdin()) continue;
    ++frames;
    EXPECT_LE(request.stdin().size(), 32u * 1024);
  }
  EXPECT_GE(frames, 7u);
  EXPECT_TRUE(fake_.exec_requests().back().has_stdin_close());
  EXPECT_TRUE(fake_.exec_half_closed());
}

TEST_F(CommandsTest, ExecWithoutStdinClosesItAndReportsSignals) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  driverpb::ExecTaskStreamingResponse out;
  out.set_stdout("hi\n");
  driverpb::ExitResult exit;
  exit.set_signal(15);
  fake_.SetExecScript({out}, exit);
  CliResult result = Run({"exec", "web", "echo", "hi"}, "not forwarded");
  EXPECT_EQ(result.code, 143);
  EXPECT_EQ(result.out, "hi\n");
  std::vector<driverpb::ExecTaskStreamingRequest> requests =
      fake_.exec_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_THAT(requests[0].setup().command(), ElementsAre("echo", "hi"));
  EXPECT_TRUE(requests[1].has_stdin_close());
  EXPECT_TRUE(fake_.exec_half_closed());

  CliResult missing = Run({"exec", "nope", "--", "true"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "berth: no task \"nope\"\n");
}

TEST_F(CommandsTest, ExecTtyRawModeSizeAndResizeOnSigwinch) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  struct winsize size = {};
  size.ws_row = 24;
  size.ws_col = 80;
  int master = -1;
  int slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &size), 0);
  auto canonical = [slave] {
    struct termios settings;
    tcgetattr(slave, &settings);
    return (settings.c_lflag & ICANON) != 0;
  };
  ASSERT_TRUE(canonical());

  std::atomic<bool> raw_during_exec{false};
  fake_.SetExecHandler(
      [&](grpc::ServerContext* context, FakeNodeService::ExecStream* stream) {
        driverpb::ExecTaskStreamingRequest request;
        if (!stream->Read(&request)) return grpc::Status::CANCELLED;
        fake_.RecordExecRequest(request);
        raw_during_exec = !canonical();
        while (stream->Read(&request)) {
          fake_.RecordExecRequest(request);
          if (request.has_resize()) break;
        }
        driverpb::ExecTaskStreamingResponse exit;
        exit.mutable_exit()->set_exit_code(5);
        stream->Write(exit);
        return grpc::Status::OK;
      });

  const int out = MemFile("stdout");
  const int err = MemFile("stderr");
  int code = -1;
  std::thread cli([&] {
    code = RunCli({"exec", "-it", "web", "--", "/bin/sh"},
                  Environment(slave, out, err));
  });
  ASSERT_TRUE(
      berth::testing::WaitFor([&] { return !fake_.exec_requests().empty(); }));
  size.ws_row = 30;
  size.ws_col = 100;
  ASSERT_EQ(ioctl(master, TIOCSWINSZ, &size), 0);
  kill(getpid(), SIGWINCH);
  cli.join();

  EXPECT_EQ(code, 5) << ReadBack(err);
  EXPECT_TRUE(raw_during_exec);
  EXPECT_TRUE(canonical());  // restored
  std::vector<driverpb::ExecTaskStreamingRequest> requests =
      fake_.exec_requests();
  ASSERT_GE(requests.size(), 2u);
  ASSERT_TRUE(requests[0].has_setup());
  EXPECT_TRUE(requests[0].setup().tty());
  EXPECT_EQ(requests[0].setup().terminal_size().rows(), 24u);
  EXPECT_EQ(requests[0].setup().terminal_size().columns(), 80u);
  ASSERT_TRUE(requests.back().has_resize());
  EXPECT_EQ(requests.back().resize().rows(), 30u);
  EXPECT_EQ(requests.back().resize().columns(), 100u);
  close(out);
  close(err);
  close(master);
  close(slave);
}

TEST_F(CommandsTest, ExecInteractiveTtyNeedsATerminal) {
  CliResult result = Run({"exec", "-it", "web", "--", "sh"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "berth: exec -i -t: stdin is not a terminal (leave out -t)\n");
  EXPECT_TRUE(fake_.exec_requests().empty());
}

// --- stats

TEST_F(CommandsTest, StatsNoStreamTable) {
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  web.mutable_spec()->mutable_resources()->set_memory_bytes(64 << 20);
  fake_.AddTask(web);
  fake_.AddTask(MakeTask(kDbId, "db", nodepb::TASK_STATE_EXITED));
  fake_.SetStats(kWebId, {Sample(kWebId, 12.5, 16 << 20, 3)},
                 /*hold_open=*/true);
  CliResult result = Run({"stats", "--no-stream"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "TASK           NAME   CPU %    MEM USAGE / LIMIT   MEM %    PIDS\n"
            "aaaabbbbcccc   web    12.50%   16MiB / 64MiB       25.00%   3\n");
  ASSERT_EQ(fake_.stats_requests().size(), 1u);  // running tasks only
  EXPECT_EQ(fake_.stats_requests()[0].task_id(), kWebId);
}

// PIDS: the cgroup's count where measured (threads included), else "--"
// when neither it nor a procfs process list is there.
TEST_F(CommandsTest, StatsPidsFromTheCgroupCountOrUnknown) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  fake_.AddTask(MakeTask(kDbId, "db", nodepb::TASK_STATE_RUNNING));
  nodepb::TaskStatsResponse web = Sample(kWebId, 1, 1 << 20, 0);
  statspb::PidsStats& pids =
      *web.mutable_usage()->mutable_usage()->mutable_pids();
  pids.set_current(7);
  pids.add_measured(statspb::PIDS_FIELD_CURRENT);
  fake_.SetStats(kWebId, {web}, /*hold_open=*/true);
  fake_.SetStats(kDbId, {Sample(kDbId, 2, 2 << 20, 0)}, /*hold_open=*/true);
  CliResult result = Run({"stats", "--no-stream"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("web    1.00%   1MiB / --           --      7\n"));
  EXPECT_THAT(result.out,
              HasSubstr("db     2.00%   2MiB / --           --      --\n"));
}

TEST_F(CommandsTest, StatsWithoutRunningTasksPrintsTheHeaderOnce) {
  fake_.AddTask(MakeTask(kDbId, "db", nodepb::TASK_STATE_EXITED));
  const std::string header =
      "TASK   NAME   CPU %   MEM USAGE / LIMIT   MEM %   PIDS\n";
  for (const char* flag : {"--no-stream", "--json"}) {
    CliResult result = Run({"stats", flag});
    EXPECT_EQ(result.code, 0) << flag;
    EXPECT_EQ(result.out, std::string(flag) == "--json" ? "" : header) << flag;
  }
  EXPECT_EQ(Run({"stats"}).out, header);
  EXPECT_TRUE(fake_.stats_requests().empty());
}

TEST_F(CommandsTest, StatsJsonLinesOfNamedTasks) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  fake_.SetStats(kWebId, {Sample(kWebId, 1, 100, 0), Sample(kWebId, 2, 200, 0)},
                 /*hold_open=*/false);
  CliResult result = Run({"stats", "--json", "web"});
  EXPECT_EQ(result.code, 0) << result.err;
  std::vector<std::string> lines =
      absl::StrSplit(result.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << result.out;
  statspb::TaskResourceUsage second;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(lines[1], &second).ok());
  EXPECT_EQ(second.usage().memory().usage(), 200u);

  CliResult missing = Run({"stats", "nope"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "berth: no task \"nope\"\n");
}

TEST_F(CommandsTest, StatsLiveRedrawsInPlaceUntilStreamsEnd) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  fake_.SetStats(kWebId, {Sample(kWebId, 50, 1024, 1)}, /*hold_open=*/true);
  const int in = MemFile("stdin");
  const int out = MemFile("stdout");
  const int err = MemFile("stderr");
  int code = -1;
  std::thread cli([&] {
    code = RunCli({"stats", "web"}, Environment(in, out, err));
  });
  const std::string row = "aaaabbbbcccc   web    50.00%   1KiB / --";
  // Two redraws of the sampled task, each in place.
  EXPECT_TRUE(berth::testing::WaitFor([&] {
    std::string drawn = ReadBack(out);
    const size_t first = drawn.find(row);
    return first != std::string::npos &&
           drawn.find(row, first + 1) != std::string::npos;
  }));
  fake_.EndHeldStreams();
  cli.join();
  EXPECT_EQ(code, 0) << ReadBack(err);
  const std::string drawn = ReadBack(out);
  EXPECT_THAT(drawn, StartsWith("\033[H\033[2JTASK "));
  std::vector<std::string> frames =
      absl::StrSplit(drawn, "\033[H\033[2J", absl::SkipEmpty());
  ASSERT_GE(frames.size(), 2u);
  EXPECT_THAT(frames[1], HasSubstr(row));
  close(in);
  close(out);
  close(err);
}

// --- stop, rm, node status

TEST_F(CommandsTest, StopPassesTimeoutAndSignal) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  fake_.AddTask(MakeTask(kDbId, "db", nodepb::TASK_STATE_RUNNING));
  CliResult result =
      Run({"stop", "--timeout", "3", "--signal", "SIGINT", "web", "db"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "web\ndb\n");
  ASSERT_EQ(fake_.stop_requests().size(), 2u);
  EXPECT_EQ(fake_.stop_requests()[0].task_id(), "web");
  EXPECT_EQ(fake_.stop_requests()[0].timeout().seconds(), 3);
  EXPECT_EQ(fake_.stop_requests()[0].signal(), "SIGINT");
  EXPECT_EQ(fake_.stop_requests()[1].task_id(), "db");

  CliResult partly = Run({"stop", "nope", "web"});
  EXPECT_EQ(partly.code, 1);
  EXPECT_EQ(partly.out, "web\n");
  EXPECT_EQ(partly.err, "berth: no task \"nope\"\n");
  EXPECT_FALSE(fake_.stop_requests()[2].has_timeout());
}

TEST_F(CommandsTest, RmWithAndWithoutForce) {
  fake_.AddTask(MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING));
  CliResult refused = Run({"rm", "web"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_THAT(refused.err, StartsWith("berth: task aaaabbbb"));
  CliResult forced = Run({"rm", "-f", "web"});
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(forced.out, "web\n");
  ASSERT_EQ(fake_.remove_requests().size(), 2u);
  EXPECT_FALSE(fake_.remove_requests()[0].force());
  EXPECT_TRUE(fake_.remove_requests()[1].force());
}

TEST_F(CommandsTest, NodeStatusTableAndUnhealthyExit) {
  nodepb::GetNodeStatusResponse status;
  status.set_version("0.1.0");
  nodepb::ComponentStatus* netns = status.add_services();
  netns->set_name("berth-netns");
  netns->set_socket("/run/berth/netns.sock");
  netns->set_healthy(true);
  netns->set_message("0.1.0");
  nodepb::ComponentStatus* exec = status.add_plugins();
  exec->set_name("exec");
  exec->set_socket("/run/berth/plugins/exec.sock");
  exec->set_healthy(true);
  exec->set_pid(4242);
  fake_.SetNodeStatus(status);

  CliResult healthy = Run({"node", "status"});
  EXPECT_EQ(healthy.code, 0) << healthy.err;
  EXPECT_EQ(healthy.out,
            "COMPONENT     KIND      HEALTHY   SOCKET                         "
            "PID    MESSAGE\n"
            "berth-netns   service   yes       /run/berth/netns.sock          "
            "-      0.1.0\n"
            "exec          plugin    yes       /run/berth/plugins/exec.sock   "
            "4242\n");

  netns->set_healthy(false);
  netns->set_message("cannot connect");
  fake_.SetNodeStatus(status);
  CliResult unhealthy = Run({"node", "status"});
  EXPECT_EQ(unhealthy.code, 1);
  EXPECT_THAT(unhealthy.out, HasSubstr("berth-netns   service   no "));
  EXPECT_EQ(unhealthy.err, "berth: not healthy: berth-netns\n");

  CliResult json = Run({"node", "status", "--json"});
  EXPECT_EQ(json.code, 1);
  nodepb::GetNodeStatusResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, status));
}

// --- image

const std::string kBusyboxDigest =
    absl::StrCat("sha256:", std::string(64, 'd'));
const std::string kBusyboxConfig =
    absl::StrCat("sha256:1234567890ab", std::string(52, 'c'));
const std::string kLayer1 = absl::StrCat("sha256:", std::string(64, '1'));
const std::string kLayer2 = absl::StrCat("sha256:", std::string(64, '2'));

imagepb::Image MakeImage(const std::string& name, const std::string& digest,
                         const std::string& config, int64_t size) {
  imagepb::Image image;
  image.set_name(name);
  image.set_digest(digest);
  image.set_manifest_digest(digest);
  image.set_config_digest(config);
  image.set_size(size);
  image.add_layers()->set_digest(kLayer1);
  image.mutable_config()->add_cmd("sh");
  return image;
}

imagepb::Image Busybox() {
  imagepb::Image image = MakeImage("docker.io/library/busybox:latest",
                                   kBusyboxDigest, kBusyboxConfig, 2'200'000);
  *image.mutable_created() =
      TimeUtil::SecondsToTimestamp(absl::ToUnixSeconds(kNow - absl::Hours(72)));
  return image;
}

imagepb::LayerProgress LayerAt(const std::string& digest,
                               imagepb::LayerState state, int64_t downloaded) {
  imagepb::LayerProgress layer;
  layer.set_digest(digest);
  layer.set_size(2'000'000);
  layer.set_downloaded(downloaded);
  layer.set_state(state);
  return layer;
}

// The stream of a pull of busybox: layer 1 downloaded and unpacked, layer 2
// already stored; the last message carries the image.
std::vector<imagepb::PullImageProgress> BusyboxPull() {
  std::vector<imagepb::PullImageProgress> messages;
  auto add = [&](const std::string& status, imagepb::LayerState state,
                 int64_t downloaded) {
    imagepb::PullImageProgress& message = messages.emplace_back();
    message.set_status(status);
    *message.add_layers() = LayerAt(kLayer1, state, downloaded);
    *message.add_layers() =
        LayerAt(kLayer2, imagepb::LAYER_STATE_ALREADY_EXISTS, 0);
  };
  add("resolving docker.io/library/busybox:latest",
      imagepb::LAYER_STATE_WAITING, 0);
  add("", imagepb::LAYER_STATE_DOWNLOADING, 0);
  add("", imagepb::LAYER_STATE_DOWNLOADING, 1'500'000);
  add("", imagepb::LAYER_STATE_VERIFYING, 2'000'000);
  add("", imagepb::LAYER_STATE_UNPACKING, 2'000'000);
  add("", imagepb::LAYER_STATE_COMPLETE, 2'000'000);
  *messages.back().mutable_image() = Busybox();
  return messages;
}

const char kBusyboxPullPlain[] =
    "resolving docker.io/library/busybox:latest\n"
    "111111111111: Waiting\n"
    "222222222222: Already exists\n"
    "111111111111: Downloading 2MB\n"
    "111111111111: Verifying Checksum\n"
    "111111111111: Extracting\n"
    "111111111111: Pull complete\n";

TEST_F(CommandsTest, ImagePullPrintsPlainLinesWhenNotATerminal) {
  images_.SetPull("busybox", BusyboxPull());
  CliResult result = Run({"image", "pull", "busybox"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            absl::StrCat(kBusyboxPullPlain, "Digest: ", kBusyboxDigest,
                         "\n"
                         "Status: Downloaded newer image for busybox:latest\n"
                         "docker.io/library/busybox:latest\n"));
  EXPECT_EQ(result.err, "");
  ASSERT_EQ(images_.pull_requests().size(), 1u);
  EXPECT_EQ(images_.pull_requests()[0].reference(), "busybox");
  EXPECT_FALSE(images_.pull_requests()[0].has_platform());
  ASSERT_EQ(images_.images().size(), 1u);  // stored

  // Again: the same digest, "up to date"; docker's `pull` spelling.
  CliResult again = Run({"pull", "--platform", "linux/arm64/v8", "busybox"});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out,
              HasSubstr("Status: Image is up to date for busybox:latest\n"));
  ASSERT_EQ(images_.pull_requests().size(), 2u);
  EXPECT_EQ(images_.pull_requests()[1].platform().architecture(), "arm64");
  EXPECT_EQ(images_.pull_requests()[1].platform().variant(), "v8");
}

TEST_F(CommandsTest, ImagePullQuietAndForcedModes) {
  images_.SetPull("busybox", BusyboxPull());
  CliResult quiet = Run({"image", "pull", "-q", "busybox"});
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.out, "docker.io/library/busybox:latest\n");

  CliResult plain = Run({"image", "pull", "--progress=plain", "busybox"});
  EXPECT_THAT(plain.out, StartsWith(kBusyboxPullPlain));

  // tty on a file: the in-place drawing (no terminal width: with the bar).
  CliResult tty = Run({"image", "pull", "--progress", "tty", "busybox"});
  EXPECT_EQ(tty.code, 0) << tty.err;
  EXPECT_THAT(tty.out, StartsWith("\033[2Kresolving docker.io/library/"
                                  "busybox:latest\n"
                                  "\033[2K111111111111: Waiting\n"
                                  "\033[2K222222222222: Already exists\n"
                                  "\033[2A\033[2K111111111111: Downloading ["));
  EXPECT_THAT(tty.out, HasSubstr("\033[2A\033[2K111111111111: Pull complete\n"
                                 "\033[2K222222222222: Already exists\n"
                                 "Digest: "));
}

// On a terminal (a pty 120 columns wide) the layers are redrawn in place,
// each with its bar.
TEST_F(CommandsTest, ImagePullRedrawsInPlaceOnATerminal) {
  images_.SetPull("busybox", BusyboxPull());
  struct winsize size = {};
  size.ws_row = 24;
  size.ws_col = 120;
  int master = -1;
  int slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &size), 0);
  std::string drawn;
  std::thread reader([&] {
    char buffer[4096];
    ssize_t n;
    while ((n = read(master, buffer, sizeof(buffer))) > 0)
      drawn.append(buffer, n);
  });
  const int in = MemFile("stdin");
  const int err = MemFile("stderr");
  const int code =
      RunCli({"image", "pull", "busybox"}, Environment(in, slave, err));
  close(slave);  // the reader sees the end (EIO) once the output is read
  reader.join();
  EXPECT_EQ(code, 0) << ReadBack(err);
  // The terminal turns "\n" into "\r\n".
  EXPECT_THAT(drawn, HasSubstr(absl::StrCat(
                         "\033[2A\033[2K111111111111: Downloading [",
                         std::string(37, '='), ">", std::string(12, ' '),
                         "]    1.5MB/2MB\r\n")));
  EXPECT_THAT(drawn, HasSubstr("\033[2A\033[2K111111111111: Pull complete\r\n"
                               "\033[2K222222222222: Already exists\r\n"
                               "Digest: "));
  EXPECT_THAT(drawn, HasSubstr("docker.io/library/busybox:latest\r\n"));
  close(in);
  close(err);
  close(master);
}

TEST_F(CommandsTest, ImagePullErrorIsOneLine) {
  CliResult result = Run({"image", "pull", "nope"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "berth: pull nope: manifest unknown\n");
}

TEST_F(CommandsTest, ImagePullCtrlCCancelsTheStream) {
  std::vector<imagepb::PullImageProgress> first = BusyboxPull();
  first.resize(2);
  images_.SetPull("busybox", first);
  images_.HoldPullsOpen();
  CliResult result;
  std::thread cli([&] { result = Run({"image", "pull", "busybox"}); });
  ASSERT_TRUE(berth::testing::WaitFor(
      [&] { return !images_.pull_requests().empty(); }));
  // The handler is installed before the call is made: the call is there.
  kill(getpid(), SIGINT);
  cli.join();
  EXPECT_EQ(result.code, 130) << result.err;
  EXPECT_EQ(result.err, "berth: pull of busybox cancelled\n");
  EXPECT_THAT(result.out, StartsWith("resolving docker.io/library/busybox"));
  EXPECT_TRUE(
      berth::testing::WaitFor([&] { return images_.pull_cancelled(); }));
  EXPECT_TRUE(images_.images().empty());
}

TEST_F(CommandsTest, ImageImportStreamsTheFileInChunks) {
  const std::string path = dir_.Join("busybox.tar");
  std::string archive(2 * (1 << 20) + 3, '\0');
  for (size_t i = 0; i < archive.size(); ++i) {
    archive[i] = static_cast<char>((i * 7) % 253);
  }
  std::ofstream(path, std::ios::binary) << archive;
  imagepb::ImportImageResponse response;
  *response.add_images() = Busybox();
  *response.add_images() =
      MakeImage("docker.io/library/alpine:3", kLayer2, kLayer1, 100);
  images_.SetImportResponse(response);

  CliResult result = Run({"image", "import", "--name", "mine:1", path});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            absl::StrCat(
                "Imported docker.io/library/busybox:latest ", kBusyboxDigest,
                "\n", "Imported docker.io/library/alpine:3 ", kLayer2, "\n"));
  EXPECT_EQ(images_.import_first().options().name(), "mine:1");
  EXPECT_EQ(images_.import_first().chunk(), "");
  EXPECT_THAT(images_.import_chunk_sizes(),
              ElementsAre(1u << 20, 1u << 20, 3u));
  EXPECT_TRUE(images_.import_data() == archive);

  // From stdin.
  CliResult piped = Run({"image", "import", "-"}, "small archive");
  EXPECT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(images_.import_data(), "small archive");
  EXPECT_EQ(images_.import_first().options().name(), "");

  images_.FailCalls("ImportImage",
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "archive: not a tar (at byte 0)"));
  CliResult bad = Run({"image", "import", "-"}, "junk");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "berth: archive: not a tar (at byte 0)\n");
}

TEST_F(CommandsTest, ImageLsTable) {
  images_.AddImage(Busybox());
  images_.AddImage(
      MakeImage(absl::StrCat("127.0.0.1:5000/team/app@", kLayer2), kLayer2,
                absl::StrCat("sha256:", std::string(64, 'e')), 1234));
  const std::string table =
      "REPOSITORY                TAG      IMAGE ID       CREATED      SIZE\n"
      "127.0.0.1:5000/team/app   <none>   eeeeeeeeeeee   N/A          "
      "1.23kB\n"
      "busybox                   latest   1234567890ab   3 days ago   2.2MB\n";
  CliResult result = Run({"image", "ls"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, table);
  EXPECT_EQ(Run({"images"}).out, table);
  EXPECT_EQ(Run({"image", "list"}).out, table);

  CliResult digests = Run({"images", "--digests", "--no-trunc"});
  EXPECT_THAT(digests.out,
              StartsWith("REPOSITORY                TAG      DIGEST"));
  EXPECT_THAT(digests.out,
              HasSubstr(absl::StrCat("busybox                   latest   ",
                                     kBusyboxDigest, "   ", kBusyboxConfig,
                                     "   3 days ago   2.2MB\n")));

  // -q: each image once, though two names share busybox's.
  images_.AddImage(MakeImage("docker.io/library/busybox:1", kBusyboxDigest,
                             kBusyboxConfig, 2'200'000));
  EXPECT_EQ(Run({"image", "ls", "-q"}).out, "eeeeeeeeeeee\n1234567890ab\n");

  CliResult json = Run({"image", "ls", "--json"});
  imagepb::ListImagesResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok())
      << json.out;
  EXPECT_EQ(parsed.images_size(), 3);
}

TEST_F(CommandsTest, ImageLsEmpty) {
  EXPECT_EQ(Run({"image", "ls"}).out,
            "REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n");
  EXPECT_EQ(Run({"image", "ls", "--json"}).out, "{\n \"images\": []\n}\n");
  images_.FailCalls("ListImages",
                    grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "berth-images at /run/berth/images.sock: "
                                 "connection refused"));
  CliResult down = Run({"images"});
  EXPECT_EQ(down.code, 1);
  // The node answers; the image service behind it does not.
  EXPECT_EQ(down.err,
            "berth: berth-images at /run/berth/images.sock: connection "
            "refused\n");
  // A node that does not forward the image service.
  images_.FailCalls("ListImages",
                    grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  CliResult old = Run({"images"});
  EXPECT_EQ(old.code, 1);
  EXPECT_EQ(old.err, absl::StrCat("berth: berth-node at ", socket_path_,
                                  " does not serve this call: is it older "
                                  "than this berth?\n"));
}

TEST_F(CommandsTest, ImageInspectPrintsEachImageAsJson) {
  images_.AddImage(Busybox());
  CliResult result = Run({"image", "inspect", "busybox"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("\n \"name\": \"docker.io/library/"));
  imagepb::Image parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(result.out, &parsed).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, Busybox()));

  // By image id prefix; a missing one is said and the others printed.
  CliResult mixed = Run({"image", "inspect", "nope", "1234567890ab"});
  EXPECT_EQ(mixed.code, 1);
  EXPECT_EQ(mixed.err, "berth: no image \"nope\"\n");
  EXPECT_THAT(mixed.out, StartsWith("{\n \"name\": \"docker.io/library/"));
}

TEST_F(CommandsTest, ImageRmPrintsUntaggedAndDeleted) {
  images_.AddImage(Busybox());
  images_.AddImage(MakeImage("docker.io/library/busybox:1", kBusyboxDigest,
                             kBusyboxConfig, 2'200'000));
  CliResult first = Run({"image", "rm", "busybox:1"});
  EXPECT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.out, "Untagged: busybox:1\n");  // busybox:latest keeps it
  CliResult second = Run({"rmi", "-f", "nope", "busybox"});
  EXPECT_EQ(second.code, 1);
  EXPECT_EQ(second.err, "berth: no image \"nope\"\n");
  EXPECT_EQ(second.out,
            absl::StrCat("Untagged: busybox:latest\nDeleted: ", kBusyboxConfig,
                         "\nDeleted: ", kLayer1, "\n"));
  const std::vector<imagepb::RemoveImageRequest> requests =
      images_.remove_requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_FALSE(requests[0].force());
  EXPECT_EQ(requests[2].reference(), "busybox");
  EXPECT_TRUE(requests[2].force());
  EXPECT_TRUE(images_.images().empty());
}

TEST_F(CommandsTest, ImagePruneAsksUnlessForced) {
  imagepb::PruneImagesResponse pruned;
  pruned.add_untagged("docker.io/library/old:1");
  pruned.add_deleted(kLayer1);
  pruned.set_reclaimed_bytes(45'600'000);
  images_.SetPruneResponse(pruned);

  CliResult declined = Run({"image", "prune"}, "n\n");
  EXPECT_EQ(declined.code, 0);
  EXPECT_EQ(declined.out,
            "WARNING! This will remove the blobs and layers no image and no "
            "task uses.\nAre you sure you want to continue? [y/N] ");
  EXPECT_TRUE(images_.prune_requests().empty());

  CliResult confirmed = Run({"image", "prune", "-a"}, "y\n");
  EXPECT_EQ(confirmed.code, 0) << confirmed.err;
  EXPECT_THAT(confirmed.out, StartsWith("WARNING! This will remove every image "
                                        "no task uses"));
  EXPECT_THAT(
      confirmed.out,
      HasSubstr(absl::StrCat("[y/N] Deleted Images:\n"
                             "untagged: old:1\n"
                             "deleted: ",
                             kLayer1, "\n\nTotal reclaimed space: 45.6MB\n")));
  CliResult forced = Run({"image", "prune", "-f"});
  EXPECT_EQ(forced.code, 0);
  EXPECT_THAT(forced.out, StartsWith("Deleted Images:\n"));
  const std::vector<imagepb::PruneImagesRequest> requests =
      images_.prune_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0].all());
  EXPECT_FALSE(requests[1].all());

  images_.SetPruneResponse(imagepb::PruneImagesResponse());
  EXPECT_EQ(Run({"image", "prune", "--force"}).out,
            "Total reclaimed space: 0B\n");
}

TEST_F(CommandsTest, ImageTagGivesAnotherName) {
  images_.AddImage(Busybox());
  CliResult result = Run({"image", "tag", "busybox", "mine/box:v1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  ASSERT_EQ(images_.tag_requests().size(), 1u);
  EXPECT_EQ(images_.tag_requests()[0].source(), "busybox");
  EXPECT_EQ(images_.tag_requests()[0].target(), "mine/box:v1");
  EXPECT_THAT(Run({"images"}).out, HasSubstr("\nmine/box     v1 "));
  CliResult missing = Run({"image", "tag", "nope", "x"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "berth: no image \"nope\"\n");
}

// --- run with an image

TEST_F(CommandsTest, RunImageThatIsStoredRunsWithoutPulling) {
  images_.AddImage(Busybox());
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  fake_.SetRunOutcome(outcome);
  fake_.SetLogs(kWebId, {Chunk(nodepb::LOG_STREAM_STDOUT, "hi\n")});
  CliResult result = Run({"run", "--rm", "busybox", "echo", "hi"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "hi\n");
  EXPECT_EQ(result.err, "");
  EXPECT_TRUE(images_.pull_requests().empty());
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 1u);
  const nodepb::TaskSpec& spec = requests[0].spec();
  EXPECT_EQ(spec.image().reference(), "busybox");
  EXPECT_FALSE(spec.image().override_entrypoint());
  EXPECT_EQ(spec.driver_config().fields().at("command").string_value(), "echo");
  EXPECT_EQ(spec.driver_config()
                .fields()
                .at("args")
                .list_value()
                .values(0)
                .string_value(),
            "hi");
}

TEST_F(CommandsTest, RunImageEntrypointReachesTheSpec) {
  images_.AddImage(Busybox());
  EXPECT_EQ(
      Run({"run", "-d", "--entrypoint", "/bin/echo", "busybox", "hi"}).code, 0);
  EXPECT_EQ(Run({"run", "-d", "--entrypoint", "", "busybox"}).code, 0);
  const std::vector<nodepb::RunTaskRequest> requests = fake_.run_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0].spec().image().override_entrypoint());
  EXPECT_THAT(requests[0].spec().image().entrypoint(),
              ElementsAre("/bin/echo"));
  EXPECT_EQ(
      requests[0].spec().driver_config().fields().at("command").string_value(),
      "hi");
  EXPECT_TRUE(requests[1].spec().image().override_entrypoint());
  EXPECT_TRUE(requests[1].spec().image().entrypoint().empty());
  EXPECT_EQ(requests[1].spec().driver_config().fields().count("command"), 0u);
}

TEST_F(CommandsTest, RunPullsAMissingImageFirstWithProgressOnStderr) {
  images_.SetPull("busybox", BusyboxPull());
  nodepb::Task outcome = MakeTask(kWebId, "", nodepb::TASK_STATE_EXITED);
  fake_.SetRunOutcome(outcome);
  fake_.SetLogs(kWebId, {Chunk(nodepb::LOG_STREAM_STDOUT, "hi\n")});
  CliResult result = Run({"run", "busybox", "echo", "hi"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "hi\n");
  EXPECT_EQ(result.err,
            absl::StrCat("Unable to find image 'busybox' locally\n",
                         kBusyboxPullPlain, "Digest: ", kBusyboxDigest,
                         "\nStatus: Downloaded newer image for "
                         "busybox:latest\n"));
  ASSERT_EQ(images_.pull_requests().size(), 1u);
  ASSERT_EQ(fake_.run_requests().size(), 1u);

  // -q: pulled without a word.
  images_.SetPull("alpine", {BusyboxPull().back()});
  CliResult quiet = Run({"run", "-q", "-d", "alpine"});
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(images_.pull_requests().size(), 2u);
}

TEST_F(CommandsTest, RunPullPolicies) {
  images_.SetPull("busybox", BusyboxPull());
  CliResult never = Run({"run", "--pull=never", "busybox"});
  EXPECT_EQ(never.code, 1);
  EXPECT_EQ(never.err, "berth: no image \"busybox\" (--pull=never)\n");
  EXPECT_TRUE(images_.pull_requests().empty());
  EXPECT_TRUE(fake_.run_requests().empty());

  images_.AddImage(Busybox());
  CliResult always = Run({"run", "-d", "--pull", "always", "busybox"});
  EXPECT_EQ(always.code, 0) << always.err;
  EXPECT_EQ(images_.pull_requests().size(), 1u);
  EXPECT_THAT(always.err,
              HasSubstr("Status: Image is up to date for busybox:latest\n"));
  EXPECT_THAT(always.err, Not(HasSubstr("Unable to find")));
  EXPECT_EQ(Run({"run", "-d", "--pull=never", "busybox"}).code, 0);
  EXPECT_EQ(fake_.run_requests().size(), 2u);
}

TEST_F(CommandsTest, RunWhosePullFailsStartsNothing) {
  CliResult result = Run({"run", "nope:1", "true"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "Unable to find image 'nope:1' locally\n"
            "berth: pull nope:1: manifest unknown\n");
  EXPECT_TRUE(fake_.run_requests().empty());
}

TEST_F(CommandsTest, InspectShowsTheTasksImage) {
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  web.mutable_spec()->mutable_image()->set_reference("busybox");
  nodepb::TaskImageStatus& image = *web.mutable_image();
  image.set_name("docker.io/library/busybox:latest");
  image.set_digest(kBusyboxDigest);
  image.set_manifest_digest(kBusyboxDigest);
  image.set_config_digest(kBusyboxConfig);
  image.set_rootfs("/var/lib/berth/images/snapshots/x/rootfs");
  fake_.AddTask(web);
  CliResult result = Run({"inspect", "web"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("\"reference\": \"busybox\""));
  EXPECT_THAT(result.out,
              HasSubstr("\"name\": \"docker.io/library/busybox:latest\""));
  EXPECT_THAT(result.out,
              HasSubstr(absl::StrCat("\"digest\": \"", kBusyboxDigest, "\"")));
  EXPECT_THAT(result.out, HasSubstr("\"configDigest\": \""));
  EXPECT_THAT(result.out, HasSubstr("\"rootfs\": \"/var/lib/berth/images/"));
}

// --- ps --filter and --format, events' health, completion (issue 17).

// web: running, healthy, labelled; db: exited with 2, no health check.
void AddHealthTasks(FakeNodeService* fake) {
  nodepb::Task web = MakeTask(kWebId, "web", nodepb::TASK_STATE_RUNNING);
  (*web.mutable_spec()->mutable_labels())["tier"] = "front";
  web.mutable_health()->set_status(nodepb::HEALTH_STATUS_HEALTHY);
  nodepb::Task db = MakeTask(kDbId, "db", nodepb::TASK_STATE_EXITED);
  db.mutable_exit_result()->set_exit_code(2);
  fake->AddTask(web);
  fake->AddTask(db);
}

TEST_F(CommandsTest, PsFiltersAndFormats) {
  AddHealthTasks(&fake_);
  // The STATE column says the health.
  CliResult table = Run({"ps"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("   running (healthy)   "));

  CliResult labelled =
      Run({"ps", "--filter", "label=tier=front", "--format", "{{.Names}}"});
  EXPECT_EQ(labelled.code, 0) << labelled.err;
  EXPECT_EQ(labelled.out, "web\n");
  // A status filter lists ended tasks without -a (docker's rule).
  CliResult exited =
      Run({"ps", "-f", "status=exited", "--format", "{{.Names}}: {{.State}}"});
  EXPECT_EQ(exited.out, "db: exited\n");
  ASSERT_EQ(fake_.list_requests().size(), 3u);
  EXPECT_FALSE(fake_.list_requests()[1].all());
  EXPECT_TRUE(fake_.list_requests()[2].all());
  // One key's values OR, keys AND.
  EXPECT_EQ(Run({"ps", "-a", "-f", "name=d", "-f", "name=w", "--format",
                 "{{.Names}}"})
                .out,
            "web\ndb\n");
  EXPECT_EQ(Run({"ps", "-a", "-f", "name=w", "-f", "status=exited", "-q"}).out,
            "");
  EXPECT_EQ(Run({"ps", "-a", "-f", "health=none", "-q"}).out, "1234567890ab\n");

  EXPECT_EQ(Run({"ps", "-a", "--format",
                 "table {{.ID}}\\t{{.Names}}\\t{{.Health}}\\t{{.Label "
                 "\"tier\"}}"})
                .out,
            "ID             NAMES   HEALTH    TIER\n"
            "aaaabbbbcccc   web     healthy   front\n"
            "1234567890ab   db      none\n");
  CliResult json = Run({"ps", "--format", "json"});
  EXPECT_THAT(json.out, StartsWith("{\"Command\":\"/bin/sleep 100\","));
  EXPECT_THAT(json.out, HasSubstr("\"Health\":\"healthy\""));
  EXPECT_THAT(json.out, HasSubstr("\"Status\":\"Up"));
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 1);

  // --json keeps the ListTasksResponse, filtered.
  CliResult filtered = Run({"ps", "-a", "-f", "health=healthy", "--json"});
  nodepb::ListTasksResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(filtered.out, &parsed).ok())
      << filtered.out;
  ASSERT_EQ(parsed.tasks_size(), 1);
  EXPECT_EQ(parsed.tasks(0).spec().name(), "web");
}

TEST_F(CommandsTest, PsBadFilterOrFormatIsAUsageError) {
  AddHealthTasks(&fake_);
  for (const auto& [args, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"ps", "--filter", "colour=red"},
            "berth ps: --filter \"colour=red\": unknown key \"colour\" "
            "(keys: label, name, id, status, health); see 'berth ps "
            "--help'\n"},
           {{"ps", "-f", "status=paused"},
            "berth ps: --filter \"status=paused\": unknown status"},
           {{"ps", "-f", "health=sick"},
            "berth ps: --filter \"health=sick\": unknown health"},
           {{"ps", "--format", "{{.Nmaes}}"},
            "berth ps: --format \"{{.Nmaes}}\": unknown field .Nmaes"},
           {{"ps", "--format", "{{.Names}}", "--json"},
            "berth ps: --format and --json cannot be used together"},
       }) {
    CliResult result = Run(args);
    EXPECT_EQ(result.code, 2) << args[2];
    EXPECT_THAT(result.err, StartsWith(message));
    EXPECT_EQ(result.out, "");
  }
  EXPECT_TRUE(fake_.list_requests().empty());
}

TEST_F(CommandsTest, EventsWordHealthAsDocker) {
  nodepb::EventsResponse health;
  *health.mutable_timestamp() = TimeUtil::SecondsToTimestamp(1700000000);
  health.set_type(nodepb::EVENT_TYPE_TASK_HEALTH);
  health.set_task_id(kWebId);
  health.set_message("task web health_status: unhealthy");
  (*health.mutable_annotations())["health_status"] = "unhealthy";
  nodepb::EventsResponse exited = health;
  exited.set_type(nodepb::EVENT_TYPE_TASK_EXITED);
  exited.set_message("exited with code 2");
  exited.clear_annotations();
  fake_.SetEvents({health, exited});
  CliResult result = Run({"events"});
  EXPECT_EQ(result.code, 0) << result.err;
  const std::vector<std::string> lines =
      absl::StrSplit(result.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << result.out;
  EXPECT_THAT(lines[0],
              ::testing::EndsWith(" health_status: unhealthy aaaabbbbcccc"));
  EXPECT_THAT(lines[1],
              ::testing::EndsWith(" exited aaaabbbbcccc exited with code 2"));
  CliResult json = Run({"events", "--json"});
  EXPECT_THAT(json.out, HasSubstr("\"EVENT_TYPE_TASK_HEALTH\""));
}

TEST_F(CommandsTest, CompletionPrintsTheScripts) {
  CliResult bash = Run({"completion", "bash"});
  EXPECT_EQ(bash.code, 0) << bash.err;
  EXPECT_THAT(bash.out, StartsWith("# bash completion for berth"));
  EXPECT_THAT(bash.out, HasSubstr("complete -F _berth berth\n"));
  CliResult zsh = Run({"completion", "zsh"});
  EXPECT_EQ(zsh.code, 0) << zsh.err;
  EXPECT_THAT(zsh.out, StartsWith("#compdef berth\n"));
  CliResult fish = Run({"completion", "fish"});
  EXPECT_EQ(fish.code, 2);
  EXPECT_EQ(fish.err,
            "berth completion: unknown shell \"fish\": bash or zsh; see "
            "'berth completion --help'\n");
  EXPECT_EQ(Run({"completion"}).code, 2);
  // No node needed.
  EXPECT_TRUE(fake_.list_requests().empty());
}

TEST_F(CommandsTest, HiddenCompleteListsNames) {
  AddHealthTasks(&fake_);
  images_.AddImage(Busybox());
  CliResult tasks = Run({"__complete", "tasks"});
  EXPECT_EQ(tasks.code, 0) << tasks.err;
  EXPECT_EQ(tasks.out, "web\ndb\n");
  ASSERT_EQ(fake_.list_requests().size(), 1u);
  EXPECT_TRUE(fake_.list_requests()[0].all());
  CliResult images = Run({"__complete", "images"});
  EXPECT_EQ(images.code, 0) << images.err;
  EXPECT_EQ(images.out, "busybox:latest\n");
  EXPECT_EQ(Run({"__complete", "volumes"}).code, 2);
  // Quiet when the node is down.
  variables_["BERTH_NODE_SOCKET"] = dir_.Join("nothing.sock");
  CliResult down = Run({"__complete", "tasks"});
  EXPECT_EQ(down.code, 1);
  EXPECT_EQ(down.out, "");
  EXPECT_EQ(down.err, "");
}

}  // namespace
}  // namespace berth::cli
