// What berth's libFuzzer harnesses (berth_fuzz_target, fuzz.bzl) share:
// the input as text, a property check that aborts naming what broke, and
// glog kept quiet. Abseil and glog only: any harness may link it.
//
//   #include "tools/fuzz/fuzz_util.h"
//
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     berth::fuzz::QuietLogging();
//     const absl::string_view text = berth::fuzz::AsText(data, size);
//     ...
//     berth::fuzz::Require(parsed->size <= kMax, "an accepted size too big");

#ifndef TOOLS_FUZZ_FUZZ_UTIL_H_
#define TOOLS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace berth::fuzz {

// The input's bytes as text, without a copy (`data` is libFuzzer's buffer of
// exactly `size` bytes, so ASan sees a read past its end).
inline absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

// The target's name: the program's name without "_corpus_test" (the same
// for the libFuzzer binary and its corpus test).
absl::string_view TargetName();

// Prints "<target>: <what>" on stderr and aborts: libFuzzer reports a
// crash, the corpus test fails.
[[noreturn]] void Fail(absl::string_view what);

// Fail(what) unless `condition` holds.
inline void Require(bool condition, absl::string_view what) {
  if (!condition) Fail(what);
}

// glog's minimum level raised to ERROR (the first call; later ones do
// nothing): for targets whose code warns about what it skips, thousands of
// times a run.
void QuietLogging();

}  // namespace berth::fuzz

#endif  // TOOLS_FUZZ_FUZZ_UTIL_H_
