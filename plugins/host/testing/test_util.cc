#include "plugins/host/testing/test_util.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "plugins/host/plugin_process.h"

namespace berth::plugin::host::testing {
namespace {

// The parent pid in /proc/PID/stat, or -1.
pid_t ParentOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream content;
  content << in.rdbuf();
  const std::string stat = content.str();
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  // ") STATE PPID ..."
  std::istringstream fields(stat.substr(paren + 1));
  std::string state;
  pid_t parent = -1;
  fields >> state >> parent;
  return parent;
}

}  // namespace

std::string FakePluginPath() {
  return ::berth::testing::RunfilePath("plugins/host/testing/fake_plugin");
}

LaunchOptions FakePluginOptions(const std::string& socket_dir,
                                const std::string& name,
                                std::vector<std::string> args) {
  LaunchOptions options;
  options.name = name;
  options.binary = FakePluginPath();
  options.args = std::move(args);
  options.args.push_back(absl::StrCat("--name=", name));
  options.socket_dir = socket_dir;
  return options;
}

std::vector<pid_t> ChildProcesses() {
  std::vector<pid_t> children;
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (struct dirent* entry = readdir(proc)) {
    pid_t pid;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    if (ParentOf(pid) == self) children.push_back(pid);
  }
  closedir(proc);
  return children;
}

bool ProcessExists(pid_t pid) {
  struct stat st;
  return stat(absl::StrCat("/proc/", pid).c_str(), &st) == 0;
}

}  // namespace berth::plugin::host::testing
