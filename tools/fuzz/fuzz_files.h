// Files and temporary directories for berth's libFuzzer harnesses
// (berth_fuzz_target, fuzz.bzl) whose code reads or writes a directory.
// Links //services/common:remove_tree: only for harnesses of packages that
// may depend on services/common (ARCHITECTURE.md, "Layers"). Every helper
// aborts naming the path and the error when it cannot do its work (through
// berth::fuzz::Fail: "<target>: <what>").

#ifndef TOOLS_FUZZ_FUZZ_FILES_H_
#define TOOLS_FUZZ_FUZZ_FILES_H_

#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace berth::fuzz {

// Where temporary directories go: $TEST_TMPDIR, else $TMPDIR (absolute
// values only), else /tmp.
std::string TempBase();

// A fresh directory <TempBase()>/<prefix>-XXXXXX (0700) for one input,
// removed with everything in it (berth::RemoveTree: no symbolic link
// followed) when it goes out of scope. An input that crashes leaves it.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(absl::string_view prefix);
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Creates `path`, which must not exist (O_EXCL), mode 0600, holding
// `content`.
void CreateFile(const std::string& path, absl::string_view content);

// The names in directory `dir`, without "." and "..".
std::set<std::string> ListNames(const std::string& dir);

}  // namespace berth::fuzz

#endif  // TOOLS_FUZZ_FUZZ_FILES_H_
