// Fuzzes the allocation records berth-netns reads back from its state
// directory when it starts (RecordFromJson, through the reconcile): a torn,
// old or edited file must be refused with the field named, never crash the
// service. A record that is read writes back (RecordToJson) to JSON that
// reads again to the same record.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "services/netns_hook/allocation_store.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace nh = berth::netns_hook;
  using nlohmann::json;
  const absl::string_view text = berth::fuzz::AsText(data, size);
  const json in = json::parse(text.begin(), text.end(), nullptr,
                              /*allow_exceptions=*/false);
  absl::StatusOr<nh::AllocationRecord> record = nh::RecordFromJson(in);
  if (!record.ok()) return 0;
  const json out = nh::RecordToJson(*record);
  absl::StatusOr<nh::AllocationRecord> again = nh::RecordFromJson(out);
  if (!again.ok()) std::abort();
  if (nh::RecordToJson(*again) != out) std::abort();
  // What AllocationStore::Write stores.
  (void)out.dump(2, ' ', false, json::error_handler_t::replace);
  return 0;
}
