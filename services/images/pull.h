// Pulling an image over the OCI distribution API into the store: the
// reference resolved to a manifest (through an index for the requested or
// the node's platform), the index, manifest and config stored verified, the
// layer blobs downloaded in parallel (at most max_concurrent_downloads at a
// time across all pulls; a blob already stored is not fetched again), each
// layer unpacked once (LayerStore, which checks the config's diff_id), and
// only then the image record written. Everything a pull stores is held by a
// store lease until its record is written, so a garbage collection running
// meanwhile keeps it.
//
// Two pulls sharing a blob download it once: the second waits for the first
// (and shows its bytes) and, should the first be cancelled, downloads it
// itself. A cancelled pull keeps the bytes it downloaded in the store's
// ingest directory, where the next pull of the blob resumes; a pull that
// fails on bytes not matching their digest stores nothing (what it stored
// before is collected).

#ifndef SERVICES_IMAGES_PULL_H_
#define SERVICES_IMAGES_PULL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.pb.h"
#include "services/images/registry/registry_client.h"
#include "services/images/store/store.h"

namespace berth::images {

struct PullerOptions {
  // Layer blobs downloaded at the same time, over all pulls (>= 1).
  int max_concurrent_downloads = 3;
  // The platform chosen from an index when a request names none.
  image::v1::Platform platform;
  // Progress while only bytes move is sent at most this often; a layer
  // changing state is sent at once.
  absl::Duration progress_interval = absl::Milliseconds(100);
  // The largest image configuration accepted.
  int64_t max_config_size = 8 << 20;
  // Collects garbage after a pull failed on bytes not matching their
  // digest; empty for Store::CollectGarbage(false).
  std::function<absl::StatusOr<GcResult>()> collect_garbage;
};

// What a pull's caller provides: where progress goes and whether the caller
// is still there. Both are called from the thread that called Pull only.
struct PullCallbacks {
  // Gets each progress message; returns false when the caller has gone
  // (the pull is then cancelled). May be empty.
  std::function<bool(const image::v1::PullImageProgress&)> progress;
  // True once the caller cancelled. May be empty.
  std::function<bool()> cancelled;
};

// Thread-safe: one Puller serves every pull of the service.
class Puller {
 public:
  // `store` and `registry` are not owned and must outlive the Puller.
  Puller(Store* store, RegistryClient* registry, PullerOptions options);
  ~Puller();
  Puller(const Puller&) = delete;
  Puller& operator=(const Puller&) = delete;

  // Pulls request.reference and returns the image as stored (with
  // other_names). The last progress message carries the image too. Errors
  // name the reference, the registry host and, for a blob, its digest;
  // CANCELLED when the caller went away.
  absl::StatusOr<image::v1::Image> Pull(
      const image::v1::PullImageRequest& request,
      const PullCallbacks& callbacks) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Operation;
  struct Flight;

  // A download slot (blocks until one is free or `cancelled` says so);
  // false when cancelled first.
  bool AcquireSlot(const std::function<bool()>& cancelled)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseSlot() ABSL_LOCKS_EXCLUDED(mu_);

  // The flight of `digest`: `*owner` is set when the caller is to download
  // it (and must call Land), else the caller waits on the flight returned.
  std::shared_ptr<Flight> Board(const std::string& digest, bool* owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Land(const std::string& digest, const std::shared_ptr<Flight>& flight,
            absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  Store* const store_;
  RegistryClient* const registry_;
  const PullerOptions options_;

  absl::Mutex mu_;
  int slots_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // Blob downloads in progress, by digest.
  std::map<std::string, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_PULL_H_
