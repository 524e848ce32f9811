#include "services/images/unpack/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/beneath.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "services/common/remove_tree.h"

namespace berth::images {
namespace {

using base::UniqueFd;

// How the stream is read, and why.
//
// The diff_id is the SHA-256 of the uncompressed tar stream, which no tar
// reader hands out (it gives headers and entries' contents), and reading the
// blob twice (once to hash, once to unpack) would decompress it twice. So
// the blob is decompressed once, by a libarchive reader with only the gzip
// and zstd filters (and none) and the "raw" format, whose output is the
// uncompressed stream: it is hashed as it comes and handed, in chunks, to a
// second libarchive reader that knows only tar (ustar, pax, GNU; and the
// empty stream) and no filter, through its read callback: no pipe, one copy.
// The first reader runs on a thread of its own, so that decompressing and
// hashing overlap with creating files, as `tar -xzf` overlaps its gzip
// process with itself (measured: a 60 MB gzip layer of 16,000 files, about
// half of the time is inflate). After the tar's end-of-archive blocks the
// rest of the stream is still read and hashed (it is part of the diff_id, and
// a stream cut short there is still a truncated one).
constexpr size_t kChunkSize = size_t{1} << 20;
constexpr int kChunks = 4;
constexpr size_t kCompressedReadSize = size_t{1} << 20;
constexpr int64_t kProgressEvery = int64_t{4} << 20;
constexpr int kMaxWarnings = 10;  // libarchive's, logged a layer

// Decompresses and hashes the blob on its own thread (see above).
class Decompressor {
 public:
  explicit Decompressor(int blob_fd) : blob_fd_(blob_fd) {
    for (int i = 0; i < kChunks; ++i) {
      storage_[i] = std::make_unique<char[]>(kChunkSize);
      free_.push_back(i);
    }
  }
  ~Decompressor() {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

  // The next chunk of the uncompressed stream, valid until the next call
  // (which gives it back); empty at the end; DATA_LOSS (or the read's
  // error) when the stream is corrupt or cut short.
  absl::StatusOr<absl::string_view> Next() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (held_ >= 0) {
      free_.push_back(held_);
      held_ = -1;
    }
    mu_.Await(absl::Condition(this, &Decompressor::CanTake));
    if (!filled_.empty()) {
      const auto [index, size] = filled_.front();
      filled_.pop_front();
      held_ = index;
      return absl::string_view(storage_[index].get(), size);
    }
    if (!status_.ok()) return status_;
    return absl::string_view();
  }

  // Reads the stream to its end and returns "sha256:<hex>" of all of it.
  absl::StatusOr<std::string> Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      absl::StatusOr<absl::string_view> chunk = Next();
      if (!chunk.ok()) return chunk.status();
      if (chunk->empty()) break;
    }
    absl::MutexLock lock(&mu_);
    return diff_id_;
  }

