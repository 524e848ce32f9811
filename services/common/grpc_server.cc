#include "services/common/grpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/path.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_posix.h"
#include "grpcpp/support/server_callback.h"
#include "services/common/peer_credentials.h"
#include "services/common/placeholder.grpc.pb.h"
#include "services/common/unix_socket.h"

namespace berth {
namespace {

constexpr int kListenBacklog = 128;

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

std::string GroupName(gid_t gid) {
  std::vector<char> buffer(4096);
  struct group entry;
  struct group* found = nullptr;
  if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return absl::StrCat(found->gr_name, " (gid ", gid, ")");
  }
  return absl::StrCat("gid ", gid);
}

// Answers every call with one status, then is done.
class DenyReactor : public grpc::ServerGenericBidiReactor {
 public:
  explicit DenyReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// The service of the deny server: PERMISSION_DENIED naming the peer.
class DenyService : public grpc::CallbackGenericService {
 public:
  DenyService(std::string socket_path, std::string allowed)
      : socket_path_(std::move(socket_path)), allowed_(std::move(allowed)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    std::optional<PeerCredentials> peer = PeerOf(*context);
    const std::string who = peer.has_value() ? absl::StrCat("uid ", peer->uid)
                                             : std::string("this caller");
    return new DenyReactor(
        grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                     absl::StrCat(who, " may not call ", socket_path_,
                                  " (allowed: ", allowed_, ")")));
  }

 private:
  const std::string socket_path_;
  const std::string allowed_;
};

void SetMessageLimits(grpc::ServerBuilder* builder, int64_t max_bytes) {
  const int limit = static_cast<int>(
      std::clamp<int64_t>(max_bytes, 1, std::numeric_limits<int>::max()));
  builder->SetMaxReceiveMessageSize(limit);
  builder->SetMaxSendMessageSize(limit);
}

// poll()'s timeout for waiting until `when`: -1 (no timeout) for the
// infinite future, 0 if it has come, else the milliseconds left (rounded
// up).
int MillisecondsUntil(absl::Time when) {
  if (when == absl::InfiniteFuture()) return -1;
  const absl::Duration left = when - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
      std::numeric_limits<int>::max()));
}

// Removes the socket file at `path` if it is still the one (dev, ino).
void RemoveOurSocket(const std::string& path, dev_t dev, ino_t ino) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      st.st_dev == dev && st.st_ino == ino) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      PLOG(WARNING) << "cannot remove socket " << path;
    }
  }
}

}  // namespace

bool SocketAccess::Allows(const PeerCredentials& peer, uid_t server_uid) const {
  if (peer.uid == 0 || peer.uid == server_uid) return true;
  if (std::find(uids.begin(), uids.end(), peer.uid) != uids.end()) return true;
  return group.has_value() && peer.InGroup(*group);
}

std::string SocketAccess::Describe(uid_t server_uid) const {
  std::vector<std::string> who = {"root"};
  if (server_uid != 0) who.push_back(absl::StrCat("uid ", server_uid));
  for (uid_t uid : uids) {
    if (uid != 0 && uid != server_uid) who.push_back(absl::StrCat("uid ", uid));
  }
  if (group.has_value()) {
    who.push_back(absl::StrCat("group ", GroupName(*group)));
  }
  return absl::StrJoin(who, ", ");
}

absl::StatusOr<std::unique_ptr<UnixGrpcServer>> UnixGrpcServer::Start(
    const Options& options) {
  const std::string& path = options.socket_path;
  for (grpc::Service* service : options.services) {
    if (service == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("a null service was given for socket ", path));
    }
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes for socket ", path,
                     " must be positive, not ", options.max_message_bytes));
  }
  if ((options.access.mode & ~0777) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("socket ", path, ": mode ",
                                                   options.access.mode,
                                                   " has bits beyond 0777"));
  }
  if (absl::Status made = MakeSocketDirectory(path, options.access.group);
      !made.ok()) {
    return made;
  }
  const uid_t server_uid = geteuid();
  const std::string dir = base::Dirname(path);
  if (absl::Status trusted = CheckSocketDirectory(dir, server_uid);
      !trusted.ok()) {
    return absl::Status(trusted.code(),
                        absl::StrCat("socket ", path, ": ", trusted.message()));
  }
  // A socket bound but not yet listening looks stale: other berth servers
  // are held off from our check until we listen.
  DirectoryLock lock(dir);
  if (absl::Status prepared = PrepareSocketPath(path); !prepared.ok()) {
    return prepared;
  }

  base::UniqueFd listener(
      socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot make a socket to serve on ", path));
  }
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());  // length checked
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr),
           sizeof(addr)) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot bind socket ", path));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err,
                               absl::StrCat("cannot stat new socket ", path));
  }
  // From here on a failure removes the socket file again.
  auto fail = [&](int err, absl::string_view what) {
    RemoveOurSocket(path, st.st_dev, st.st_ino);
    return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
  };
  // Its mode and group before anyone can connect (before listen).
  if (chmod(path.c_str(), options.access.mode) != 0) {
    return fail(errno, "cannot chmod new socket");
  }
  if (options.access.group.has_value() &&
      chown(path.c_str(), static_cast<uid_t>(-1), *options.access.group) != 0) {
    return fail(errno, absl::StrCat("cannot give gid ", *options.access.group,
                                    " the new socket"));
  }
  base::UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return fail(errno, "cannot make an eventfd for socket");

  grpc::ServerBuilder builder;
  SetMessageLimits(&builder, options.max_message_bytes);
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
  if (server == nullptr) {
    RemoveOurSocket(path, st.st_dev, st.st_ino);
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on socket ",
                                               path,
                                               ": gRPC could not start a "
                                               "server (its log says why)"));
  }
  if (listen(listener.get(), kListenBacklog) != 0) {
    const int err = errno;
    server->Shutdown();
    return fail(err, "cannot listen on socket");
  }
  VLOG(1) << "serving gRPC on unix:" << path << " for "
          << options.access.Describe(server_uid);
  auto result = std::unique_ptr<UnixGrpcServer>(
      new UnixGrpcServer(options, std::move(server), listener.release(),
                         wake.release(), st.st_dev, st.st_ino));
  result->accept_thread_ = std::thread([s = result.get()] { s->AcceptLoop(); });
  return result;
}

