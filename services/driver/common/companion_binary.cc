#include "services/driver/common/companion_binary.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace berth::driver_common {
namespace {

std::string SelfDir() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace

std::string FindCompanionBinary(const std::string& flag, const char* argv0,
                                const std::string& name,
                                const std::string& workspace_path) {
  if (!flag.empty()) return flag;
  const std::string dir = SelfDir();
  std::vector<std::string> candidates = {absl::StrCat(dir, "/", name)};
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* value = std::getenv(env); value != nullptr) {
      candidates.push_back(absl::StrCat(value, "/berth/", workspace_path));
    }
  }
  candidates.push_back(absl::StrCat(argv0, ".runfiles/berth/", workspace_path));
  // bazel-bin/services/driver/<driver>/<this> → bazel-bin/<workspace_path>.
  candidates.push_back(absl::StrCat(dir, "/../../../", workspace_path));
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return candidates[0];
}

}  // namespace berth::driver_common