  // The stream's error, if it has failed (OK otherwise).
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return status_;
  }

  int64_t compressed_read() const {
    return compressed_read_.load(std::memory_order_relaxed);
  }

 private:
  bool CanTake() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !filled_.empty() || done_;
  }
  bool CanFill() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !free_.empty() || cancelled_;
  }

  static la_ssize_t ReadCompressed(struct archive* a, void* self,
                                   const void** buffer) {
    auto* d = static_cast<Decompressor*>(self);
    ssize_t n;
    do {
      n = read(d->blob_fd_, d->compressed_.get(), kCompressedReadSize);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      archive_set_error(a, errno, "reading the layer blob: %s",
                        strerror(errno));
      return ARCHIVE_FATAL;
    }
    d->compressed_read_.fetch_add(n, std::memory_order_relaxed);
    *buffer = d->compressed_.get();
    return n;
  }

  // The thread: decompresses into free chunks until the end, an error or
  // cancellation. A chunk is handed over when full, or partly filled when
  // the stream ends or fails (so that the tar reader reaches the entry it
  // failed in before it sees the error).
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    compressed_ = std::make_unique<char[]>(kCompressedReadSize);
    Sha256 hash;
    absl::Status status;
    struct archive* a = archive_read_new();
    archive_read_support_filter_gzip(a);
    // ARCHIVE_WARN would mean an external zstd program: Debian's libarchive
    // links libzstd, so it is not.
    if (archive_read_support_filter_zstd(a) != ARCHIVE_OK) {
      LOG_FIRST_N(WARNING, 1) << "libarchive reads zstd through a program: "
                              << archive_error_string(a);
    }
    archive_read_support_format_raw(a);
    archive_read_support_format_empty(a);  // a blob of no bytes
    struct archive_entry* entry;
    int r = archive_read_open(a, this, nullptr, &ReadCompressed, nullptr);
    if (r == ARCHIVE_OK) r = archive_read_next_header(a, &entry);
    if (r != ARCHIVE_OK && r != ARCHIVE_EOF) {
      status = absl::DataLossError(archive_error_string(a));
    }
    int index = -1;   // the chunk being filled
    size_t fill = 0;  // its bytes
    bool cancelled = false;
    while (status.ok() && r == ARCHIVE_OK && !cancelled) {
      const void* block;
      size_t size;
      la_int64_t offset;
      const int got = archive_read_data_block(a, &block, &size, &offset);
      if (got == ARCHIVE_EOF) break;
      if (got < ARCHIVE_WARN) {
        status = absl::DataLossError(archive_error_string(a));
        break;
      }
      hash.Update(block, size);
      const char* data = static_cast<const char*>(block);
      while (size > 0) {
        if (index < 0) {
          absl::MutexLock lock(&mu_);
          mu_.Await(absl::Condition(this, &Decompressor::CanFill));
          if (cancelled_) {
            cancelled = true;
            break;
          }
          index = free_.back();
          free_.pop_back();
        }
        const size_t n = std::min(size, kChunkSize - fill);
        memcpy(storage_[index].get() + fill, data, n);
        fill += n;
        data += n;
        size -= n;
        if (fill == kChunkSize) {
          absl::MutexLock lock(&mu_);
          filled_.emplace_back(index, fill);
          index = -1;
          fill = 0;
        }
      }
    }
    archive_read_free(a);
    absl::MutexLock lock(&mu_);
    if (index >= 0) {
      if (fill > 0) {
        filled_.emplace_back(index, fill);
      } else {
        free_.push_back(index);
      }
    }
    if (status.ok()) diff_id_ = "sha256:" + Sha256::Hex(hash.Finish());
    status_ = std::move(status);
    done_ = true;
  }

  const int blob_fd_;
  std::unique_ptr<char[]> compressed_;  // the thread's
  std::array<std::unique_ptr<char[]>, kChunks> storage_;
  std::atomic<int64_t> compressed_read_{0};
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int, size_t>> filled_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = -1;  // the chunk Next gave out
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::string diff_id_ ABSL_GUARDED_BY(mu_);
};

// The tar reader's source: the decompressor's chunks, with progress calls.
struct TarSource {
  Decompressor* decompressor;
  const std::function<void(int64_t)>* progress;
  int64_t last_progress = 0;

  static la_ssize_t Read(struct archive* a, void* self, const void** buffer) {
    auto* source = static_cast<TarSource*>(self);
    absl::StatusOr<absl::string_view> chunk = source->decompressor->Next();
    if (!chunk.ok()) {
      archive_set_error(a, EIO, "%s",
                        std::string(chunk.status().message()).c_str());
      return ARCHIVE_FATAL;
    }
    if (*source->progress) {
      const int64_t read = source->decompressor->compressed_read();
      if (read - source->last_progress >= kProgressEvery) {
        source->last_progress = read;
        (*source->progress)(read);
      }
    }
    *buffer = chunk->data();
    return static_cast<la_ssize_t>(chunk->size());
  }
};

