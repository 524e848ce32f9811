// Content digests: "sha256:" and 64 lowercase hex characters. Only sha256 is
// accepted (as containerd does by default); anything else is refused,
// naming the text.

#ifndef SERVICES_IMAGES_OCI_DIGEST_H_
#define SERVICES_IMAGES_OCI_DIGEST_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace berth::images {

// OK when `digest` is "sha256:<64 lowercase hex>"; INVALID_ARGUMENT naming
// it (and `what`, e.g. "layer 2 of manifest sha256:...") otherwise. Every
// digest from a registry, an archive or a client passes through this before
// it is used in a path.
absl::Status ValidateDigest(absl::string_view digest,
                            absl::string_view what = "digest");

// "sha256:" + hex.
std::string DigestFromHex(absl::string_view hex);

// The hex part of a valid digest.
absl::string_view DigestHex(absl::string_view digest);

// The digest of `data` ("sha256:<hex>").
std::string DigestOf(absl::string_view data);

}  // namespace berth::images

#endif  // SERVICES_IMAGES_OCI_DIGEST_H_
