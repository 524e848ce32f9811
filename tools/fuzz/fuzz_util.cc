#include "tools/fuzz/fuzz_util.h"

#include <errno.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

namespace berth::fuzz {

absl::string_view TargetName() {
  absl::string_view name = program_invocation_short_name;
  absl::ConsumeSuffix(&name, "_corpus_test");
  return name;
}

void Fail(absl::string_view what) {
  const absl::string_view target = TargetName();
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(target.size()),
               target.data(), static_cast<int>(what.size()), what.data());
  std::abort();
}

void QuietLogging() {
  static const bool quiet = [] {
    FLAGS_minloglevel = google::GLOG_ERROR;
    return true;
  }();
  (void)quiet;
}

}  // namespace berth::fuzz
