// berth-node: serves berth.node.v1.NodeService on <runtime_dir>/node.sock,
// runs the driver plugins of its plugin configuration, keeps its state in
// <state_dir>/node/state.db, and carries tasks across restarts of itself and
// of its neighbours. SIGTERM or SIGINT: stops serving and stops the plugins;
// tasks keep running for the next berth-node to recover.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/server_flags.h"
#include "services/common/service_main.h"
#include "services/node/node_server.h"
#include "services/node/plugin_manager.h"
#include "services/node/restart_policy.h"
#include "services/node/task_manager.h"
#include "services/node/task_userns.h"

ABSL_FLAG(std::string, runtime_dir, std::string(berth::kDefaultRuntimeDir),
          "Directory of berth's sockets: serves on <runtime_dir>/node.sock; "
          "plugins put theirs in <runtime_dir>/plugins.");
ABSL_FLAG(std::string, state_dir, "/var/lib/berth",
          "berth's state directory: the node keeps <state_dir>/node/state.db "
          "and its tasks' directories in <state_dir>/node/tasks.");
ABSL_FLAG(std::string, plugin_dir, "/usr/lib/berth/plugins",
          "Where the plugin configuration's relative binaries are.");
ABSL_FLAG(std::string, plugin_config, "/etc/berth/plugins.json",
          "The driver plugins to run (JSON: {\"plugins\": [{\"name\", "
          "\"binary\", \"args\", \"env\", \"config\"}]}; see "
          "plugins/DRIVERS.md).");
ABSL_FLAG(std::string, netns_socket, "",
          "berth-netns' socket; empty: <runtime_dir>/netns.sock; \"none\": "
          "run without it (host networking only).");
ABSL_FLAG(std::string, stats_socket, "",
          "berth-stats' socket, given to the plugins; empty: "
          "<runtime_dir>/stats.sock; \"none\": without it.");
ABSL_FLAG(std::string, proxy_socket, "",
          "berth-proxy's socket, given to the plugins; empty: "
          "<runtime_dir>/proxy.sock; \"none\": without it.");
ABSL_FLAG(std::string, images_socket, "",
          "berth-images' socket (image tasks' roots; berth.image.v1 is "
          "forwarded to it on node.sock); empty: <runtime_dir>/images.sock; "
          "\"none\": without it (tasks without an image only).");
ABSL_FLAG(std::string, default_userns, "host",
          "The user namespace of a task whose spec names none: \"host\", or "
          "\"auto\" (its root is a range of unprivileged host ids of its "
          "own; see --userns_subid_user).");
ABSL_FLAG(std::string, userns_subid_user, "berth",
          "Whose subordinate ids in /etc/subuid and /etc/subgid (by name or "
          "uid) userns \"auto\" hands out, --userns_size per task.");
ABSL_FLAG(uint32_t, userns_base, 0,
          "Non-zero: userns \"auto\" hands out host ids [base, base + "
          "--userns_count) instead of subordinate ids; at least 65536.");
ABSL_FLAG(uint32_t, userns_count, 0, "See --userns_base.");
ABSL_FLAG(uint32_t, userns_size, 65536,
          "Host ids (uids and gids alike) mapped into each task's user "
          "namespace.");
ABSL_FLAG(int32_t, max_tasks, 1024,
          "The most tasks the node keeps, running or ended (each is a record, "
          "a directory and, running, a thread): RunTask beyond it is "
          "RESOURCE_EXHAUSTED until tasks are removed. At least 1.");
ABSL_FLAG(int32_t, restart_history, 10,
          "The earlier runs of a restarted task whose output is kept (berth "
          "logs shows them); older runs' output is deleted. The task's "
          "restart count still counts every restart. 0: none kept.");
ABSL_FLAG(absl::Duration, restart_min_delay, absl::Milliseconds(100),
          "No restart of a task (--restart always or on-failure) comes "
          "sooner than this after its run ended, whatever its policy's "
          "delay; each run in a row shorter than --restart_backoff_reset "
          "doubles it, up to --restart_max_delay.");
ABSL_FLAG(absl::Duration, restart_max_delay, absl::Seconds(10),
          "Where the doubling of restart delays stops (a policy's own longer "
          "delay is kept). See --restart_min_delay.");
ABSL_FLAG(absl::Duration, restart_backoff_reset, absl::Seconds(10),
          "A run that lasted at least this long starts the doubling of its "
          "task's restart delay over. See --restart_min_delay.");
ABSL_FLAG(int32_t, max_streams_per_client, 64,
          "The streaming calls (events, logs, stats, exec, attach, image pulls "
          "and imports) one client connection of node.sock may hold open at "
          "once; one more is RESOURCE_EXHAUSTED until one ends. At least 1.");
ABSL_FLAG(uint64_t, default_pids_limit, 4096,
          "The most processes and threads (pids.max) of a task whose spec "
          "sets no resources.pids_limit, written into its spec when the "
          "task is accepted (berth inspect shows it). 0: no limit; else at "
          "least 32 (a sandbox task's init and agent count in it).");
ABSL_FLAG(std::string, socket_group, "berth",
          "Members of this group may call node.sock besides root (the socket "
          "is given to it, 0660; a runtime directory the node makes is "
          "root:<group> 0750). Empty, or a group that does not exist (a "
          "warning): root only, 0600.");
ABSL_FLAG(std::string, node_id, "",
          "The node's identifier given to plugins; empty: the host name.");

