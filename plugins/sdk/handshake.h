// The plugin launch handshake, shared by plugins (Serve) and the host that
// launches them. It follows HashiCorp go-plugin's convention:
//
// 1. The host starts the plugin binary with kMagicCookieKey=kMagicCookieValue,
//    kSocketDirEnv=<directory for the socket> and
//    kProtocolVersionsEnv=<app protocol versions it accepts, comma separated>
//    in its environment. A plugin without the cookie refuses to run: it was
//    started by hand, not by a host.
// 2. The plugin serves gRPC on a Unix socket in that directory (never a
//    default under /tmp) and prints exactly one line on stdout:
//        CORE-VERSION|APP-VERSION|unix|SOCKET-PATH|grpc
//    e.g. "1|1|unix|/run/berth/plugins/exec.sock|grpc".
// 3. The host checks the versions, dials the socket and checks
//    grpc.health.v1.Health for service kHealthServiceName ("plugin").
//
// The plugin's stderr is its log; the host forwards it line by line.

#ifndef PLUGINS_SDK_HANDSHAKE_H_
#define PLUGINS_SDK_HANDSHAKE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::plugin {

// Environment variable and value that mark a process launched by a host.
inline constexpr char kMagicCookieKey[] = "BERTH_PLUGIN_MAGIC_COOKIE";
inline constexpr char kMagicCookieValue[] =
    "5b3f0c2e8d7a4f61b9e2c7d4a1f08e3b6c5d9a2e7f4b1c8d3e6a9f2b5c8e1d4a";
// Directory the plugin must put its socket in.
inline constexpr char kSocketDirEnv[] = "BERTH_PLUGIN_SOCKET_DIR";
// App protocol versions the host speaks, e.g. "1" or "1,2".
inline constexpr char kProtocolVersionsEnv[] = "BERTH_PLUGIN_PROTOCOL_VERSIONS";

// Version of the handshake itself.
inline constexpr int kCoreProtocolVersion = 1;
// Version of the plugin protocol: 1 is berth.plugin.v1 + berth.driver.v1.
inline constexpr int kAppProtocolVersion = 1;
// The health service name a plugin reports SERVING once it takes calls.
inline constexpr char kHealthServiceName[] = "plugin";

// What a plugin says on its handshake line.
struct Handshake {
  int core_version = kCoreProtocolVersion;
  int app_version = kAppProtocolVersion;
  std::string network = "unix";
  std::string address;  // the socket path
  std::string protocol = "grpc";
};

// "1|1|unix|/run/berth/plugins/exec.sock|grpc" (no newline).
std::string FormatHandshake(const Handshake& handshake);

// Parses a handshake line (a trailing newline is allowed). The error quotes
// the line and says which part is wrong. Does not judge the versions: that is
// the host's call.
absl::StatusOr<Handshake> ParseHandshake(absl::string_view line);

// The message a plugin prints (to stderr) and exits 1 with when started
// without the magic cookie, naming the binary.
std::string NotLaunchedByHostMessage(absl::string_view binary);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_HANDSHAKE_H_
