// berth-node as one object: its state, its plugins, its tasks and its gRPC
// server on <runtime_dir>/node.sock, built and started from Options. main.cc
// only turns flags into Options; tests start a whole node in-process.

#ifndef SERVICES_NODE_NODE_SERVER_H_
#define SERVICES_NODE_NODE_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "services/common/grpc_server.h"
#include "services/node/event_bus.h"
#include "services/node/id_ranges.h"
#include "services/node/image_forwarder.h"
#include "services/node/images_client.h"
#include "services/node/node_service.h"
#include "services/node/plugin_manager.h"
#include "services/node/stream_limiter.h"
#include "services/node/task_manager.h"
#include "services/node/task_store.h"

namespace berth::node {

class NodeServer {
 public:
  struct Options {
    // Serves <runtime_dir>/node.sock; plugins put their sockets in
    // <runtime_dir>/plugins.
    std::string runtime_dir;
    // berth's state directory: the node keeps <state_dir>/node (state.db,
    // tasks/, logs/); plugins are told it in SetConfig.
    std::string state_dir;
    // The driver plugins (LoadPluginConfig).
    std::vector<PluginSpec> plugins;
    // Neighbours' sockets; empty: the node runs without that neighbour.
    std::string netns_socket;
    std::string stats_socket;
    std::string proxy_socket;
    // berth-images' socket: image tasks' snapshots, and
    // berth.image.v1.ImageService forwarded on node.sock; empty: without
    // it (image tasks are refused).
    std::string images_socket;
    // How long an image call waits for berth-images to answer at all.
    absl::Duration images_connect_wait = absl::Seconds(5);
    // Given to plugins in SetConfig.
    std::string node_id;
    // Reported by GetNodeStatus.
    std::string version;
    // How the plugins are supervised (socket_dir, node and store are set
    // from the fields above).
    PluginManager::Options plugin_options;
    // How tasks are carried (state_dir and netns_socket are set from the
    // fields above).
    TaskManager::Options task_options;
    // Where userns "auto" takes tasks' host ids (task_options.id_ranges is
    // set from it; task_options.default_userns says who gets one).
    IdRangeAllocator::Options id_ranges;
    // Who may call node.sock besides root and the node's own uid (a group:
    // --socket_group) and the socket's mode (default 0600, root only).
    SocketAccess socket_access;
    // The largest message node.sock takes or sends (--max_message_bytes).
    int64_t max_message_bytes = kDefaultMaxMessageBytes;
    // How long Shutdown gives open calls.
    absl::Duration grace = absl::Seconds(5);
    // The streaming calls one client (connection) of node.sock may hold open
    // at once (--max_streams_per_client): NodeService's and the forwarded
    // image pulls and imports.
    int max_streams_per_client = 64;
  };

  // Opens the state, starts the plugins, recovers the stored tasks, then
  // serves. Errors name the path or file at fault.
  static absl::StatusOr<std::unique_ptr<NodeServer>> BuildAndStart(
      Options options);

  // Shutdown().
  ~NodeServer();
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  // Stops serving (open streams end), stops carrying tasks and stops the
  // plugins; tasks keep running for the next node to recover. Idempotent.
  void Shutdown();

  const std::string& socket_path() const { return socket_path_; }
  PluginManager& plugins() { return *plugins_; }
  TaskManager& tasks() { return *tasks_; }

 private:
  NodeServer() = default;

  // Once berth-netns on `socket` answers (asked every second until the node
  // shuts down), removes (Postrun) each network it holds for an allocation
  // that is no task of the node: left by tasks whose records are gone (a
  // wiped state directory) or removed while berth-netns was away.
  void ReconcileNetworks(const std::string& socket);

  std::string socket_path_;
  absl::Duration grace_;
  bool shut_down_ = false;
  // In the order they are made; destroyed in reverse.
  std::unique_ptr<TaskStore> store_;
  std::unique_ptr<IdRangeAllocator> id_ranges_;
  std::unique_ptr<EventBus> events_;
  // Null without berth-images.
  std::unique_ptr<ImagesClient> images_;
  std::unique_ptr<PluginManager> plugins_;
  std::unique_ptr<TaskManager> tasks_;
  std::unique_ptr<StreamLimiter> streams_;
  std::unique_ptr<NodeServiceImpl> service_;
  std::unique_ptr<ImageForwarder> image_forwarder_;
  std::unique_ptr<UnixGrpcServer> server_;
  // ReconcileNetworks, stopped by Shutdown.
  absl::Notification stop_reconciling_;
  std::thread network_reconciler_;
};

}  // namespace berth::node

#endif  // SERVICES_NODE_NODE_SERVER_H_
