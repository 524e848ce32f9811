// berth-images: serves berth.image.v1.ImageService on
// <runtime_dir>/images.sock, its store under <state_dir>/images, until
// SIGTERM or SIGINT, then shuts down and exits 0.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.pb.h"
#include "glog/logging.h"
#include "grpc/grpc.h"
#include "services/common/grpc_server.h"
#include "services/common/server_flags.h"
#include "services/common/service_main.h"
#include "services/images/image_service.h"
#include "services/images/oci/manifest.h"
#include "services/images/registry/registry_client.h"
#include "services/images/store/store.h"

ABSL_FLAG(std::string, runtime_dir, std::string(berth::kDefaultRuntimeDir),
          "Directory of berth's sockets; serves on <runtime_dir>/images.sock.");
ABSL_FLAG(std::string, state_dir, "/var/lib/berth",
          "berth's state directory; the image store is <state_dir>/images.");
ABSL_FLAG(std::string, registries_config, "/etc/berth/registries.json",
          "Registries configuration (JSON: mirrors, insecure, ca_file, "
          "credentials per registry host); a missing file is an empty one.");
ABSL_FLAG(int, max_concurrent_downloads, 3,
          "Layer blobs downloaded at the same time, over all pulls.");
ABSL_FLAG(std::string, platform, "",
          "os/architecture[/variant] chosen from multi-platform images when a "
          "request names none; empty for this node's own.");

namespace {

namespace pb = ::berth::image::v1;

constexpr char kUsage[] =
    "berth-images: pulls images from OCI registries, imports archives, "
    "stores them by digest with layers unpacked once, and prepares a "
    "snapshot (overlay root) per task\n"
    "usage: berth-images [--runtime_dir=/run/berth] "
    "[--state_dir=/var/lib/berth] "
    "[--registries_config=/etc/berth/registries.json] "
    "[--max_concurrent_downloads=3] [--platform=linux/amd64]";
constexpr char kVersion[] = "0.1.0";
constexpr absl::Duration kGrace = absl::Seconds(5);

absl::StatusOr<pb::Platform> Platform(const std::string& text) {
  if (text.empty()) return berth::images::HostPlatform();
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() ||
      parts[1].empty() || (parts.size() == 3 && parts[2].empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--platform must be os/architecture[/variant], got \"", text, "\""));
  }
  pb::Platform platform;
  platform.set_os(parts[0]);
  platform.set_architecture(parts[1]);
  if (parts.size() == 3) platform.set_variant(parts[2]);
  return platform;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = berth::InitService(argc, argv, kUsage, kVersion);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument " << args[1] << "; see --help";
    return 2;
  }
  absl::StatusOr<pb::Platform> platform =
      Platform(absl::GetFlag(FLAGS_platform));
  if (!platform.ok()) {
    LOG(ERROR) << platform.status().message();
    return 2;
  }
  const int downloads = absl::GetFlag(FLAGS_max_concurrent_downloads);
  if (downloads < 1) {
    LOG(ERROR) << "--max_concurrent_downloads must be at least 1, got "
               << downloads;
    return 2;
  }
  const std::string config_path = absl::GetFlag(FLAGS_registries_config);
  absl::StatusOr<berth::images::RegistriesConfig> registries =
      berth::images::RegistriesConfig::Load(config_path);
  if (!registries.ok()) {
    LOG(ERROR) << "--registries_config=" << config_path << ": "
               << registries.status().message();
    return 2;
  }

  // A reference on gRPC's library held until the process exits: otherwise
  // the server's destructor drops the last one, and grpc_shutdown then waits
  // (gRPC 1.51) up to 10 s for an executor thread parked in epoll_wait.
  grpc_init();

  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  const std::string root = absl::StrCat(state_dir, "/images");
  absl::StatusOr<std::unique_ptr<berth::images::Store>> store =
      berth::images::Store::Open(root);
  if (!store.ok()) {
    LOG(ERROR) << "opening the image store " << root << ": "
               << store.status().message();
    return 1;
  }
  berth::images::RegistryClientOptions client_options;
  client_options.config = *std::move(registries);
  absl::StatusOr<std::unique_ptr<berth::images::RegistryClient>> registry =
      berth::images::RegistryClient::Create(std::move(client_options));
  if (!registry.ok()) {
    LOG(ERROR) << registry.status().message();
    return 1;
  }
  berth::images::ImageServiceOptions options;
  options.max_concurrent_downloads = downloads;
  options.platform = *platform;
  options.import_dir = absl::StrCat(root, "/import");
  options.idmap_dir = absl::StrCat(root, "/idmaps");
  absl::StatusOr<std::unique_ptr<berth::images::ImageServiceImpl>> service =
      berth::images::ImageServiceImpl::Create(store->get(), registry->get(),
                                              options);
  if (!service.ok()) {
    LOG(ERROR) << service.status().message();
    return 1;
  }

  berth::UnixGrpcServer::Options server_options;
  server_options.socket_path =
      absl::StrCat(absl::GetFlag(FLAGS_runtime_dir), "/images.sock");
  server_options.services = {service->get()};
  if (absl::Status flags = berth::ApplyServerFlags(&server_options);
      !flags.ok()) {
    LOG(ERROR) << flags.message();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> server =
      berth::UnixGrpcServer::Start(server_options);
  if (!server.ok()) {
    LOG(ERROR) << server.status().message();
    return 1;
  }
  LOG(INFO) << "serving on " << server_options.socket_path << ", store " << root
            << ", platform " << berth::images::PlatformString(*platform);

  berth::WaitForShutdownSignal();
  (*server)->Shutdown(kGrace);
  LOG(INFO) << "stopped";
  return 0;
}
