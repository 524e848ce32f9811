// Start-up and shutdown of a berth service's main(): flags, --help and
// --version, logging, and SIGTERM/SIGINT.
//
//   ABSL_FLAG(std::string, socket, "/run/berth/stats.sock", "...");
//
//   int main(int argc, char** argv) {
//     std::vector<char*> args = berth::InitService(
//         argc, argv, "Streams resource usage of tasks.", kVersion);
//     ... start the server ...
//     berth::WaitForShutdownSignal();
//     server->Shutdown(absl::Seconds(5));
//     return 0;
//   }

#ifndef SERVICES_COMMON_SERVICE_MAIN_H_
#define SERVICES_COMMON_SERVICE_MAIN_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth {

// Where berth's sockets live unless a service is told otherwise
// (--runtime-dir, defined by each service that takes it).
inline constexpr absl::string_view kDefaultRuntimeDir = "/run/berth";

// Call first thing in main(), before any thread is started. It:
// - blocks SIGTERM and SIGINT in the calling thread, so that every thread
//   started later inherits the mask and WaitForShutdownSignal receives them;
// - accepts "--foo-bar" (and "--foo-bar=x", "-foo-bar") as a spelling of
//   "--foo_bar" (only the flag name is rewritten; nothing after "--" is), and
//   "-h" as "--help";
// - parses the absl flags; an unknown or malformed flag prints an error and
//   exits 1;
// - --help, --helpfull, --helpshort, --helppackage, --helpon, --helpmatch:
//   prints `usage` and the flags to stdout and exits 0 (--help lists the
//   flags berth defines, --helpfull all of them); --version prints
//   "<binary> <version>" and exits 0;
// - starts glog, logging to stderr, with VLOG level --verbosity; each line
//   in glog's format with the control characters of its message escaped
//   (internal::EscapeControlCharacters): a newline in a value a client
//   supplied cannot forge a log line, nor an ESC reach a terminal. glog's
//   own stderr output and log files are off.
// Returns the positional arguments, argv[0] first. Call it once per process.
std::vector<char*> InitService(int argc, char** argv, absl::string_view usage,
                               absl::string_view version);

// Blocks until SIGTERM or SIGINT arrives (they must be blocked, as
// InitService does), logs which, and returns it. Further SIGTERM/SIGINT stay
// blocked.
int WaitForShutdownSignal();

namespace internal {

// The argument rewriting InitService does before parsing: returns argv with
// flag names' '-' turned into '_' (rewritten in place in the argument
// strings) and "-h" replaced by "--help"; arguments after "--" are untouched.
std::vector<char*> NormalizeFlagSpellings(int argc, char** argv);

// `text` with what could end a log line or drive a terminal escaped: '\n',
// '\r' and '\t' as "\\n", "\\r" and "\\t"; other C0 controls, DEL and
// bytes that are not UTF-8 as "\\xHH"; C1 controls (U+0080..U+009F) as
// "\\u00HH". Printable ASCII and other valid UTF-8 stay as they are.
std::string EscapeControlCharacters(absl::string_view text);

}  // namespace internal
}  // namespace berth

#endif  // SERVICES_COMMON_SERVICE_MAIN_H_
