// unpack_layer BLOB DEST_DIR: unpacks one layer blob (tar, gzip or zstd)
// with UnpackLayer into DEST_DIR (made if missing; must be empty) and prints
//   diff_id sha256:<hex>
//   bytes <file contents written>
//   entries <tar entries>
//   seconds <wall time of the unpack>
// for the benchmarks (tools/bench). Exit status 1 on error, 2 on usage.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "services/images/unpack/unpack.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BLOB DEST_DIR\n", argv[0]);
    return 2;
  }
  const std::string blob = argv[1];
  const std::string dest = argv[2];
  const berth::base::UniqueFd fd(open(blob.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    std::fprintf(stderr, "unpack_layer: %s: %s\n", blob.c_str(),
                 std::strerror(errno));
    return 1;
  }
  if (mkdir(dest.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "unpack_layer: %s: %s\n", dest.c_str(),
                 std::strerror(errno));
    return 1;
  }
  const absl::Time start = absl::Now();
  const absl::StatusOr<berth::images::UnpackResult> result =
      berth::images::UnpackLayer(fd.get(), dest);
  const absl::Duration elapsed = absl::Now() - start;
  if (!result.ok()) {
    std::fprintf(stderr, "unpack_layer: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf("diff_id %s\nbytes %lld\nentries %lld\nseconds %.3f\n",
              result->diff_id.c_str(),
              static_cast<long long>(result->unpacked_size),  // NOLINT
              static_cast<long long>(result->entries),        // NOLINT
              absl::ToDoubleSeconds(elapsed));
  return 0;
}