// `name` without "./" prefixes, "." components and extra slashes; "" for
// the root. INVALID_ARGUMENT for an absolute or empty name or "..".
absl::StatusOr<std::string> NormalizeName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("an empty name");
  if (name[0] == '/') {
    return absl::InvalidArgumentError("an absolute name is refused");
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(name, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError("a \"..\" component is refused");
    }
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "/");
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

std::string Quoted(absl::string_view name) {
  return absl::StrCat("\"", absl::CHexEscape(name), "\"");
}

absl::Status Errno(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);
}

// "/proc/self/fd/<dir_fd>/<base>": for the calls that take only a path
// (lsetxattr, RemoveTree); the directory is the descriptor's, the last
// component is never followed by those calls.
std::string ProcPath(int dir_fd, const std::string& base) {
  return absl::StrCat("/proc/self/fd/", dir_fd, "/", base);
}

// Owner, mode, attributes and times of one entry, from its header.
struct Metadata {
  uid_t uid;
  gid_t gid;
  mode_t perm;
  std::array<timespec, 2> times;
};

absl::StatusOr<Metadata> ReadMetadata(struct archive_entry* entry) {
  Metadata m;
  const int64_t uid = archive_entry_uid(entry);
  const int64_t gid = archive_entry_gid(entry);
  // (uid_t)-1 would mean "unchanged" to chown.
  constexpr int64_t kMaxId = int64_t{0xfffffffe};
  if (uid < 0 || uid > kMaxId || gid < 0 || gid > kMaxId) {
    return absl::InvalidArgumentError(
        absl::StrCat("owner ", uid, ":", gid, " is out of range"));
  }
  m.uid = static_cast<uid_t>(uid);
  m.gid = static_cast<gid_t>(gid);
  m.perm = archive_entry_perm(entry) & 07777;
  timespec mtime = {0, UTIME_OMIT};
  if (archive_entry_mtime_is_set(entry)) {
    mtime = {archive_entry_mtime(entry), archive_entry_mtime_nsec(entry)};
  }
  m.times[0] = archive_entry_atime_is_set(entry)
                   ? timespec{archive_entry_atime(entry),
                              archive_entry_atime_nsec(entry)}
                   : mtime;
  m.times[1] = mtime;
  return m;
}

class Unpacker {
 public:
  Unpacker(int root_fd, const UnpackOptions& options, Decompressor* stream)
      : root_fd_(root_fd), options_(options), stream_(stream) {}

