// api_compat: checks a current API descriptor set against a baseline.
//
//   api_compat --baseline=PATH --current=PATH
//
// Both are text-format google.protobuf.FileDescriptorSets. Prints one line per
// breaking change, `BREAKING [RULE] message`, then a summary line.
// Exit status: 0 compatible, 1 breaking changes found, 2 usage or input error.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.pb.h"
#include "tools/apicompat/apicompat.h"

ABSL_FLAG(std::string, baseline, "",
          "Text-format FileDescriptorSet of the released API.");
ABSL_FLAG(std::string, current, "",
          "Text-format FileDescriptorSet of the API to check.");

namespace {

constexpr int kExitCompatible = 0;
constexpr int kExitBreaking = 1;
constexpr int kExitUsage = 2;

// absl::ParseCommandLine exits with status 1 on a bad flag (and on --help),
// which callers would read as "breaking". While it runs, turn any exit into
// the usage status instead.
bool parsing_flags = false;

void ExitUsageIfParsingFlags() {
  if (parsing_flags) {
    std::fflush(nullptr);
    std::_Exit(kExitUsage);
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Reports the breaking changes of an API descriptor set.\n"
      "  api_compat --baseline=PATH --current=PATH\n"
      "Both are text-format google.protobuf.FileDescriptorSets. Exit status: "
      "0 compatible, 1 breaking, 2 usage or input error.");
  std::atexit(ExitUsageIfParsingFlags);
  parsing_flags = true;
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  parsing_flags = false;

  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  const std::string baseline_path = absl::GetFlag(FLAGS_baseline);
  const std::string current_path = absl::GetFlag(FLAGS_current);
  if (args.size() > 1) {
    std::cerr << "api_compat: unexpected argument " << args[1]
              << "; usage: api_compat --baseline=PATH --current=PATH\n";
    return kExitUsage;
  }
  if (baseline_path.empty() || current_path.empty()) {
    std::cerr << "api_compat: --baseline and --current are both required; "
                 "usage: api_compat --baseline=PATH --current=PATH\n";
    return kExitUsage;
  }

  absl::StatusOr<google::protobuf::FileDescriptorSet> baseline =
      berth::apicompat::ReadTextDescriptorSet(baseline_path);
  if (!baseline.ok()) {
    std::cerr << "api_compat: bad --baseline: " << baseline.status().message()
              << "\n";
    return kExitUsage;
  }
  absl::StatusOr<google::protobuf::FileDescriptorSet> current =
      berth::apicompat::ReadTextDescriptorSet(current_path);
  if (!current.ok()) {
    std::cerr << "api_compat: bad --current: " << current.status().message()
              << "\n";
    return kExitUsage;
  }

  const std::vector<berth::apicompat::Violation> violations =
      berth::apicompat::FindBreakingChanges(*baseline, *current);
  for (const berth::apicompat::Violation& violation : violations) {
    std::cout << "BREAKING [" << violation.rule << "] " << violation.message
              << "\n";
  }
  if (!violations.empty()) {
    std::cout << violations.size() << " breaking change(s) against "
              << baseline_path << "\n";
    return kExitBreaking;
  }
  std::cout << "compatible with " << baseline_path << "\n";
  return kExitCompatible;
}
