#include "services/common/test_util.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace berth {
namespace testing {
namespace {

int RemoveOne(const char* path, const struct stat*, int, struct FTW*) {
  if (remove(path) != 0) {
    ADD_FAILURE() << "cannot remove " << path << ": " << std::strerror(errno);
  }
  return 0;
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
  // Tests may have made the tree unwritable; make it removable first.
  nftw(
      path_.c_str(),
      [](const char* path, const struct stat* st, int type, struct FTW*) {
        if (type == FTW_D || type == FTW_DP) chmod(path, 0700);
        return 0;
      },
      16, FTW_PHYS);
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

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

int FileMode(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 07777;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::string RunfilePath(absl::string_view workspace_path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "berth", "/",
                      workspace_path);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
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

}  // namespace testing
}  // namespace berth
