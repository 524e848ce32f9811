// Fuzzes DecodeInitSpec: what berth-task-init reads on fd 3. A spec that
// decodes must encode and decode again to the same encoding (nothing is lost
// or invented by a round trip).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "services/driver/common/init_spec.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::driver_common::DecodeInitSpec;
  using berth::driver_common::EncodeInitSpec;
  using berth::driver_common::InitSpec;
  const std::string input(berth::fuzz::AsText(data, size));
  InitSpec spec;
  std::string error;
  if (!DecodeInitSpec(input, &spec, &error)) {
    if (error.empty()) std::abort();  // a refusal names the key at fault
    return 0;
  }
  const std::string encoded = EncodeInitSpec(spec);
  InitSpec again;
  if (!DecodeInitSpec(encoded, &again, &error)) std::abort();
  if (EncodeInitSpec(again) != encoded) std::abort();
  return 0;
}