UnixGrpcServer::UnixGrpcServer(const Options& options,
                               std::unique_ptr<grpc::Server> server,
                               int listen_fd, int wake_fd, dev_t socket_dev,
                               ino_t socket_ino)
    : socket_path_(options.socket_path),
      access_(options.access),
      max_message_bytes_(options.max_message_bytes),
      server_uid_(geteuid()),
      server_(std::move(server)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      socket_dev_(socket_dev),
      socket_ino_(socket_ino),
      refusals_(socket_path_, access_.Describe(server_uid_),
                RefusalLog::Options()) {}

UnixGrpcServer::~UnixGrpcServer() {
  Shutdown(absl::ZeroDuration());
  close(wake_fd_);
}

void UnixGrpcServer::AcceptLoop() {
  bool warned_resources = false;
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, MillisecondsUntil(refusals_.NextDue())) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on socket " << socket_path_
                  << "; no longer accepting connections";
      return;
    }
    for (const std::string& line : refusals_.TakeDue()) LOG(WARNING) << line;
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;  // woken for the refusals' counts
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EINTR || err == ECONNABORTED) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors or memory: wait a little (or for Shutdown)
        // rather than spin; the connection waits in the backlog.
        if (!warned_resources) {
          LOG(WARNING) << "cannot accept a connection on " << socket_path_
                       << ": " << strerror(err) << "; retrying";
          warned_resources = true;
        }
        pollfd wake = {wake_fd_, POLLIN, 0};
        if (poll(&wake, 1, 100) > 0) return;
        continue;
      }
      LOG(ERROR) << "accept on socket " << socket_path_ << ": " << strerror(err)
                 << "; no longer accepting connections";
      return;
    }
    warned_resources = false;
    HandOver(fd);
  }
}

void UnixGrpcServer::HandOver(int fd) {
  absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(fd);
  if (!peer.ok()) {
    LOG(WARNING) << "socket " << socket_path_
                 << ": closing a connection: " << peer.status().message();
    close(fd);
    return;
  }
  internal::RecordConnectionPeer(fd, *peer);
  if (access_.Allows(*peer, server_uid_)) {
    grpc::AddInsecureChannelFromFd(server_.get(), fd);
    return;
  }
  for (const std::string& line : refusals_.Refused(*peer)) {
    LOG(WARNING) << line;
  }
  if (deny_server_ == nullptr) {
    deny_service_ = std::make_unique<DenyService>(
        socket_path_, access_.Describe(server_uid_));
    grpc::ServerBuilder builder;
    SetMessageLimits(&builder, max_message_bytes_);
    builder.RegisterCallbackGenericService(deny_service_.get());
    absl::MutexLock setting_lock(&health_setting_mu);
    grpc::EnableDefaultHealthCheckService(false);
    deny_server_ = builder.BuildAndStart();
  }
  if (deny_server_ == nullptr) {
    LOG(ERROR) << "socket " << socket_path_
               << ": cannot start the server that answers refused callers; "
                  "closing the connection of "
               << peer->ToString();
    close(fd);
    return;
  }
  grpc::AddInsecureChannelFromFd(deny_server_.get(), fd);
}

void UnixGrpcServer::StopListening() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) != sizeof(one)) {
    PLOG(ERROR) << "cannot wake the accept thread of " << socket_path_;
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  // The accept thread is gone: the refusals are ours to log.
  for (const std::string& line : refusals_.TakeAll()) LOG(WARNING) << line;
  close(listen_fd_);
  RemoveOurSocket(socket_path_, socket_dev_, socket_ino_);
}

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
  StopListening();
  server_->Shutdown(
      absl::ToChronoTime(absl::Now() + std::max(grace, absl::ZeroDuration())));
  if (deny_server_ != nullptr) {
    deny_server_->Shutdown(std::chrono::system_clock::now());
  }
  VLOG(1) << "stopped serving on unix:" << socket_path_;
}

void UnixGrpcServer::Wait() { server_->Wait(); }

}  // namespace berth
