#include "plugins/sdk/serve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "grpc/grpc.h"
#include "plugins/sdk/handshake.h"
#include "plugins/sdk/plugin_server.h"
#include "services/common/service_main.h"

extern char* program_invocation_name;  // glibc: argv[0]

namespace berth::plugin {
namespace {

// The server the signal thread shuts down, while Serve serves.
ABSL_CONST_INIT absl::Mutex serving_mu(absl::kConstInit);
PluginServer* serving ABSL_GUARDED_BY(serving_mu) = nullptr;
absl::Duration serving_grace ABSL_GUARDED_BY(serving_mu);

// Waits for SIGTERM and SIGINT for the rest of the process's life (a thread
// left running at exit is harmless) and asks the current server to stop.
void StartSignalThread() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    std::thread([] {
      while (true) {
        WaitForShutdownSignal();
        absl::MutexLock lock(&serving_mu);
        if (serving != nullptr) serving->RequestShutdown(serving_grace);
      }
    }).detach();
  });
}

bool ValidDriverName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

std::vector<char*> InitPlugin(int argc, char** argv, absl::string_view usage,
                              absl::string_view version) {
  return InitService(argc, argv, usage, version);
}

std::string DefaultStateDirNextToSockets(absl::string_view name) {
  const char* socket_dir = std::getenv(kSocketDirEnv);
  if (socket_dir == nullptr || socket_dir[0] != '/') return "";
  absl::string_view dir = socket_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  const size_t slash = dir.find_last_of('/');
  const absl::string_view parent = slash == 0 ? "" : dir.substr(0, slash);
  return absl::StrCat(parent, "/", name, "-state");
}

int Serve(Driver& driver, const ServeOptions& options) {
  const std::string binary = options.binary.empty()
                                 ? std::string(program_invocation_name)
                                 : options.binary;
  const char* cookie = std::getenv(kMagicCookieKey);
  if (cookie == nullptr || std::strcmp(cookie, kMagicCookieValue) != 0) {
    const std::string message = NotLaunchedByHostMessage(binary);
    std::fwrite(message.data(), 1, message.size(), stderr);
    std::fflush(stderr);
    return 1;
  }
  if (const char* versions = std::getenv(kProtocolVersionsEnv);
      versions != nullptr && *versions != '\0') {
    bool speaks = false;
    for (absl::string_view version : absl::StrSplit(versions, ',')) {
      speaks = speaks || absl::StripAsciiWhitespace(version) ==
                             absl::StrCat(kAppProtocolVersion);
    }
    if (!speaks) {
      LOG(ERROR) << "the host speaks plugin protocol versions " << versions
                 << " (" << kProtocolVersionsEnv << "); " << binary
                 << " speaks only " << kAppProtocolVersion;
      return 1;
    }
  }
  const char* socket_dir = std::getenv(kSocketDirEnv);
  if (socket_dir == nullptr || *socket_dir == '\0') {
    LOG(ERROR) << kSocketDirEnv
               << " is not set: the host names the directory for the "
                  "plugin's socket in it";
    return 1;
  }
  if (socket_dir[0] != '/') {
    LOG(ERROR) << kSocketDirEnv << "=" << socket_dir
               << " is not an absolute path";
    return 1;
  }
  const DriverInfo info = driver.Info();
  if (!ValidDriverName(info.name)) {
    LOG(ERROR) << "driver name \"" << info.name
               << "\" is not valid: letters, digits, '-' and '_' only";
    return 1;
  }

  // Threads started from here on (gRPC's, the signal thread) inherit the
  // mask; InitPlugin should have blocked them already.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // A reference on gRPC's library held until the process exits: otherwise
  // the server's destructor drops the last one, and grpc_shutdown then waits
  // (gRPC 1.51) up to 10 s for a poller thread parked in epoll_wait, seen
  // after long exec streams, past the host's shutdown grace period.
  grpc_init();

  PluginServer::Options server_options;
  server_options.socket_path =
      absl::StrCat(absl::StripSuffix(socket_dir, "/"), "/", info.name, ".sock");
  server_options.default_grace = options.default_grace;
  absl::StatusOr<std::unique_ptr<PluginServer>> server =
      PluginServer::Start(driver, server_options);
  if (!server.ok()) {
    LOG(ERROR) << "driver " << info.name << ": " << server.status();
    return 1;
  }
  {
    absl::MutexLock lock(&serving_mu);
    serving = server->get();
    serving_grace = options.default_grace;
  }
  StartSignalThread();

  Handshake handshake;
  handshake.address = server_options.socket_path;
  const std::string line = FormatHandshake(handshake) + "\n";
  const bool written =
      std::fwrite(line.data(), 1, line.size(), stdout) == line.size() &&
      std::fflush(stdout) == 0;
  if (!written) {
    PLOG(ERROR) << "cannot write the handshake line to stdout";
    (*server)->RequestShutdown(absl::ZeroDuration());
  } else {
    LOG(INFO) << "driver " << info.name << " " << info.version << " serving on "
              << server_options.socket_path;
  }

  // Even a zero grace period lets the reply of the Shutdown call that asked
  // for it go out: gRPC cancels every call still in flight at the deadline,
  // and that one may not have sent its reply yet. Calls that finish sooner
  // end the wait sooner.
  constexpr absl::Duration kShutdownReplyGrace = absl::Milliseconds(250);
  const absl::Duration grace = (*server)->WaitForShutdownRequest();
  LOG(INFO) << "shutting down (grace period " << absl::FormatDuration(grace)
            << ")";
  (*server)->Shutdown(std::max(grace, kShutdownReplyGrace));
  {
    absl::MutexLock lock(&serving_mu);
    serving = nullptr;
  }
  server->reset();
  LOG(INFO) << "stopped";
  return written ? 0 : 1;
}

}  // namespace berth::plugin
