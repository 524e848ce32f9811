// Fuzzes ParseImageConfig, the parser of an image's configuration document
// (from a registry or an archive). Checks that what is accepted keeps the
// limits: every diff_id a valid digest, at most kMaxLayers of them, health
// check durations and retries not negative.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using berth::fuzz::Require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::images;
  const absl::string_view json = berth::fuzz::AsText(data, size);
  absl::StatusOr<ImageConfigFile> config = ParseImageConfig(json);
  if (!config.ok()) return 0;
  Require(config->diff_ids.size() <= kMaxLayers, "too many diff_ids accepted");
  for (const std::string& diff_id : config->diff_ids) {
    Require(ValidateDigest(diff_id).ok(), "an invalid diff_id accepted");
  }
  const berth::image::v1::HealthCheck& check = config->config.healthcheck();
  for (const google::protobuf::Duration* d :
       {&check.interval(), &check.timeout(), &check.start_period()}) {
    Require(d->seconds() >= 0 && d->nanos() >= 0 && d->nanos() < 1000000000,
            "a health check duration out of range accepted");
  }
  Require(check.retries() >= 0, "negative health check retries accepted");
  // What the images service stores: the config must serialise.
  std::string bytes;
  Require(config->config.SerializeToString(&bytes),
          "an accepted config does not serialise");
  (void)PlatformString(config->platform);
  return 0;
}
