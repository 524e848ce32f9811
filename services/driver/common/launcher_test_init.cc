// A stand-in for berth-task-init in launcher_test: reports "started" as the
// init does, tells on its stderr which ids it runs as, and waits to be
// killed, so that the test can look at it through /proc.

#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

int main() {
  std::fprintf(stderr, "uid %d gid %d groups %d\n", static_cast<int>(getuid()),
               static_cast<int>(getgid()), getgroups(0, nullptr));
  std::fflush(stderr);
  constexpr char kStarted[] = "started\n";
  if (write(4, kStarted, std::strlen(kStarted)) < 0) return 1;
  close(4);
  while (true) pause();
}
