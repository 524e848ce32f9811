// The error every call of the plugin host returns once the plugin is gone.

#ifndef PLUGINS_HOST_ERRORS_H_
#define PLUGINS_HOST_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace berth::plugin::host {

// The type URL of the payload that marks ErrPluginShutdown.
inline constexpr char kPluginShutdownTypeUrl[] = "berth.dev/plugin-shutdown";

// The plugin `name` is gone: it exited, closed its socket or was stopped.
// UNAVAILABLE "plugin NAME is shut down" (": DETAIL" appended when given, e.g.
// "pid 42 was killed by signal 9"), carrying a payload under
// kPluginShutdownTypeUrl so that callers can tell it from any other
// UNAVAILABLE with IsPluginShutdown. A caller that gets it relaunches (or
// reattaches to) the plugin and recovers its tasks; it is not worth a warning.
absl::Status ErrPluginShutdown(absl::string_view name,
                               absl::string_view detail = "");

// Whether `status` is an ErrPluginShutdown.
bool IsPluginShutdown(const absl::Status& status);

}  // namespace berth::plugin::host

#endif  // PLUGINS_HOST_ERRORS_H_
