#include "services/netns_hook/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/unique_fd.h"
#include "services/netns_hook/netns.h"

namespace berth::netns_hook::testing {
namespace {

int CountLines(const std::string& text, const std::string& needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++count;
  }
  return count;
}

}  // namespace

std::string Output(const std::string& command) {
  std::string out;
  // ip and iptables live in /usr/sbin, which a test's PATH may lack.
  FILE* pipe = popen(
      absl::StrCat("PATH=/usr/sbin:/usr/bin:/sbin:/bin ", command).c_str(),
      "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  pclose(pipe);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Footprint& f) {
  return os << "{namespaces " << f.namespaces << ", veths " << f.veths
            << ", leases " << f.leases << ", rules " << f.rules << "}";
}

Footprint Count(const LinuxNetworkHooksOptions& options) {
  Footprint f;
  NamespaceDir dir(options.netns_dir);
  absl::StatusOr<std::vector<std::string>> names = dir.List(options.prefix);
  f.namespaces = names.ok() ? static_cast<int>(names->size()) : -1;
  f.veths =
      CountLines(Output(absl::StrCat("ip -o link show master ",
                                     options.bridge_name, " 2>/dev/null")),
                 "veth");
  // Leases of every network whose IPAM keeps them under the state
  // directory: <state>/ipam/<network>/<ip>.
  const std::string listing = Output(
      absl::StrCat("find ", options.state_dir, "/ipam -type f 2>/dev/null"));
  for (absl::string_view path :
       absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
    const absl::string_view name = path.substr(path.rfind('/') + 1);
    if (!absl::StartsWith(name, "last_reserved_ip") && name != "lock") {
      ++f.leases;
    }
  }
  f.rules = CountLines(Output("iptables-save 2>/dev/null"), options.prefix);
  return f;
}

std::string Describe(const LinuxNetworkHooksOptions& options) {
  std::string out;
  NamespaceDir dir(options.netns_dir);
  absl::StatusOr<std::vector<std::string>> names = dir.List(options.prefix);
  if (names.ok()) {
    for (const std::string& name : *names)
      absl::StrAppend(&out, "namespace ", name, "\n");
  }
  absl::StrAppend(
      &out, Output(absl::StrCat("ip -o link show master ", options.bridge_name,
                                " 2>/dev/null")));
  for (absl::string_view line :
       absl::StrSplit(Output("iptables-save 2>/dev/null"), '\n')) {
    if (absl::StrContains(line, options.prefix)) {
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

LinuxNetworkHooksOptions TestOptions(const std::string& temp_dir,
                                     const std::string& tag, int subnet,
                                     const std::string& plugin_dir,
                                     std::string* gateway) {
  LinuxNetworkHooksOptions options;
  options.state_dir = temp_dir + "/state";
  options.netns_dir = temp_dir + "/netns";
  options.cni_config_dir = temp_dir + "/cni";
  options.prefix = absl::StrCat("berth-", tag, "-");
  options.bridge_network = absl::StrCat("berth-", tag);
  options.bridge_name = absl::StrCat("bt", tag).substr(0, 15);
  options.bridge_subnet = absl::StrCat("10.211.", subnet, ".0/24");
  options.cni_plugin_dirs = {plugin_dir, "/usr/lib/cni"};
  mkdir(plugin_dir.c_str(), 0755);
  if (gateway != nullptr) *gateway = absl::StrCat("10.211.", subnet, ".1");
  return options;
}

void WritePlugin(const std::string& dir, const std::string& type,
                 const std::string& body) {
  const std::string path = absl::StrCat(dir, "/", type);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
}

pid_t ListenIn(const std::string& path, const std::string& ip, int port) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  base::UniqueFd ready_read(ready[0]);
  base::UniqueFd ready_write(ready[1]);
  const pid_t pid = fork();
  if (pid != 0) {
    ready_write
        .reset();  // before the read: its end of file says the child died
    char byte = 0;
    const bool ok = read(ready_read.get(), &byte, 1) == 1 && byte == 'y';
    ready_read.reset();
    if (!ok) {
      waitpid(pid, nullptr, 0);
      return -1;
    }
    return pid;
  }
  // The child leaves by _exit (no destructor runs): it closes what it
  // does not use itself.
  close(ready_read.get());
  alarm(20);
  const int ns = open(path.c_str(), O_RDONLY);
  if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(10);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 1) != 0) {
    _exit(11);
  }
  (void)!write(ready_write.get(), "y", 1);
  const int client = accept(fd, nullptr, nullptr);
  char buffer[8] = {};
  const ssize_t n = read(client, buffer, 4);
  _exit(n == 4 && std::string(buffer, 4) == "ping" ? 0 : 12);
}

bool Ping(const std::string& ip, int port) {
  const base::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  timeval timeout = {5, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&address),
                 sizeof(address)) == 0 &&
         write(fd.get(), "ping", 4) == 4;
}

bool ListenerGotPing(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

}  // namespace berth::netns_hook::testing
