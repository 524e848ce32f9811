// Fuzzes CompileSeccompProfile, the compiler of a task's custom seccomp
// profile (the OCI / Docker JSON a client sends in
// isolation.seccomp.custom_profile_json), for the default capabilities and
// for all of them (Docker's includes/excludes judge them). A profile that
// compiles must give a BPF program the kernel could take: whole
// instructions, 1 to BPF_MAXINSNS of them.

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "services/driver/common/security.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

void Check(const absl::StatusOr<std::string>& filter) {
  if (!filter.ok()) return;
  const size_t size = filter->size();
  if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
      size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
    std::fprintf(stderr, "seccomp_profile_fuzzer: a filter of %zu bytes\n",
                 size);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth::driver_common;
  // Larger profiles only make libseccomp slower, not the parser different.
  if (size > (64 << 10)) return 0;
  const std::string json(berth::fuzz::AsText(data, size));
  absl::StatusOr<std::string> filter =
      CompileSeccompProfile(json, kDefaultCapabilities);
  Check(filter);
  if (filter.ok()) Check(CompileSeccompProfile(json, kAllCapabilities));
  return 0;
}
