// Finding the binaries a built-in driver starts (berth-task-init, and for the
// sandbox driver berth-agent and berth-shim) when no flag names them.

#ifndef SERVICES_DRIVER_COMMON_COMPANION_BINARY_H_
#define SERVICES_DRIVER_COMMON_COMPANION_BINARY_H_

#include <string>

namespace berth::driver_common {

// `flag` when set; else the first executable of: `name` next to this
// process's binary (an installed tree, /usr/lib/berth/plugins), then
// `workspace_path` (e.g. "services/driver/exec/init/berth-task-init") in
// $RUNFILES_DIR or $TEST_SRCDIR, in <argv0>.runfiles, and in the bazel-bin
// tree this binary is in (three levels up from its package); else the first
// candidate, for the error that names it.
std::string FindCompanionBinary(const std::string& flag, const char* argv0,
                                const std::string& name,
                                const std::string& workspace_path);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_COMPANION_BINARY_H_
