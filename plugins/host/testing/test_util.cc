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

int RemoveOne(const char* path, const struct stat*, int, struct FTW*) {
  if (remove(path) != 0) {
    ADD_FAILURE() << "cannot remove " << path << ": " << std::strerror(errno);
  }
  return 0;
}

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

ShortTempDir::ShortTempDir() {
  char templ[] = "/tmp/berth-XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = templ;
}

ShortTempDir::~ShortTempDir() {
  if (path_.empty()) return;
  nftw(path_.c_str(), RemoveOne, 16, FTW_DEPTH | FTW_PHYS);
}

std::string ShortTempDir::Join(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

std::vector<std::string> ShortTempDir::Entries() const {
  std::vector<std::string> entries;
  DIR* dir = opendir(path_.c_str());
  if (dir == nullptr) return entries;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") entries.push_back(name);
  }
  closedir(dir);
  return entries;
}

std::string FakePluginPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "berth",
                      "/plugins/host/testing/fake_plugin");
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

CapturingLogSink::CapturingLogSink(google::LogSeverity min_severity)
    : min_severity_(min_severity) {
  google::AddLogSink(this);
}

CapturingLogSink::~CapturingLogSink() { google::RemoveLogSink(this); }

std::vector<CapturingLogSink::Entry> CapturingLogSink::entries() const {
  absl::MutexLock lock(&mu_);
  return entries_;
}

std::vector<std::string> CapturingLogSink::messages() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> messages;
  for (const Entry& entry : entries_) messages.push_back(entry.message);
  return messages;
}

void CapturingLogSink::send(google::LogSeverity severity, const char*,
                            const char*, int, const google::LogMessageTime&,
                            const char* message, size_t message_len) {
  if (severity < min_severity_) return;
  absl::MutexLock lock(&mu_);
  entries_.push_back({severity, std::string(message, message_len)});
}

}  // namespace berth::plugin::host::testing
