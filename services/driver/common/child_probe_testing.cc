#include "services/driver/common/child_probe_testing.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace berth::driver_common {

std::string OutputOfChild(const std::function<std::string()>& probe) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe_failed 1\n";
  // The child's stdout is the pipe: it must not inherit unwritten output.
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    // On stdout so that an executed program reports too, and not on a
    // descriptor a close-on-exec sweep would catch.
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    const std::string out = probe();
    (void)!write(STDOUT_FILENO, out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  std::printf("child reported:\n%s", text.c_str());
  return text;
}

std::map<std::string, std::string> ParseReport(const std::string& text) {
  std::map<std::string, std::string> report;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t space = line.find_first_of(" \t");
    std::string key = line.substr(0, space);
    if (!key.empty() && key.back() == ':') key.pop_back();
    std::string value =
        space == std::string::npos ? "" : line.substr(space + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    report[key] = value;
  }
  return report;
}

}  // namespace berth::driver_common
