// berth-node: serves berth.node.v1.NodeService on <runtime_dir>/node.sock,
// runs the driver plugins of its plugin configuration, keeps its state in
// <state_dir>/node/state.db, and carries tasks across restarts of itself and
// of its neighbours. SIGTERM or SIGINT: stops serving and stops the plugins;
// tasks keep running for the next berth-node to recover.

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "services/common/grpc_server.h"
#include "services/common/service_main.h"
#include "services/node/event_bus.h"
#include "services/node/node_service.h"
#include "services/node/plugin_manager.h"
#include "services/node/task_manager.h"
#include "services/node/task_store.h"

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

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  const std::string runtime_dir = absl::GetFlag(FLAGS_runtime_dir);
  const std::string state_dir =
      absl::StrCat(absl::GetFlag(FLAGS_state_dir), "/node");
  if (absl::Status s = berth::node::MakeStateDir(state_dir); !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  absl::StatusOr<std::vector<berth::node::PluginSpec>> plugins =
      berth::node::LoadPluginConfig(absl::GetFlag(FLAGS_plugin_config),
                                    absl::GetFlag(FLAGS_plugin_dir));
  if (!plugins.ok()) {
    LOG(ERROR) << plugins.status().message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<berth::node::TaskStore>> store =
      berth::node::TaskStore::Open(absl::StrCat(state_dir, "/state.db"));
  if (!store.ok()) {
    LOG(ERROR) << store.status().message();
    return 1;
  }

  berth::node::EventBus events;
  berth::node::PluginManager::Options plugin_options;
  plugin_options.socket_dir = absl::StrCat(runtime_dir, "/plugins");
  plugin_options.store = store->get();
  plugin_options.node.set_node_id(absl::GetFlag(FLAGS_node_id).empty()
                                      ? HostName()
                                      : absl::GetFlag(FLAGS_node_id));
  plugin_options.node.set_runtime_dir(runtime_dir);
  plugin_options.node.set_state_dir(absl::GetFlag(FLAGS_state_dir));
  const std::string stats_socket =
      Neighbour(absl::GetFlag(FLAGS_stats_socket), runtime_dir, "stats.sock");
  const std::string proxy_socket =
      Neighbour(absl::GetFlag(FLAGS_proxy_socket), runtime_dir, "proxy.sock");
  plugin_options.node.set_stats_socket(stats_socket);
  plugin_options.node.set_proxy_socket(proxy_socket);
  berth::node::PluginManager plugin_manager(plugin_options,
                                            *std::move(plugins));

  berth::node::TaskManager::Options task_options;
  task_options.state_dir = state_dir;
  task_options.netns_socket =
      Neighbour(absl::GetFlag(FLAGS_netns_socket), runtime_dir, "netns.sock");
  berth::node::TaskManager tasks(task_options, store->get(), &plugin_manager,
                                 &events);
  plugin_manager.Start(
      [&events](const std::string& name) {
        events.Publish(berth::node::v1::EVENT_TYPE_NODE, "",
                       absl::StrCat("plugin ", name, " is up"));
      },
      [&events](const std::string& name,
                const berth::driver::v1::TaskEventsResponse& event) {
        events.Publish(berth::node::v1::EVENT_TYPE_DRIVER, event.task_id(),
                       absl::StrCat(name, ": ", event.message()));
      });
  if (absl::Status s = tasks.Recover(); !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }

  berth::node::NodeServiceImpl::Options service_options;
  service_options.version = kVersion;
  service_options.stats_socket = stats_socket;
  service_options.proxy_socket = proxy_socket;
  berth::node::NodeServiceImpl service(service_options, &tasks, &plugin_manager,
                                       &events);
  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path = absl::StrCat(runtime_dir, "/node.sock");
  server_options.services = {&service};
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(server_options);
  if (!server.ok()) {
    LOG(ERROR) << server.status().message();
    return 1;
  }
  LOG(INFO) << "serving on " << server_options.socket_path << "; state in "
            << state_dir;

  berth::WaitForShutdownSignal();
  service.Shutdown();
  tasks.Shutdown();
  (*server)->Shutdown(kGrace);
  plugin_manager.Stop();
  LOG(INFO) << "stopped; tasks keep running";
  return 0;
}
