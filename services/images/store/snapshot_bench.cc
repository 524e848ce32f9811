// snapshot_bench: the store's own snapshot prepare + release (issue 16,
// point 7, target: median <= 5 ms), in process, without gRPC:
//
//   snapshot_bench [--cycles=50] [--warmup=3] [--layers=3] [--parent=/tmp]
//
// Makes a store in a new directory below --parent, stores an image of
// --layers layers (each a small tree of directories and files, made by a
// scripted unpacker: the figure is about the overlay, not about unpacking),
// then times Store::PrepareSnapshot + SnapshotStore::Release of a fresh id
// per cycle; between the two, untimed, the rootfs is checked to show every
// layer. Prints, as tools/bench/figures.h does,
//   sample snapshot_prepare_release MS ms
//   median snapshot_prepare_release MS ms n=N min=MIN max=MAX
// (and the same for snapshot_prepare and snapshot_release alone), removes
// its directory and exits 0; 1 on a failure (named on stderr). Runs as root.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/sha256.h"
#include "services/common/remove_tree.h"
#include "services/images/oci/digest.h"
#include "services/images/store/store.h"

ABSL_FLAG(int, cycles, 50, "Timed prepare + release cycles.");
ABSL_FLAG(int, warmup, 3, "Untimed cycles first.");
ABSL_FLAG(int, layers, 3, "Layers of the image.");
ABSL_FLAG(std::string, parent, "/tmp",
          "The store is made in a new directory below this one.");

namespace berth::images {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Figure {
  std::string name;
  std::vector<double> samples;
  void Add(double ms) {
    samples.push_back(ms);
    std::printf("sample %s %.3f ms\n", name.c_str(), ms);
    std::fflush(stdout);
  }
  void PrintMedian() const {
    if (samples.empty()) return;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median =
        n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::printf("median %s %.3f ms n=%zu min=%.3f max=%.3f\n", name.c_str(),
                median, n, sorted.front(), sorted.back());
  }
};

int Run() {
  const int cycles = absl::GetFlag(FLAGS_cycles);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int layers = absl::GetFlag(FLAGS_layers);
  if (cycles < 1 || warmup < 0 || layers < 1) {
    std::fprintf(stderr,
                 "snapshot_bench: bad --cycles, --warmup or --layers\n");
    return 2;
  }
  std::string dir =
      absl::StrCat(absl::GetFlag(FLAGS_parent), "/berth-snapshot-bench-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("snapshot_bench: mkdtemp");
    return 1;
  }
  int status = 1;
  {
    // The unpacker makes layer number `next` (in Unpack order).
    int next = 0;
    auto unpack = [&next](
                      int, const std::string& dest,
                      const UnpackOptions&) -> absl::StatusOr<UnpackResult> {
      const int layer = next++;
      mkdir((dest + "/etc").c_str(), 0755);
      std::ofstream(dest + "/etc/layer") << layer;
      const std::string top = absl::StrCat(dest, "/layer", layer);
      mkdir(top.c_str(), 0755);
      for (int d = 0; d < 5; ++d) {
        const std::string sub = absl::StrCat(top, "/d", d);
        mkdir(sub.c_str(), 0755);
        for (int f = 0; f < 4; ++f) {
          std::ofstream(absl::StrCat(sub, "/f", f)) << std::string(1000, 'x');
        }
      }
      UnpackResult result;
      result.diff_id = DigestOf(absl::StrCat("bench layer ", layer));
      result.unpacked_size = 20000;
      result.entries = 27;
      return result;
    };
    auto store = Store::Open(dir, unpack);
    if (!store.ok()) {
      std::fprintf(stderr, "snapshot_bench: %s\n",
                   store.status().ToString().c_str());
      RemoveTree(dir).IgnoreError();
      return 1;
    }
    ::berth::image::v1::Image image;
    image.set_name("bench/snapshot:latest");
    const std::string config = "{\"bench\":true}";
    image.set_config_digest(DigestOf(config));
    const std::string manifest = "{\"bench manifest\":true}";
    image.set_digest(DigestOf(manifest));
    image.set_manifest_digest(image.digest());
    absl::Status ok = (*store)->content()->WriteBlob(DigestOf(config), config);
    if (ok.ok()) ok = (*store)->content()->WriteBlob(image.digest(), manifest);
    for (int i = 0; ok.ok() && i < layers; ++i) {
      const std::string blob = absl::StrCat("bench layer blob ", i);
      ok = (*store)->content()->WriteBlob(DigestOf(blob), blob);
      auto unpacked = (*store)->layers()->Unpack(
          DigestOf(blob), DigestOf(absl::StrCat("bench layer ", i)));
      if (ok.ok() && !unpacked.ok()) ok = unpacked.status();
      auto* layer = image.add_layers();
      layer->set_digest(DigestOf(blob));
      layer->set_diff_id(DigestOf(absl::StrCat("bench layer ", i)));
    }
    if (ok.ok()) ok = (*store)->images()->Put(image);

    Figure both{"snapshot_prepare_release", {}};
    Figure prepare{"snapshot_prepare", {}};
    Figure release{"snapshot_release", {}};
    for (int cycle = 0; ok.ok() && cycle < warmup + cycles; ++cycle) {
      const std::string id = absl::StrCat("bench-", cycle);
      const Clock::time_point start = Clock::now();
      auto snapshot = (*store)->PrepareSnapshot(id, image);
      const Clock::time_point prepared = Clock::now();
      if (!snapshot.ok()) {
        ok = snapshot.status();
        break;
      }
      // Untimed: every layer shows, the top one's /etc/layer wins.
      int shown = -1;
      std::ifstream(snapshot->rootfs + "/etc/layer") >> shown;
      struct stat st;
      if (shown != layers - 1 ||
          stat(absl::StrCat(snapshot->rootfs, "/layer0/d4/f3").c_str(), &st) !=
              0) {
        ok = absl::InternalError(
            absl::StrCat("snapshot ", id, " does not show the image's layers"));
      }
      const Clock::time_point released_start = Clock::now();
      absl::Status released = (*store)->snapshots()->Release(id);
      const Clock::time_point released_end = Clock::now();
      if (ok.ok()) ok = released;
      if (!ok.ok()) break;
      if (cycle < warmup) continue;
      prepare.Add(Ms(prepared - start));
      release.Add(Ms(released_end - released_start));
      both.Add(Ms(prepared - start) + Ms(released_end - released_start));
    }
    if (ok.ok()) {
      both.PrintMedian();
      prepare.PrintMedian();
      release.PrintMedian();
      status = 0;
    } else {
      std::fprintf(stderr, "snapshot_bench: %s\n", ok.ToString().c_str());
    }
  }
  absl::Status removed = RemoveTree(dir);
  if (!removed.ok()) {
    std::fprintf(stderr, "snapshot_bench: %s\n", removed.ToString().c_str());
    status = 1;
  }
  return status;
}

}  // namespace
}  // namespace berth::images

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return berth::images::Run();
}