namespace {

constexpr char kUsage[] =
    "berth-node: runs tasks through driver plugins, with their network from "
    "berth-netns, and keeps them across restarts\n"
    "usage: berth-node [--runtime_dir=/run/berth] [--state_dir=/var/lib/berth] "
    "[--plugin_config=/etc/berth/plugins.json]";
constexpr char kVersion[] = "0.1.0";
constexpr absl::Duration kGrace = absl::Seconds(5);

std::string Neighbour(const std::string& flag, const std::string& runtime_dir,
                      const char* socket) {
  if (flag == "none") return "";
  if (flag.empty()) return absl::StrCat(runtime_dir, "/", socket);
  return flag;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// The limits' flags: usable values only.
absl::Status CheckLimitFlags(const berth::node::TaskManager::Options& tasks) {
  if (tasks.max_tasks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_tasks must be at least 1, not ", tasks.max_tasks));
  }
  if (tasks.restart_history < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--restart_history must not be negative, not ", tasks.restart_history));
  }
  const berth::node::RestartBackoff& backoff = tasks.restart_backoff;
  for (const auto& [flag, value] :
       {std::pair<const char*, absl::Duration>{"--restart_min_delay",
                                               backoff.min_delay},
        {"--restart_max_delay", backoff.max_delay},
        {"--restart_backoff_reset", backoff.reset_after}}) {
    if (value < absl::ZeroDuration() || value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " must be a finite duration not below 0, not ",
                       absl::FormatDuration(value)));
    }
  }
  if (backoff.max_delay < backoff.min_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--restart_max_delay (", absl::FormatDuration(backoff.max_delay),
        ") must not be below --restart_min_delay (",
        absl::FormatDuration(backoff.min_delay), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  absl::StatusOr<std::vector<berth::node::PluginSpec>> plugins =
      berth::node::LoadPluginConfig(absl::GetFlag(FLAGS_plugin_config),
                                    absl::GetFlag(FLAGS_plugin_dir));
  if (!plugins.ok()) {
    LOG(ERROR) << plugins.status().message();
    return 2;
  }
  berth::node::NodeServer::Options options;
  options.runtime_dir = absl::GetFlag(FLAGS_runtime_dir);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.plugins = *std::move(plugins);
  options.netns_socket = Neighbour(absl::GetFlag(FLAGS_netns_socket),
                                   options.runtime_dir, "netns.sock");
  options.stats_socket = Neighbour(absl::GetFlag(FLAGS_stats_socket),
                                   options.runtime_dir, "stats.sock");
  options.proxy_socket = Neighbour(absl::GetFlag(FLAGS_proxy_socket),
                                   options.runtime_dir, "proxy.sock");
  options.images_socket = Neighbour(absl::GetFlag(FLAGS_images_socket),
                                    options.runtime_dir, "images.sock");
  options.node_id = absl::GetFlag(FLAGS_node_id).empty()
                        ? HostName()
                        : absl::GetFlag(FLAGS_node_id);
  options.version = kVersion;
  options.task_options.default_userns = absl::GetFlag(FLAGS_default_userns);
  if (absl::Status s =
          berth::node::CheckDefaultUserns(options.task_options.default_userns);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return 2;
  }
  options.id_ranges.subid_user = absl::GetFlag(FLAGS_userns_subid_user);
  options.id_ranges.base = absl::GetFlag(FLAGS_userns_base);
  options.id_ranges.count = absl::GetFlag(FLAGS_userns_count);
  options.id_ranges.size = absl::GetFlag(FLAGS_userns_size);
  options.task_options.max_tasks = absl::GetFlag(FLAGS_max_tasks);
  options.task_options.restart_history = absl::GetFlag(FLAGS_restart_history);
  options.task_options.restart_backoff.min_delay =
      absl::GetFlag(FLAGS_restart_min_delay);
  options.task_options.restart_backoff.max_delay =
      absl::GetFlag(FLAGS_restart_max_delay);
  options.task_options.restart_backoff.reset_after =
      absl::GetFlag(FLAGS_restart_backoff_reset);
  options.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  if (options.max_streams_per_client < 1) {
    LOG(ERROR) << "--max_streams_per_client must be at least 1, not "
               << options.max_streams_per_client;
    return 2;
  }
  if (absl::Status s = CheckLimitFlags(options.task_options); !s.ok()) {
    LOG(ERROR) << s.message();
    return 2;
  }
  options.task_options.default_pids_limit =
      absl::GetFlag(FLAGS_default_pids_limit);
  if (const uint64_t pids = options.task_options.default_pids_limit;
      pids != 0 && (pids < 32 || pids > 4194304)) {
    LOG(ERROR) << "--default_pids_limit must be 0 (none) or 32 to 4194304 "
                  "(pids.max's largest), not "
               << pids;
    return 2;
  }
  options.grace = kGrace;
  absl::StatusOr<int64_t> max_message_bytes = berth::MaxMessageBytesFlag();
  if (!max_message_bytes.ok()) {
    LOG(ERROR) << max_message_bytes.status().message();
    return 2;
  }
  options.max_message_bytes = *max_message_bytes;
  std::string warning;
  options.socket_access =
      berth::GroupSocketAccess(absl::GetFlag(FLAGS_socket_group), &warning);
  if (!warning.empty()) LOG(WARNING) << "--socket_group: " << warning;
  // Before anything makes it (the plugins' directory is in it).
  warning.clear();
  if (absl::Status s = berth::PrepareRuntimeDirectory(
          options.runtime_dir, options.socket_access, &warning);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  if (!warning.empty()) LOG(WARNING) << "--socket_group: " << warning;
  absl::StatusOr<std::unique_ptr<berth::node::NodeServer>> node =
      berth::node::NodeServer::BuildAndStart(std::move(options));
  if (!node.ok()) {
    LOG(ERROR) << node.status().message();
    return 1;
  }
  berth::WaitForShutdownSignal();
  (*node)->Shutdown();
  LOG(INFO) << "stopped; tasks keep running";
  return 0;
}
