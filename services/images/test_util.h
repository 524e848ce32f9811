// Helpers shared by berth-images' tests (testonly): the test images'
// expected digests, the node's platform, and looks at the store's
// directories.

#ifndef SERVICES_IMAGES_TEST_UTIL_H_
#define SERVICES_IMAGES_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "berth/image/v1/image.pb.h"
#include "nlohmann/json.hpp"

namespace berth::images::testing {

// tools/testimages/images/images.json in the runfiles: each test image's
// manifest, config and layer digests, sizes and diff_ids.
nlohmann::json ExpectedImages();

// linux/amd64, the platform the tests resolve indexes to.
image::v1::Platform LinuxAmd64();

// The names in `dir` (not "." and ".."); empty if it cannot be read.
std::vector<std::string> DirEntries(const std::string& dir);

// The sizes of the entries directly in `dir` (lstat), summed.
int64_t FileBytes(const std::string& dir);

}  // namespace berth::images::testing

#endif  // SERVICES_IMAGES_TEST_UTIL_H_
