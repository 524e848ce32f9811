// What berth-agent, a dynamically linked binary, needs to be loaded inside a
// task's root that may not hold it (an image): its program interpreter (the
// dynamic loader) and the directories of its shared libraries, as the
// host's loader finds them. The driver binds these read-only into the
// agent's own directory in the root, where berth-agent-boot starts the
// agent in a root of its own (services/agent/boot.h).

#ifndef SERVICES_DRIVER_SANDBOX_AGENT_LIBRARIES_H_
#define SERVICES_DRIVER_SANDBOX_AGENT_LIBRARIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace berth::sandbox_driver {

// The program interpreter an ELF file names (PT_INTERP, such as
// "/lib64/ld-linux-x86-64.so.2"); empty for a statically linked one.
// INVALID_ARGUMENT naming the file when it is not a 64-bit ELF file (or its
// headers are cut short); the errno's code when it cannot be read.
absl::StatusOr<std::string> ElfInterpreter(const std::string& path);

struct AgentLibraries {
  struct Dir {
    // Where the loader found libraries (as it prints it, e.g.
    // /lib/x86_64-linux-gnu): where the directory goes in the agent's root.
    std::string path;
    // Its real path on the host, what is bound there.
    std::string host_path;
  };
  // PT_INTERP, absolute; empty for a static agent (nothing else then).
  std::string interpreter;
  // Its real path on the host.
  std::string interpreter_host_path;
  // In the order the loader found the first library of each; what the
  // agent's LD_LIBRARY_PATH lists (its root has no ld.so.cache).
  std::vector<Dir> dirs;
};

// Asks the agent's own interpreter (`INTERP --list AGENT`, with an empty
// environment, as the agent itself is started) where its libraries are.
// FAILED_PRECONDITION naming the library the loader does not find, or why
// the listing failed.
absl::StatusOr<AgentLibraries> FindAgentLibraries(
    const std::string& agent_path);

// The parsing of that listing (ldd's format): each "NAME => PATH (ADDR)"
// line's directory; "NAME => not found" is FAILED_PRECONDITION naming NAME.
// Directories are not resolved (host_path left empty).
absl::StatusOr<std::vector<AgentLibraries::Dir>> ParseLoaderListing(
    const std::string& listing);

}  // namespace berth::sandbox_driver

#endif  // SERVICES_DRIVER_SANDBOX_AGENT_LIBRARIES_H_
