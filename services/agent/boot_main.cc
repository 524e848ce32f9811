// berth-agent-boot: starts a program (berth-agent) in a root of its own,
// keeping the current root open for it. See boot.h. libc only, linked
// statically: it runs inside a task's root, which may have no loader.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "services/agent/boot.h"

namespace {

[[noreturn]] void Fail(const char* step, const char* path) {
  std::fprintf(stderr, "berth-agent-boot: %s %s: %s\n", step, path,
               std::strerror(errno));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argv[1][0] != '/' || argv[2][0] != '/') {
    std::fprintf(stderr,
                 "usage: berth-agent-boot DIR PROGRAM [ARG...] (absolute "
                 "DIR and PROGRAM; PROGRAM inside DIR)\n");
    return 2;
  }
  const char* dir = argv[1];
  const char* program = argv[2];
  const int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) Fail("opening", "/");
  // dup2 leaves the copy without close-on-exec: it stays open in PROGRAM.
  // (Already there: clear the flag instead.)
  if (root == berth::agent::kAgentBootRootFd) {
    if (fcntl(root, F_SETFD, 0) != 0) Fail("keeping open", "/");
  } else {
    if (dup2(root, berth::agent::kAgentBootRootFd) < 0) {
      Fail("keeping open", "/");
    }
    close(root);
  }
  if (chdir(dir) != 0) Fail("changing to", dir);
  if (chroot(".") != 0) Fail("making the root", dir);
  if (chdir("/") != 0) Fail("changing to / in", dir);
  execv(program, argv + 2);
  Fail("executing", program);
}
