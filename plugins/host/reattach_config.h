// What the node persists to find a running plugin again after it restarted.

#ifndef PLUGINS_HOST_REATTACH_CONFIG_H_
#define PLUGINS_HOST_REATTACH_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::plugin::host {

// A running plugin's identity: its socket, and its process as pid plus start
// time, so that a pid the kernel has since given to another process is told
// apart from the plugin (see PluginProcess::Reattach).
struct ReattachConfig {
  // The plugin's name, e.g. "exec".
  std::string name;
  // The Unix socket it serves on.
  std::string socket_path;
  // Its process id.
  pid_t pid = 0;
  // Its start time: field 22 of /proc/PID/stat, in clock ticks after boot.
  uint64_t start_time = 0;

  // One line of JSON, e.g.
  // {"version":1,"name":"exec","socketPath":"/run/berth/plugins/exec.sock",
  //  "pid":42,"startTime":"123456"} (startTime a string: a JSON number need
  // not hold every uint64).
  std::string Serialize() const;

  // The inverse of Serialize; reads any JSON spelling of such an object
  // (spaces, key order, escapes). INVALID_ARGUMENT naming the missing or bad
  // field, or quoting the text when it is not such an object.
  static absl::StatusOr<ReattachConfig> Parse(absl::string_view text);

  friend bool operator==(const ReattachConfig& a, const ReattachConfig& b) {
    return a.name == b.name && a.socket_path == b.socket_path &&
           a.pid == b.pid && a.start_time == b.start_time;
  }
  friend bool operator!=(const ReattachConfig& a, const ReattachConfig& b) {
    return !(a == b);
  }
};

}  // namespace berth::plugin::host

#endif  // PLUGINS_HOST_REATTACH_CONFIG_H_
