// Helpers for the tests of the collectors (//services/common/stats) and of
// berth-stats (//services/stats): short temporary directories, fixture files,
// and waiting on a condition.

#ifndef SERVICES_COMMON_STATS_TEST_UTIL_H_
#define SERVICES_COMMON_STATS_TEST_UTIL_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/common/test_util.h"

namespace berth {
namespace stats {
namespace testing {

// The generic helpers live in //services/common:test_util.
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;

// Writes `content` to `path` (replacing it in place, so that descriptors kept
// open on it see the new content), making missing parent directories.
// Fails the test on error.
void WriteFile(const std::string& path, absl::string_view content);

// Makes `path` and its missing parents.
void MakeDirs(const std::string& path);

// Removes `path` and everything below it; no error if it is not there.
void RemoveTree(const std::string& path);

// The path of a data dependency in the runfiles, e.g.
// "services/stats/berth-stats".
std::string Runfile(absl::string_view path);

}  // namespace testing
}  // namespace stats
}  // namespace berth

#endif  // SERVICES_COMMON_STATS_TEST_UTIL_H_
