// Helpers of the store's tests (testonly): a child process killed with
// SIGKILL at a point it chooses, a scripted layer unpacker, and the images of
// tools/testimages.

#ifndef SERVICES_IMAGES_STORE_STORE_TEST_UTIL_H_
#define SERVICES_IMAGES_STORE_STORE_TEST_UTIL_H_

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/images/store/layer_store.h"

namespace berth::images::store_testing {

// Forks; the child runs `child(ready)`, which calls ready() when it reaches
// the point to be killed at (and never returns on its own; it is _exit(1)ed
// if it does). The parent waits for that, sleeps `delay`, kills the child
// with SIGKILL and reaps it. An error when the child ended before ready().
absl::Status KillChildWhenReady(
    const std::function<void(const std::function<void()>& ready)>& child,
    absl::Duration delay = absl::ZeroDuration());

// An unpacker that writes "file" ("content") in the layer's directory and
// says `diff_id`; counts its calls in `calls` if given. With `entered` and
// `release`, it notifies entered first and waits for release.
LayerStore::UnpackFunction FakeUnpack(std::string diff_id,
                                      std::atomic<int>* calls = nullptr,
                                      absl::Notification* entered = nullptr,
                                      absl::Notification* release = nullptr);

// tools/testimages/images in the test's runfiles: images.json (each image's
// manifest, config and layer digests and diff_ids) and each image's blobs.
const nlohmann::json& TestImage(const std::string& image);
std::string TestImageBlob(const std::string& image, const std::string& digest);

}  // namespace berth::images::store_testing

#endif  // SERVICES_IMAGES_STORE_STORE_TEST_UTIL_H_