  absl::Status Run(struct archive* tar) {
    std::string last;
    for (;;) {
      struct archive_entry* entry;
      const int r = archive_read_next_header(tar, &entry);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) {
        return absl::DataLossError(absl::StrCat(
            "layer stream",
            last.empty() ? "" : absl::StrCat(" after entry ", Quoted(last)),
            ": ", StreamError(tar)));
      }
      ++entries_;
      const char* pathname = archive_entry_pathname(entry);
      if (pathname == nullptr) pathname = archive_entry_pathname_utf8(entry);
      last = pathname == nullptr ? "" : pathname;
      if (r == ARCHIVE_WARN && ++warnings_ <= kMaxWarnings) {
        LOG(WARNING) << "layer entry " << Quoted(last) << ": "
                     << archive_error_string(tar)
                     << (warnings_ == kMaxWarnings ? " (no more warnings "
                                                     "of this layer's)"
                                                   : "");
      }
      if (absl::Status s = Entry(tar, entry, last); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("layer entry ", Quoted(last),
                                                   ": ", s.message()));
      }
    }
    // Directories' times last: creating their contents changed them.
    for (const auto& [path, times] : dir_times_) {
      absl::StatusOr<UniqueFd> dir = OpenDir(path, /*create=*/false);
      absl::Status s = dir.status();
      if (s.ok() && futimens(dir->get(), times.data()) != 0) {
        s = Errno("setting its times");
      }
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("layer entry ", Quoted(path),
                                                   ": ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  int64_t unpacked_size() const { return unpacked_size_; }
  int64_t entries() const { return entries_; }

 private:
  // The decompressor's error if it failed (the tar reader's is then only
  // its echo), or the tar reader's.
  std::string StreamError(struct archive* tar) const {
    absl::Status error = stream_->error();
    if (!error.ok()) return std::string(error.message());
    const char* message = archive_error_string(tar);
    return message == nullptr ? "unreadable" : message;
  }

  absl::Status Entry(struct archive* tar, struct archive_entry* entry,
                     const std::string& raw_name) {
    absl::StatusOr<std::string> name = NormalizeName(raw_name);
    if (!name.ok()) return name.status();
    if (archive_entry_size_is_set(entry) &&
        archive_entry_size(entry) > options_.max_entry_size) {
      return absl::OutOfRangeError(absl::StrCat(
          "its size, ", archive_entry_size(entry),
          " bytes, exceeds the limit of ", options_.max_entry_size));
    }
    // The layer's root: its owner, mode and times are the caller's.
    if (name->empty()) return absl::OkStatus();
    absl::StatusOr<Metadata> metadata = ReadMetadata(entry);
    if (!metadata.ok()) return metadata.status();
    const auto [parent, base] = SplitParent(*name);
    if (absl::StartsWith(base, ".wh.")) {
      return Whiteout(parent, base, *metadata);
    }
    if (const char* target = archive_entry_hardlink(entry)) {
      return HardLink(*name, target);
    }
    absl::StatusOr<int> dir = Parent(parent);
    if (!dir.ok()) return dir.status();
    switch (archive_entry_filetype(entry)) {
      case AE_IFREG:
        return RegularFile(tar, entry, *dir, *name, base, *metadata);
      case AE_IFDIR:
        return Directory(entry, *dir, *name, base, *metadata);
      case AE_IFLNK:
        return Symlink(entry, *dir, *name, base, *metadata);
      case AE_IFCHR:
      case AE_IFBLK:
      case AE_IFIFO:
        return Node(entry, *dir, *name, base, *metadata);
      default:
        return absl::InvalidArgumentError(absl::StrFormat(
            "unsupported file type 0%o", archive_entry_filetype(entry)));
    }
  }

  // Opens the directory `path` of the layer ("" is the root), following no
  // link and never leaving it; with `create`, makes what is missing (0755,
  // root, as tar does). INVALID_ARGUMENT names the component that is a
  // symbolic link or not a directory; NOT_FOUND the one missing.
  absl::StatusOr<UniqueFd> OpenDir(const std::string& path, bool create) {
    if (path.empty()) {
      UniqueFd fd(openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!fd.valid()) return Errno("opening the layer's directory");
      return fd;
    }
    absl::StatusOr<UniqueFd> fd =
        base::OpenBeneath(root_fd_, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd.ok()) return fd;
    // Missing parts, or an error to name precisely: one component at a
    // time, relative to the one before, following none.
    UniqueFd current;
    int at = root_fd_;
    std::string so_far;
    for (absl::string_view part : absl::StrSplit(path, '/')) {
      const std::string component(part);
      so_far = so_far.empty() ? component : absl::StrCat(so_far, "/", part);
      if (create && mkdirat(at, component.c_str(), 0755) != 0 &&
          errno != EEXIST) {
        return Errno(absl::StrCat("making directory ", Quoted(so_far)));
      }
      UniqueFd next(openat(at, component.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next.valid()) {
        const int error = errno;
        struct stat st;
        if (error == ENOENT) {
          return absl::NotFoundError(
              absl::StrCat("directory ", Quoted(so_far), " is missing"));
        }
        if ((error == ELOOP || error == ENOTDIR) &&
            fstatat(at, component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              Quoted(so_far), S_ISLNK(st.st_mode)
                                  ? " is a symbolic link: refused as a parent"
                                  : " is not a directory"));
        }
        return absl::ErrnoToStatus(
            error, absl::StrCat("opening directory ", Quoted(so_far)));
      }
      current = std::move(next);
      at = current.get();
    }
    return current;
  }

  // The directory `parent` (made if missing), kept open for the entries
  // after (a tar lists a directory's entries together).
  absl::StatusOr<int> Parent(const std::string& parent) {
    if (parent.empty()) return root_fd_;
    if (cached_fd_.valid() && parent == cached_path_) return cached_fd_.get();
    absl::StatusOr<UniqueFd> fd = OpenDir(parent, /*create=*/true);
    if (!fd.ok()) return fd.status();
    cached_path_ = parent;
    cached_fd_ = *std::move(fd);
    return cached_fd_.get();
  }

  // Makes room for the entry `path` (`base` in `dir_fd`): removes what an
  // earlier entry made there (a directory with everything in it), except a
  // directory when `keep_dir`. Returns whether a directory was kept.
  absl::StatusOr<bool> Clear(int dir_fd, const std::string& path,
                             const std::string& base, bool keep_dir) {
    struct stat st;
    if (fstatat(dir_fd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return false;
      return Errno("replacing the earlier entry");
    }
    if (!S_ISDIR(st.st_mode)) {
      if (unlinkat(dir_fd, base.c_str(), 0) != 0) {
        return Errno("replacing the earlier entry");
      }
      return false;
    }
    if (keep_dir) return true;
    if (absl::Status s = RemoveTree(ProcPath(dir_fd, base)); !s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("replacing the earlier directory: ", s.message()));
    }
    // Forget what was below it.
    const std::string prefix = path + "/";
    if (cached_path_ == path || absl::StartsWith(cached_path_, prefix)) {
      cached_fd_.reset();
      cached_path_.clear();
    }
    for (auto it = dir_times_.lower_bound(path);
         it != dir_times_.end() &&
         (it->first == path || absl::StartsWith(it->first, prefix));) {
      it = dir_times_.erase(it);
    }
    return false;
  }

  // Runs `create` (a *at call that fails with EEXIST when the name is
  // taken), replacing an earlier entry of the same name once.
  template <typename Create>
  absl::Status CreateReplacing(int dir_fd, const std::string& path,
                               const std::string& base, absl::string_view what,
                               Create create) {
    if (create() == 0) return absl::OkStatus();
    if (errno == EEXIST) {
      absl::StatusOr<bool> kept = Clear(dir_fd, path, base, false);
      if (!kept.ok()) return kept.status();
      if (create() == 0) return absl::OkStatus();
    }
    return Errno(what);
  }

  // Owner, then mode (chown clears setuid), then attributes (chown clears
  // security.capability) of an open file or directory.
  absl::Status SetOwnerModeXattrs(int fd, struct archive_entry* entry,
                                  const Metadata& m) {
    if (fchown(fd, m.uid, m.gid) != 0) return Errno("setting its owner");
    if (fchmod(fd, m.perm) != 0) return Errno("setting its mode");
    return SetXattrs(entry, fd, "");
  }

  // The entry's extended attributes, on `fd` or (fd < 0) on `path`, not
  // following it.
  absl::Status SetXattrs(struct archive_entry* entry, int fd,
                         const std::string& path) {
    if (archive_entry_xattr_reset(entry) == 0) return absl::OkStatus();
    const char* name;
    const void* value;
    size_t size;
    while (archive_entry_xattr_next(entry, &name, &value, &size) ==
           ARCHIVE_OK) {
      if (name == nullptr) continue;
      if (absl::StartsWith(name, "trusted.overlay.") ||
          absl::StartsWith(name, "user.overlay.")) {
        WarnXattr(name, "overlayfs' own attributes are not taken from layers");
        continue;
      }
      const int r = fd >= 0 ? fsetxattr(fd, name, value, size, 0)
                            : lsetxattr(path.c_str(), name, value, size, 0);
      if (r == 0) continue;
      if (errno == ENOTSUP || errno == EPERM) {
        WarnXattr(name, strerror(errno));
        continue;
      }
      return Errno(absl::StrCat("setting extended attribute ", name));
    }
    return absl::OkStatus();
  }

  void WarnXattr(const std::string& name, absl::string_view why) {
    if (warned_xattrs_.insert(name).second) {
      LOG(WARNING) << "layer: extended attribute " << name
                   << " skipped (once a layer): " << why;
    }
  }

  absl::Status RegularFile(struct archive* tar, struct archive_entry* entry,
                           int dir_fd, const std::string& path,
                           const std::string& base, const Metadata& m) {
    UniqueFd fd;
    if (absl::Status s = CreateReplacing(
            dir_fd, path, base, "creating it",
            [&] {
              fd.reset(openat(
                  dir_fd, base.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
              return fd.valid() ? 0 : -1;
            });
        !s.ok()) {
      return s;
    }
    // Blocks at offsets: a sparse file's holes are left unwritten.
    int64_t end = 0;
    for (;;) {
      const void* data;
      size_t size;
      la_int64_t offset;
      const int r = archive_read_data_block(tar, &data, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) {
        return absl::DataLossError(
            absl::StrCat("reading its data: ", StreamError(tar)));
      }
      if (unpacked_size_ + static_cast<int64_t>(size) >
          options_.max_total_size) {
        return absl::OutOfRangeError(
            absl::StrCat("the layer's contents exceed the limit of ",
                         options_.max_total_size, " bytes"));
      }
      const char* p = static_cast<const char*>(data);
      size_t left = size;
      while (left > 0) {
        const ssize_t n = pwrite(fd.get(), p, left, offset);
        if (n < 0) {
          if (errno == EINTR) continue;
          return Errno("writing it");
        }
        p += n;
        left -= n;
        offset += n;
      }
      unpacked_size_ += size;
      end = std::max<int64_t>(end, offset);
    }
    const int64_t size = archive_entry_size(entry);
    if (size > end && ftruncate(fd.get(), size) != 0) {
      return Errno("setting its size");
    }
    if (absl::Status s = SetOwnerModeXattrs(fd.get(), entry, m); !s.ok()) {
      return s;
    }
    if (futimens(fd.get(), m.times.data()) != 0) {
      return Errno("setting its times");
    }
    if (close(fd.release()) != 0) return Errno("writing it");
    return absl::OkStatus();
  }

  absl::Status Directory(struct archive_entry* entry, int dir_fd,
                         const std::string& path, const std::string& base,
                         const Metadata& m) {
    if (mkdirat(dir_fd, base.c_str(), 0700) != 0) {
      if (errno != EEXIST) return Errno("making it");
      absl::StatusOr<bool> kept = Clear(dir_fd, path, base, true);
      if (!kept.ok()) return kept.status();
      if (!*kept && mkdirat(dir_fd, base.c_str(), 0700) != 0) {
        return Errno("making it");
      }
    }
    const UniqueFd fd(openat(dir_fd, base.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return Errno("opening it");
    if (absl::Status s = SetOwnerModeXattrs(fd.get(), entry, m); !s.ok()) {
      return s;
    }
    dir_times_[path] = m.times;
    return absl::OkStatus();
  }

  // Owner, mode (unless a symbolic link), attributes and times of `base` in
  // `dir_fd`, which is not opened (a device node or a FIFO must not be).
  absl::Status SetMetadataAt(struct archive_entry* entry, int dir_fd,
                             const std::string& base, const Metadata& m,
                             bool symlink) {
    if (fchownat(dir_fd, base.c_str(), m.uid, m.gid, AT_SYMLINK_NOFOLLOW) !=
        0) {
      return Errno("setting its owner");
    }
    if (!symlink &&
        fchmodat(dir_fd, base.c_str(), m.perm, AT_SYMLINK_NOFOLLOW) != 0) {
      return Errno("setting its mode");
    }
    if (entry != nullptr) {
      if (absl::Status s = SetXattrs(entry, -1, ProcPath(dir_fd, base));
          !s.ok()) {
        return s;
      }
    }
    if (utimensat(dir_fd, base.c_str(), m.times.data(), AT_SYMLINK_NOFOLLOW) !=
        0) {
      return Errno("setting its times");
    }
    return absl::OkStatus();
  }

  absl::Status Symlink(struct archive_entry* entry, int dir_fd,
                       const std::string& path, const std::string& base,
                       const Metadata& m) {
    const char* target = archive_entry_symlink(entry);
    if (target == nullptr) target = archive_entry_symlink_utf8(entry);
    if (target == nullptr || *target == '\0') {
      return absl::InvalidArgumentError("a symbolic link without a target");
    }
    if (absl::Status s = CreateReplacing(
            dir_fd, path, base, "making the symbolic link",
            [&] { return symlinkat(target, dir_fd, base.c_str()); });
        !s.ok()) {
      return s;
    }
    return SetMetadataAt(entry, dir_fd, base, m, /*symlink=*/true);
  }

  absl::Status Node(struct archive_entry* entry, int dir_fd,
                    const std::string& path, const std::string& base,
                    const Metadata& m) {
    const mode_t type = archive_entry_filetype(entry);
    const dev_t device = type == AE_IFIFO
                             ? 0
                             : makedev(archive_entry_rdevmajor(entry),
                                       archive_entry_rdevminor(entry));
    if (absl::Status s = CreateReplacing(dir_fd, path, base, "making the node",
                                         [&] {
                                           return mknodat(
                                               dir_fd, base.c_str(),
                                               type | (m.perm & 0777), device);
                                         });
        !s.ok()) {
      return s;
    }
    return SetMetadataAt(entry, dir_fd, base, m, /*symlink=*/false);
  }

  absl::Status HardLink(const std::string& path, const char* raw_target) {
    absl::StatusOr<std::string> target = NormalizeName(raw_target);
    if (!target.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("hard link target ", Quoted(raw_target), ": ",
                       target.status().message()));
    }
    if (*target == path) return absl::OkStatus();  // itself: nothing to do
    // (Named strings, not a structured binding: the lambda below takes
    // them.)
    std::string target_parent, target_base;
    std::tie(target_parent, target_base) = SplitParent(*target);
    const std::string missing =
        absl::StrCat("hard link target ", Quoted(raw_target),
                     " is not an entry unpacked before it in this layer");
    if (target->empty()) return absl::InvalidArgumentError(missing);
    absl::StatusOr<UniqueFd> target_dir =
        OpenDir(target_parent, /*create=*/false);
    if (absl::IsNotFound(target_dir.status())) {
      return absl::InvalidArgumentError(missing);
    }
    if (!target_dir.ok()) {
      return absl::Status(target_dir.status().code(),
                          absl::StrCat("hard link target ", Quoted(raw_target),
                                       ": ", target_dir.status().message()));
    }
    struct stat st;
    if (fstatat(target_dir->get(), target_base.c_str(), &st,
                AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return absl::InvalidArgumentError(missing);
      return Errno(absl::StrCat("hard link target ", Quoted(raw_target)));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hard link target ", Quoted(raw_target), " is a directory"));
    }
    std::string parent, base;
    std::tie(parent, base) = SplitParent(path);
    absl::StatusOr<int> dir = Parent(parent);
    if (!dir.ok()) return dir.status();
    // No AT_SYMLINK_FOLLOW: a link to a symbolic link links the link.
    return CreateReplacing(*dir, path, base, "making the hard link", [&] {
      return linkat(target_dir->get(), target_base.c_str(), *dir, base.c_str(),
                    0);
    });
  }

  absl::Status Whiteout(const std::string& parent, const std::string& base,
                        const Metadata& m) {
    absl::StatusOr<int> dir = Parent(parent);
    if (!dir.ok()) return dir.status();
    if (base == ".wh..wh..opq") {
      if (fsetxattr(*dir, "trusted.overlay.opaque", "y", 1, 0) != 0) {
        return Errno("making the directory opaque (trusted.overlay.opaque)");
      }
      return absl::OkStatus();
    }
    if (absl::StartsWith(base, ".wh..wh.")) {
      VLOG(1) << "layer: skipping aufs metadata " << Quoted(base);
      return absl::OkStatus();
    }
    const std::string hidden = base.substr(4);
    if (hidden == "." || hidden == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("a whiteout of ", Quoted(hidden), " is refused"));
    }
    const std::string path = parent.empty() ? hidden : parent + "/" + hidden;
    if (absl::Status s = CreateReplacing(
            *dir, path, hidden, "making the whiteout",
            [&] {
              return mknodat(*dir, hidden.c_str(), S_IFCHR, makedev(0, 0));
            });
        !s.ok()) {
      return s;
    }
    Metadata whiteout = m;
    whiteout.perm = 0;
    return SetMetadataAt(nullptr, *dir, hidden, whiteout, /*symlink=*/false);
  }

  const int root_fd_;
  const UnpackOptions& options_;
  Decompressor* const stream_;
  std::string cached_path_;
  UniqueFd cached_fd_;
  std::map<std::string, std::array<timespec, 2>> dir_times_;
  std::set<std::string> warned_xattrs_;
  int warnings_ = 0;
  int64_t unpacked_size_ = 0;
  int64_t entries_ = 0;
};

absl::Status CheckEmpty(int dir_fd, const std::string& dir) {
  const int listing_fd =
      openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* listing = listing_fd < 0 ? nullptr : fdopendir(listing_fd);
  if (listing == nullptr) {
    if (listing_fd >= 0) close(listing_fd);
    return Errno(absl::StrCat("listing ", dir));
  }
  bool empty = true;
  while (const dirent* entry = readdir(listing)) {
    if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  closedir(listing);
  if (!empty) {
    return absl::FailedPreconditionError(
        absl::StrCat("unpacking a layer into ", dir, ": it is not empty"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UnpackResult> UnpackLayer(int blob_fd,
                                         const std::string& dest_dir,
                                         const UnpackOptions& options) {
  const UniqueFd root(
      open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) {
    return Errno(absl::StrCat("unpacking a layer into ", dest_dir));
  }
  if (absl::Status s = CheckEmpty(root.get(), dest_dir); !s.ok()) return s;

  // Names are bytes: with the caller's locale ("C", in a service) libarchive
  // would warn of every UTF-8 name in a pax header as unconvertible. This
  // thread reads as C.UTF-8 for the unpack's time (uselocale is the
  // thread's alone).
  const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr);
  const locale_t previous = utf8 == nullptr ? nullptr : uselocale(utf8);
  const auto restore = absl::MakeCleanup([&] {
    if (utf8 == nullptr) return;
    uselocale(previous);
    freelocale(utf8);
  });

  Decompressor decompressor(blob_fd);
  decompressor.Start();
  TarSource source{&decompressor, &options.progress};
  struct archive* tar = archive_read_new();
  archive_read_support_format_tar(tar);
  archive_read_support_format_empty(tar);
  Unpacker unpacker(root.get(), options, &decompressor);
  absl::Status status;
  if (archive_read_open(tar, &source, nullptr, &TarSource::Read, nullptr) !=
      ARCHIVE_OK) {
    absl::Status error = decompressor.error();
    status = absl::DataLossError(absl::StrCat(
        "layer stream: ",
        error.ok() ? archive_error_string(tar) : std::string(error.message())));
  } else {
    status = unpacker.Run(tar);
  }
  archive_read_free(tar);
  if (!status.ok()) return status;
  absl::StatusOr<std::string> diff_id = decompressor.Finish();
  if (!diff_id.ok()) {
    return absl::DataLossError(absl::StrCat(
        "layer stream after its last entry: ", diff_id.status().message()));
  }
  if (options.progress) options.progress(decompressor.compressed_read());
  UnpackResult result;
  result.diff_id = *std::move(diff_id);
  result.unpacked_size = unpacker.unpacked_size();
  result.entries = unpacker.entries();
  return result;
}

}  // namespace berth::images
