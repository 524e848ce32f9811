// What the registry client's tests share: clients from a configuration
// text, references, and blobs fetched into (or left half-written in) a
// ContentStore.

#ifndef SERVICES_IMAGES_REGISTRY_REGISTRY_TEST_UTIL_H_
#define SERVICES_IMAGES_REGISTRY_REGISTRY_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "services/images/oci/reference.h"
#include "services/images/registry/registry_client.h"
#include "services/images/store/content_store.h"

namespace berth::images::testing {

// A client of the configuration `json`, with `attempts` tries and quick
// retries. Fails the test (and returns null) when it cannot be made.
std::unique_ptr<RegistryClient> MakeClient(const std::string& json,
                                           int attempts = 3);

// The configuration of a plain-HTTP registry at `host` ("127.0.0.1:PORT"),
// plus `extra` fields of its entry (", \"username\": ...").
std::string InsecureConfig(const std::string& host,
                           const std::string& extra = "");

// The parsed reference (fails the test when it does not parse).
Reference Ref(const std::string& text);

// Opens a store at `root`; fails the test (and returns null) when it cannot.
std::unique_ptr<ContentStore> OpenStore(const std::string& root);

// Fetches the blob `digest` of `size` bytes into `store`, appending each
// progress report to `progress` when given. The writer is aborted (its
// ingest file kept) when the fetch fails.
absl::Status FetchIntoStore(RegistryClient& client, ContentStore& store,
                            const Reference& reference,
                            const std::string& digest, int64_t size,
                            std::vector<int64_t>* progress = nullptr);

// Leaves `prefix` in the store's ingest file of `digest`, as an interrupted
// download would.
absl::Status LeavePrefix(ContentStore& store, const std::string& digest,
                         int64_t size, absl::string_view prefix);

}  // namespace berth::images::testing

#endif  // SERVICES_IMAGES_REGISTRY_REGISTRY_TEST_UTIL_H_
