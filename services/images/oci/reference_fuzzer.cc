// Fuzzes ParseReference (image names from clients, archives and task
// specs) and ValidateDigest. An accepted reference must parse again from
// its normalised form to the same reference, its Name() must stay within
// 255 characters, and a digest it carries must be valid.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/reference.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using berth::fuzz::Require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  const absl::string_view text = berth::fuzz::AsText(data, size);
  if (ValidateDigest(text).ok()) {
    Require(DigestFromHex(DigestHex(text)) == text,
            "a valid digest does not round-trip through its hex");
  }
  absl::StatusOr<Reference> reference = ParseReference(text);
  if (!reference.ok()) return 0;
  Require(!reference->domain.empty(), "an accepted reference has no domain");
  Require(!reference->repository.empty(),
          "an accepted reference has no repository");
  Require(reference->Name().size() <= 255, "an accepted name is too long");
  Require(!reference->tag.empty() || !reference->digest.empty(),
          "an accepted reference has neither tag nor digest");
  Require(reference->digest.empty() || ValidateDigest(reference->digest).ok(),
          "an accepted reference has an invalid digest");
  Require(!reference->Object().empty(), "an accepted reference has no object");
  absl::StatusOr<Reference> again = ParseReference(reference->String());
  Require(again.ok(), "the normalised form of a reference does not parse");
  Require(again->domain == reference->domain &&
              again->repository == reference->repository &&
              again->tag == reference->tag &&
              again->digest == reference->digest,
          "the normalised form of a reference parses to another");
  (void)FamiliarString(*reference);
  return 0;
}
