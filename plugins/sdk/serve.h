// Serving a Driver from a plugin binary's main(), with the launch handshake
// of handshake.h.
//
//   int main(int argc, char** argv) {
//     berth::plugin::InitPlugin(argc, argv, "Runs tasks as ...", "1.0.0");
//     MyDriver driver;
//     return berth::plugin::Serve(driver);
//   }

#ifndef PLUGINS_SDK_SERVE_H_
#define PLUGINS_SDK_SERVE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "plugins/sdk/driver.h"

namespace berth::plugin {

// Call first thing in main(), before any thread starts: parses the absl
// flags (--help and --version print and exit 0), starts glog on stderr (the
// plugin's log, which the host forwards) and blocks SIGTERM and SIGINT so
// that Serve can wait for them. Returns the positional arguments, argv[0]
// first. (services/common's InitService.)
std::vector<char*> InitPlugin(int argc, char** argv, absl::string_view usage,
                              absl::string_view version);

// Where a plugin keeps its state before SetConfig names the node's state
// directory: <parent of $BERTH_PLUGIN_SOCKET_DIR>/<name>-state, or "" when
// that variable is missing or relative.
std::string DefaultStateDirNextToSockets(absl::string_view name);

struct ServeOptions {
  // The grace period of a shutdown by signal, or by a Shutdown call that
  // gives none.
  absl::Duration default_grace = absl::Seconds(2);
  // The binary named in the message for a human who started the plugin by
  // hand; empty for argv[0].
  std::string binary;
};

// Serves `driver` as a plugin launched by a host, until PluginService.Shutdown
// or SIGTERM/SIGINT; returns main()'s exit code:
// - without kMagicCookieKey=kMagicCookieValue in the environment, prints
//   NotLaunchedByHostMessage to stderr and returns 1;
// - if kProtocolVersionsEnv is set and lacks kAppProtocolVersion, says so on
//   stderr and returns 1;
// - the socket is <$BERTH_PLUGIN_SOCKET_DIR>/<driver name>.sock; a missing or
//   relative BERTH_PLUGIN_SOCKET_DIR is an error naming it (exit 1): there is
//   no default;
// - once the socket takes calls (health "plugin" SERVING), prints the
//   handshake line and a newline on stdout and flushes it;
// - on Shutdown (its grace period) or a signal (default_grace): health
//   NOT_SERVING, calls in flight get the grace period, the socket is removed,
//   returns 0. The driver's tasks keep running.
// SIGPIPE is ignored from here on. Call it once per process.
int Serve(Driver& driver, const ServeOptions& options = {});

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_SERVE_H_
