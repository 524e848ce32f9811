// Fuzzes DecodeExitRecord: the exit file a task's init writes in the task's
// directory (which a task in a user namespace may reach). A record that
// decodes must round-trip through EncodeExitRecord unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "services/driver/common/init_spec.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::driver_common::DecodeExitRecord;
  using berth::driver_common::EncodeExitRecord;
  using berth::driver_common::ExitRecord;
  using berth::driver_common::kMaxExitRecordBytes;
  const std::string input(berth::fuzz::AsText(data, size));
  ExitRecord record;
  if (!DecodeExitRecord(input, &record)) return 0;
  if (input.size() > kMaxExitRecordBytes) std::abort();
  const std::string encoded = EncodeExitRecord(record);
  if (encoded.size() > kMaxExitRecordBytes) std::abort();
  ExitRecord again;
  if (!DecodeExitRecord(encoded, &again)) std::abort();
  if (again.exit_code != record.exit_code || again.signal != record.signal ||
      again.exited_at_unix_nanos != record.exited_at_unix_nanos) {
    std::abort();
  }
  return 0;
}
