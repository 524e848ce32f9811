#include "services/images/store/content_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/io.h"
#include "base/sha256.h"
#include "glog/logging.h"
#include "services/images/oci/digest.h"
#include "services/images/store/fs_util.h"

namespace berth::images {
namespace {

using store_internal::FsyncDir;
using store_internal::IsHex64;
using store_internal::ListDir;
using store_internal::MakeDirs;

// Ingest files older than this are dropped at Open: a pull interrupted for
// longer is not worth resuming.
constexpr absl::Duration kIngestMaxAgeAtOpen = absl::Hours(24);

class ContentStoreImpl;

class BlobWriterImpl : public BlobWriter {
 public:
  BlobWriterImpl(ContentStoreImpl* store, std::string digest, int64_t size,
                 base::UniqueFd fd, Sha256 hash, int64_t offset)
      : store_(store),
        digest_(std::move(digest)),
        size_(size),
        fd_(std::move(fd)),
        hash_(std::move(hash)),
        offset_(offset),
        written_(offset) {}
  ~BlobWriterImpl() override { Abort(/*remove=*/false); }

  int64_t offset() const override { return offset_; }
  absl::Status Write(absl::string_view data) override;
  absl::Status Truncate() override;
  absl::Status Commit() override;
  void Abort(bool remove) override;

 private:
  absl::Status Fail(absl::Status status);

  ContentStoreImpl* store_;
  const std::string digest_;
  const int64_t size_;
  base::UniqueFd fd_;
  Sha256 hash_;
  const int64_t offset_;
  int64_t written_;
  bool done_ = false;
};

class ContentStoreImpl : public ContentStore {
 public:
  explicit ContentStoreImpl(std::string root)
      : root_(std::move(root)),
        blobs_dir_(absl::StrCat(root_, "/blobs/sha256")),
        ingest_dir_(absl::StrCat(root_, "/ingest")) {}

  absl::Status Init();

