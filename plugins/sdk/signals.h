// Signals by name or number, as berth's API carries them ("SIGTERM", "TERM",
// "15").

#ifndef PLUGINS_SDK_SIGNALS_H_
#define PLUGINS_SDK_SIGNALS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::plugin {

// The number of the signal `signal` names: "SIGTERM", "TERM", "sigterm" or
// "15" (1 to SIGRTMAX). INVALID_ARGUMENT naming `field` and quoting the
// value otherwise, e.g. `signal: unknown signal "SIGFOO"`.
absl::StatusOr<int> ParseSignal(absl::string_view signal,
                                absl::string_view field = "signal");

// "SIGTERM" for 15; "SIG<number>" for a signal without a name.
std::string SignalName(int signal);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_SIGNALS_H_
