// Blobs by digest, under <root>/blobs/sha256/<hex>. A blob is written to
// <root>/ingest/<hex> first (resumable: a writer reopened for the same digest
// continues at the bytes already there), its SHA-256 computed as it is
// written, and renamed to its digest only after digest and size matched; a
// mismatch deletes the partial file and fails naming expected and actual
// digests. Ingest files are kept across restarts so that a pull interrupted
// by a crash resumes; they are never visible as blobs (Has, List and OpenBlob
// see blobs/ only). Open removes ingest entries that are not regular files
// named by a hex digest, and those older than a day; CleanIngest (run by the
// garbage collector) removes those no writer holds. Thread-safe: two writers
// of the same digest exclude each other (the second waits for the first;
// another process's writer, holding the ingest file's flock, makes it fail
// with ABORTED "being written"). A committed blob is fsync'ed, renamed into
// place and its directory fsync'ed, so it survives a crash of the machine.

#ifndef SERVICES_IMAGES_STORE_CONTENT_STORE_H_
#define SERVICES_IMAGES_STORE_CONTENT_STORE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace berth::images {

class ContentStore;

// One blob being written. Not thread-safe; one writer per blob.
class BlobWriter {
 public:
  virtual ~BlobWriter() = default;
  // Bytes already in the ingest file (from an earlier, interrupted write):
  // the offset to resume the download at. 0 for a fresh blob.
  virtual int64_t offset() const = 0;
  // Appends data.
  virtual absl::Status Write(absl::string_view data) = 0;
  // Discards what was written so far (a registry that ignored a Range
  // request sends the whole blob again).
  virtual absl::Status Truncate() = 0;
  // Checks size and digest, then makes the blob visible under its digest.
  // DATA_LOSS names the expected and actual digest (or size) and deletes the
  // ingest file; nothing is stored.
  virtual absl::Status Commit() = 0;
  // Closes without committing; the ingest file stays for a later resume
  // unless `remove`.
  virtual void Abort(bool remove) = 0;
};

class ContentStore {
 public:
  // `root` is created (0700) if missing.
  static absl::StatusOr<std::unique_ptr<ContentStore>> Open(
      const std::string& root);
  virtual ~ContentStore() = default;

  // True when the blob is stored (complete and verified).
  virtual bool Has(absl::string_view digest) const = 0;
  // Its size; NOT_FOUND names the digest.
  virtual absl::StatusOr<int64_t> Size(absl::string_view digest) const = 0;
  // Opens the stored blob for reading (O_RDONLY|O_CLOEXEC).
  virtual absl::StatusOr<base::UniqueFd> OpenBlob(
      absl::string_view digest) const = 0;
  // Reads a whole blob of at most `max_size` bytes (manifests, configs);
  // RESOURCE_EXHAUSTED when larger.
  virtual absl::StatusOr<std::string> ReadBlob(absl::string_view digest,
                                               int64_t max_size) const = 0;
  // Stores bytes in one go (verified like a writer's).
  virtual absl::Status WriteBlob(absl::string_view digest,
                                 absl::string_view data) = 0;
  // A writer for `digest` of `size` bytes (-1 if unknown). Waits while
  // another writer of this store holds the same digest. ALREADY_EXISTS when
  // the blob is stored (perhaps by the writer waited for): the caller has
  // it. A Write past `size` fails with DATA_LOSS and removes the ingest file.
  virtual absl::StatusOr<std::unique_ptr<BlobWriter>> Writer(
      absl::string_view digest, int64_t size) = 0;
  // Deletes a stored blob; an unknown one is OK.
  virtual absl::Status Delete(absl::string_view digest) = 0;
  // Every stored blob's digest.
  virtual absl::StatusOr<std::vector<std::string>> List() const = 0;
  // The path of a stored blob (for tools and tests).
  virtual std::string BlobPath(absl::string_view digest) const = 0;
  // The path of the ingest file of `digest` (for tests).
  virtual std::string IngestPath(absl::string_view digest) const = 0;

  // Removes ingest files no writer holds (in this process or, by flock,
  // another), not modified for `min_age` and not of a digest in `keep`;
  // returns the bytes freed.
  virtual int64_t CleanIngest(absl::Duration min_age,
                              const std::set<std::string>& keep = {}) = 0;
};

}  // namespace berth::images

#endif  // SERVICES_IMAGES_STORE_CONTENT_STORE_H_