  bool Has(absl::string_view digest) const override {
    if (!ValidateDigest(digest).ok()) return false;
    struct stat st;
    return stat(BlobPath(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }

  absl::StatusOr<int64_t> Size(absl::string_view digest) const override {
    absl::Status valid = ValidateDigest(digest);
    if (!valid.ok()) return valid;
    struct stat st;
    if (stat(BlobPath(digest).c_str(), &st) != 0) {
      return NotFound(digest, errno);
    }
    return static_cast<int64_t>(st.st_size);
  }

  absl::StatusOr<base::UniqueFd> OpenBlob(
      absl::string_view digest) const override {
    absl::Status valid = ValidateDigest(digest);
    if (!valid.ok()) return valid;
    base::UniqueFd fd(
        open(BlobPath(digest).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return NotFound(digest, errno);
    return fd;
  }

  absl::StatusOr<std::string> ReadBlob(absl::string_view digest,
                                       int64_t max_size) const override {
    absl::StatusOr<base::UniqueFd> fd = OpenBlob(digest);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (fstat(fd->get(), &st) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("blob ", digest));
    }
    if (st.st_size > max_size) {
      return absl::ResourceExhaustedError(
          absl::StrCat("blob ", digest, " is ", st.st_size,
                       " bytes, more than the ", max_size, " allowed"));
    }
    return base::ReadAll(fd->get(), absl::StrCat("blob ", digest),
                         static_cast<size_t>(max_size));
  }

  absl::Status WriteBlob(absl::string_view digest,
                         absl::string_view data) override {
    absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
        Writer(digest, static_cast<int64_t>(data.size()));
    if (absl::IsAlreadyExists(writer.status())) return absl::OkStatus();
    if (!writer.ok()) return writer.status();
    absl::Status status = (*writer)->Truncate();
    if (status.ok()) status = (*writer)->Write(data);
    if (status.ok()) status = (*writer)->Commit();
    return status;
  }

  absl::StatusOr<std::unique_ptr<BlobWriter>> Writer(absl::string_view digest,
                                                     int64_t size) override;

  absl::Status Delete(absl::string_view digest) override {
    absl::Status valid = ValidateDigest(digest);
    if (!valid.ok()) return valid;
    if (unlink(BlobPath(digest).c_str()) != 0) {
      if (errno == ENOENT) return absl::OkStatus();
      return absl::ErrnoToStatus(errno, absl::StrCat("deleting blob ", digest));
    }
    return FsyncDir(blobs_dir_);
  }

  absl::StatusOr<std::vector<std::string>> List() const override {
    absl::StatusOr<std::vector<std::string>> names = ListDir(blobs_dir_);
    if (!names.ok()) return names.status();
    std::vector<std::string> digests;
    for (const std::string& name : *names) {
      if (IsHex64(name)) digests.push_back(DigestFromHex(name));
    }
    return digests;
  }

  std::string BlobPath(absl::string_view digest) const override {
    return absl::StrCat(blobs_dir_, "/", DigestHex(digest));
  }
  std::string IngestPath(absl::string_view digest) const override {
    return absl::StrCat(ingest_dir_, "/", DigestHex(digest));
  }

  int64_t CleanIngest(absl::Duration min_age,
                      const std::set<std::string>& keep) override;

  // Called by a writer when it is done (committed or aborted).
  void Release(const std::string& digest) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_.erase(digest);
  }
  const std::string& blobs_dir() const { return blobs_dir_; }

 private:
  static absl::Status NotFound(absl::string_view digest, int error) {
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat("blob ", digest, " not found"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("blob ", digest));
  }

  const std::string root_;
  const std::string blobs_dir_;
  const std::string ingest_dir_;
  absl::Mutex mu_;
  // Digests a writer of this store holds.
  std::set<std::string> writing_ ABSL_GUARDED_BY(mu_);
};

absl::Status ContentStoreImpl::Init() {
  absl::Status status = MakeDirs(root_);
  if (status.ok()) status = MakeDirs(blobs_dir_);
  if (status.ok()) status = MakeDirs(ingest_dir_);
  if (!status.ok()) return status;
  // Anything in ingest/ that is not a file named by a digest was not made by
  // a writer; files a day old are not worth resuming.
  absl::StatusOr<std::vector<std::string>> names = ListDir(ingest_dir_);
  if (!names.ok()) return names.status();
  const absl::Time now = absl::Now();
  for (const std::string& name : *names) {
    const std::string path = absl::StrCat(ingest_dir_, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (IsHex64(name) && S_ISREG(st.st_mode) &&
        now - absl::FromTimeT(st.st_mtime) < kIngestMaxAgeAtOpen) {
      continue;
    }
    LOG(INFO) << "removing stale ingest entry " << path;
    if (S_ISDIR(st.st_mode) ? rmdir(path.c_str()) : unlink(path.c_str())) {
      LOG(WARNING) << "cannot remove " << path << ": " << strerror(errno);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BlobWriter>> ContentStoreImpl::Writer(
    absl::string_view digest_view, int64_t size) {
  absl::Status valid = ValidateDigest(digest_view);
  if (!valid.ok()) return valid;
  const std::string digest(digest_view);
  {
    absl::MutexLock lock(&mu_);
    struct Free {
      const std::set<std::string>* writing;
      const std::string* digest;
      bool operator()() const { return writing->count(*digest) == 0; }
    } free{&writing_, &digest};
    mu_.Await(absl::Condition(&free, &Free::operator()));
    if (Has(digest)) {
      return absl::AlreadyExistsError(
          absl::StrCat("blob ", digest, " is already stored"));
    }
    writing_.insert(digest);
  }
  auto release = [&](absl::Status status) -> absl::Status {
    Release(digest);
    return status;
  };
  const std::string path = IngestPath(digest);
  base::UniqueFd fd(
      open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    return release(
        absl::ErrnoToStatus(errno, absl::StrCat("opening ingest file ", path)));
  }
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return release(absl::AbortedError(absl::StrCat(
        "blob ", digest, " is being written by another process (", path, ")")));
  }
  // Resume: the bytes already there are hashed again, so the digest checked
  // at Commit covers the whole blob.
  Sha256 hash;
  int64_t offset = 0;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return release(
          absl::ErrnoToStatus(errno, absl::StrCat("reading ", path)));
    }
    if (n == 0) break;
    hash.Update(buffer, static_cast<size_t>(n));
    offset += n;
  }
  if (size >= 0 && offset > size) {
    // More than the blob's size: not a prefix of it. Start again.
    if (ftruncate(fd.get(), 0) != 0 || lseek(fd.get(), 0, SEEK_SET) != 0) {
      return release(
          absl::ErrnoToStatus(errno, absl::StrCat("truncating ", path)));
    }
    hash.Finish();
    offset = 0;
  }
  return std::unique_ptr<BlobWriter>(std::make_unique<BlobWriterImpl>(
      this, digest, size, std::move(fd), std::move(hash), offset));
}

int64_t ContentStoreImpl::CleanIngest(absl::Duration min_age,
                                      const std::set<std::string>& keep) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<std::string>> names = ListDir(ingest_dir_);
  if (!names.ok()) {
    LOG(WARNING) << names.status();
    return 0;
  }
  const absl::Time now = absl::Now();
  int64_t freed = 0;
  for (const std::string& name : *names) {
    const std::string digest = DigestFromHex(name);
    if (writing_.count(digest) > 0 || keep.count(digest) > 0) continue;
    const std::string path = absl::StrCat(ingest_dir_, "/", name);
    base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) continue;
    struct stat st;
    if (fstat(fd.get(), &st) != 0 ||
        now - absl::FromTimeT(st.st_mtime) < min_age) {
      continue;
    }
    // Another process writing it holds its lock.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (unlink(path.c_str()) == 0) freed += st.st_size;
  }
  return freed;
}

absl::Status BlobWriterImpl::Fail(absl::Status status) {
  Abort(/*remove=*/true);
  return status;
}

absl::Status BlobWriterImpl::Write(absl::string_view data) {
  if (done_) {
    return absl::FailedPreconditionError(
        absl::StrCat("writer of blob ", digest_, " is closed"));
  }
  if (size_ >= 0 && written_ + static_cast<int64_t>(data.size()) > size_) {
    return Fail(absl::DataLossError(absl::StrCat(
        "blob ", digest_, ": more than the expected ", size_, " bytes")));
  }
  absl::Status status = base::WriteAll(
      fd_.get(), data, absl::StrCat("ingest file of blob ", digest_));
  if (!status.ok()) return status;
  hash_.Update(data);
  written_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::Status BlobWriterImpl::Truncate() {
  if (done_) {
    return absl::FailedPreconditionError(
        absl::StrCat("writer of blob ", digest_, " is closed"));
  }
  if (ftruncate(fd_.get(), 0) != 0 || lseek(fd_.get(), 0, SEEK_SET) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("truncating ingest file of blob ", digest_));
  }
  hash_.Finish();
  written_ = 0;
  return absl::OkStatus();
}

absl::Status BlobWriterImpl::Commit() {
  if (done_) {
    return absl::FailedPreconditionError(
        absl::StrCat("writer of blob ", digest_, " is closed"));
  }
  if (size_ >= 0 && written_ != size_) {
    return Fail(
        absl::DataLossError(absl::StrCat("blob ", digest_, ": expected size ",
                                         size_, ", got ", written_, " bytes")));
  }
  const std::string actual = DigestFromHex(Sha256::Hex(hash_.Finish()));
  if (actual != digest_) {
    return Fail(absl::DataLossError(
        absl::StrCat("blob digest mismatch: expected ", digest_, ", got ",
                     actual, " (", written_, " bytes)")));
  }
  const std::string ingest = store_->IngestPath(digest_);
  const std::string blob = store_->BlobPath(digest_);
  if (fchmod(fd_.get(), 0444) != 0 || fsync(fd_.get()) != 0) {
    return Fail(absl::ErrnoToStatus(
        errno, absl::StrCat("syncing ingest file of blob ", digest_)));
  }
  if (rename(ingest.c_str(), blob.c_str()) != 0) {
    return Fail(absl::ErrnoToStatus(
        errno, absl::StrCat("storing blob ", digest_, " at ", blob)));
  }
  absl::Status synced = FsyncDir(store_->blobs_dir());
  fd_.reset();
  done_ = true;
  store_->Release(digest_);
  return synced;
}

void BlobWriterImpl::Abort(bool remove) {
  if (done_) return;
  done_ = true;
  if (remove) unlink(store_->IngestPath(digest_).c_str());
  fd_.reset();
  store_->Release(digest_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ContentStore>> ContentStore::Open(
    const std::string& root) {
  auto store = std::make_unique<ContentStoreImpl>(root);
  absl::Status status = store->Init();
  if (!status.ok()) return status;
  return std::unique_ptr<ContentStore>(std::move(store));
}

}  // namespace berth::images
