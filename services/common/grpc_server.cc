#include "services/common/grpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/path.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "services/common/placeholder.grpc.pb.h"
#include "services/common/unix_socket.h"

namespace berth {
namespace {

constexpr mode_t kSocketMode = 0660;

// grpc::EnableDefaultHealthCheckService is process-wide and read by
// ServerBuilder::BuildAndStart: setting it and building happen under this.
ABSL_CONST_INIT absl::Mutex health_setting_mu(absl::kConstInit);

// An exclusive flock on a directory while it lives. Best effort: a directory
// that cannot be opened is not locked (and says so at VLOG(1)).
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir)
      : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (!fd_.valid()) {
      const int err = errno;
      VLOG(1) << "not locking " << dir << ": " << strerror(err);
      return;
    }
    while (flock(fd_.get(), LOCK_EX) != 0) {
      const int err = errno;
      if (err != EINTR) {
        VLOG(1) << "not locking " << dir << ": " << strerror(err);
        break;
      }
    }
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  const base::UniqueFd fd_;  // closing it releases the lock
};

// Removes the socket at `path` after a failed start, if it is a socket
// nobody listens on (ours, now that our server is gone).
void RemoveStaleSocket(const std::string& path) {
  absl::StatusOr<SocketPathState> state = ProbeSocketPath(path);
  if (state.ok() && *state == SocketPathState::kStale) unlink(path.c_str());
}

// Why binding a socket in `dir` may have failed, if it is obvious.
std::string BindFailureReason(const std::string& dir) {
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return absl::StrCat("cannot create a socket in ", dir, ": ", strerror(err));
  }
  return "gRPC could not bind it (its log says why)";
}

}  // namespace

absl::StatusOr<std::unique_ptr<UnixGrpcServer>> UnixGrpcServer::Start(
    const Options& options) {
  const std::string& path = options.socket_path;
  for (grpc::Service* service : options.services) {
    if (service == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("a null service was given for socket ", path));
    }
  }
  if (absl::Status made = MakeSocketDirectory(path); !made.ok()) return made;
  // gRPC unlinks whatever socket is at the path before it binds, and a
  // socket bound but not yet listening looks stale: other berth servers are
  // held off from our check until we listen.
  const std::string dir = base::Dirname(path);
  DirectoryLock lock(dir);
  if (absl::Status prepared = PrepareSocketPath(path); !prepared.ok()) {
    return prepared;
  }

  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(absl::StrCat("unix:", path),
                           grpc::InsecureServerCredentials(), &selected_port);
  bool has_polled_methods = false;
  for (grpc::Service* service : options.services) {
    builder.RegisterService(service);
    has_polled_methods = has_polled_methods ||
                         service->has_synchronous_methods() ||
                         service->has_callback_methods();
  }
  // See placeholder.proto. Lives as long as the process: gRPC keeps pointers
  // to a registered service.
  static auto* const placeholder =
      new common::internal::Placeholder::CallbackService();
  if (!has_polled_methods) builder.RegisterService(placeholder);
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock setting_lock(&health_setting_mu);
    grpc::EnableDefaultHealthCheckService(options.enable_health);
    server = builder.BuildAndStart();
  }
  if (server == nullptr || selected_port == 0) {
    if (server != nullptr) server->Shutdown();
    server.reset();
    RemoveStaleSocket(path);
    return absl::UnavailableError(absl::StrCat(
        "cannot serve gRPC on socket ", path, ": ", BindFailureReason(dir)));
  }

  // From here on a failure must take the server and its socket down again.
  auto fail = [&](absl::string_view what) {
    const int err = errno;
    server->Shutdown();
    server.reset();
    RemoveStaleSocket(path);
    return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
  };
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return fail("cannot stat new socket");
  if (chmod(path.c_str(), kSocketMode) != 0) {
    return fail("cannot chmod new socket");
  }
  VLOG(1) << "serving gRPC on unix:" << path;
  return std::unique_ptr<UnixGrpcServer>(
      new UnixGrpcServer(path, std::move(server), st.st_dev, st.st_ino));
}

UnixGrpcServer::UnixGrpcServer(std::string socket_path,
                               std::unique_ptr<grpc::Server> server,
                               dev_t socket_dev, ino_t socket_ino)
    : socket_path_(std::move(socket_path)),
      server_(std::move(server)),
      socket_dev_(socket_dev),
      socket_ino_(socket_ino) {}

UnixGrpcServer::~UnixGrpcServer() { Shutdown(absl::ZeroDuration()); }

void UnixGrpcServer::Shutdown(absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;

  // NOT_SERVING for every service name, for Check and Watch alike; Shutdown
  // also keeps anyone from setting SERVING again.
  if (grpc::HealthCheckServiceInterface* health =
          server_->GetHealthCheckService();
      health != nullptr) {
    health->SetServingStatus(false);
    health->Shutdown();
  }
  server_->Shutdown(
      absl::ToChronoTime(absl::Now() + std::max(grace, absl::ZeroDuration())));

  // gRPC unlinks the path itself when its listener goes (by path, whatever is
  // there by then), but not necessarily before Shutdown returns. Ours checks
  // that it is still our socket.
  struct stat st;
  if (lstat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    if (unlink(socket_path_.c_str()) != 0 && errno != ENOENT) {
      PLOG(WARNING) << "cannot remove socket " << socket_path_;
    }
  }
  VLOG(1) << "stopped serving on unix:" << socket_path_;
}

void UnixGrpcServer::Wait() { server_->Wait(); }

}  // namespace berth
