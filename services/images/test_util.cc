#include "services/images/test_util.h"

#include <dirent.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "services/common/test_util.h"

namespace berth::images::testing {

nlohmann::json ExpectedImages() {
  return nlohmann::json::parse(berth::testing::ReadFileOrEmpty(
      berth::testing::RunfilePath("tools/testimages/images/images.json")));
}

image::v1::Platform LinuxAmd64() {
  image::v1::Platform platform;
  platform.set_os("linux");
  platform.set_architecture("amd64");
  return platform;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

int64_t FileBytes(const std::string& dir) {
  int64_t total = 0;
  for (const std::string& name : DirEntries(dir)) {
    struct stat st;
    if (lstat(absl::StrCat(dir, "/", name).c_str(), &st) == 0) {
      total += st.st_size;
    }
  }
  return total;
}

}  // namespace berth::images::testing
