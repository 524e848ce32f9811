// Tests that must change a process for good (credentials, seccomp filters)
// do it in a forked child and read back what it reports.

#ifndef SERVICES_DRIVER_COMMON_CHILD_PROBE_TESTING_H_
#define SERVICES_DRIVER_COMMON_CHILD_PROBE_TESTING_H_

#include <functional>
#include <map>
#include <string>

namespace berth::driver_common {

// Runs `probe` in a forked child whose stdout is a pipe, writes what it
// returns there, and returns everything the child (or a program it
// executed) wrote once the pipe closes. Also printed, for the test's log.
std::string OutputOfChild(const std::function<std::string()>& probe);

// "KEY VALUE" or "KEY:\tVALUE" lines (as in /proc/self/status) -> map, the
// value trimmed.
std::map<std::string, std::string> ParseReport(const std::string& text);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_CHILD_PROBE_TESTING_H_
