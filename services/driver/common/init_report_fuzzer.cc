// Fuzzes DecodeInitReport: the line berth-task-init writes on fd 4, which a
// driver reads (an exec helper runs inside the task's namespaces). A report
// that decodes must round-trip through EncodeInitReport unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "services/driver/common/init_spec.h"
#include "tools/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using berth::driver_common::DecodeInitReport;
  using berth::driver_common::EncodeInitReport;
  using berth::driver_common::InitReport;
  const std::string input(berth::fuzz::AsText(data, size));
  InitReport report;
  if (!DecodeInitReport(input, &report)) return 0;
  const std::string encoded = EncodeInitReport(report);
  InitReport again;
  if (!DecodeInitReport(encoded, &again)) std::abort();
  if (again.kind != report.kind || again.wait_status != report.wait_status ||
      again.error_number != report.error_number || again.what != report.what) {
    std::abort();
  }
  return 0;
}
