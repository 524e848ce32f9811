// Fuzzes LoadPluginConfig: plugins.json, the file berth-node reads at start
// to know which driver plugins to launch. Each input is written to a file
// in a temporary directory (made once per process and removed at exit),
// which is also the plugin directory relative binaries are looked up in (it
// holds one executable, "driver"). A file that loads names each plugin once,
// with an executable binary; a refusal names the file.

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "services/node/plugin_manager.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

std::string* dir = nullptr;

void RemoveDir() {
  if (dir == nullptr) return;
  unlink((*dir + "/plugins.json").c_str());
  unlink((*dir + "/driver").c_str());
  rmdir(dir->c_str());
}

const std::string& Dir() {
  if (dir == nullptr) {
    char name[] = "/tmp/berth-plugins-json-fuzz-XXXXXX";
    if (mkdtemp(name) == nullptr) std::abort();
    dir = new std::string(name);
    std::atexit(RemoveDir);
    const std::string driver = *dir + "/driver";
    std::ofstream(driver) << "#!/bin/sh\nexit 0\n";
    if (chmod(driver.c_str(), 0755) != 0) std::abort();
  }
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = Dir() + "/plugins.json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const absl::string_view text = berth::fuzz::AsText(data, size);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out.good()) std::abort();
  }
  absl::StatusOr<std::vector<berth::node::PluginSpec>> specs =
      berth::node::LoadPluginConfig(path, Dir());
  if (!specs.ok()) {
    if (!absl::StrContains(specs.status().message(), path)) std::abort();
    return 0;
  }
  std::set<std::string> names;
  for (const berth::node::PluginSpec& spec : *specs) {
    if (spec.name.empty() || !names.insert(spec.name).second) std::abort();
    if (access(spec.binary.c_str(), X_OK) != 0) std::abort();
    for (const auto& [key, value] : spec.env) {
      if (key.empty() || absl::StrContains(key, '=') ||
          absl::StartsWith(key, "BERTH_PLUGIN_")) {
        std::abort();
      }
    }
  }
  return 0;
}
