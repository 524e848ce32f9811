// berth-agent-boot: starts a program (berth-agent) in a root of its own,
// keeping the current root open for it. See boot.h. libc only, linked
// statically: it runs inside a task's root, which may have no loader.

#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
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
  // The root's /proc (the sandbox's, with its masked paths) in DIR too:
  // the agent built with a sanitizer reads /proc/self/maps while it loads.
  // Under DIR, it goes from the containers' view with DIR.
  char proc[PATH_MAX];
  if (std::snprintf(proc, sizeof(proc), "%s/proc", dir) >=
      static_cast<int>(sizeof(proc))) {
    errno = ENAMETOOLONG;
    Fail("making", dir);
  }
  if (mkdir(proc, 0555) != 0 && errno != EEXIST) Fail("making", proc);
  if (mount("/proc", proc, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    Fail("binding /proc at", proc);
  }
  if (chdir(dir) != 0) Fail("changing to", dir);
  if (chroot(".") != 0) Fail("making the root", dir);
  if (chdir("/") != 0) Fail("changing to / in", dir);
  execv(program, argv + 2);
  Fail("executing", program);
}
