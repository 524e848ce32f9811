#include "services/images/importer/importer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "berth/image/v1/image.pb.h"
#include "nlohmann/json.hpp"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/store/content_store.h"

namespace berth::images {
namespace {

using Json = nlohmann::json;

constexpr size_t kChunk = 1 << 20;
// The small documents of an archive kept in memory, in all.
constexpr int64_t kMaxSmallFilesTotal = 64 << 20;
// The oci-layout file.
constexpr int64_t kMaxLayoutFileSize = 64 << 10;
// Entries of an archive (docker save writes four or five per layer), and
// the length of an entry's name.
constexpr size_t kMaxEntries = 100000;
constexpr size_t kMaxNameLength = 4096;
// Links followed from one name, and indexes nested in one another.
constexpr int kMaxLinkHops = 16;
constexpr int kMaxIndexDepth = 4;

constexpr char kIndexJson[] = "index.json";
constexpr char kOciLayoutFile[] = "oci-layout";
constexpr char kDockerManifestJson[] = "manifest.json";
constexpr absl::string_view kBlobsPrefix = "blobs/";
constexpr absl::string_view kSha256BlobsPrefix = "blobs/sha256/";
constexpr char kRefNameAnnotation[] = "org.opencontainers.image.ref.name";
constexpr char kContainerdNameAnnotation[] = "io.containerd.image.name";

std::string Quote(absl::string_view text) {
  constexpr size_t kLimit = 200;
  if (text.size() > kLimit) {
    return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kLimit)),
                        "...\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// `status` with `prefix` before its message, its code kept.
absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

absl::Status EntryError(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("archive entry ", Quote(name), ": ", why));
}

// An entry's name with "./" and empty components dropped. Absolute names
// and ".." components are refused, naming the entry. "" for the root.
absl::StatusOr<std::string> CleanEntryName(absl::string_view raw) {
  if (raw.size() > kMaxNameLength) {
    return EntryError(raw, absl::StrCat("a name of ", raw.size(),
                                        " bytes, more than ", kMaxNameLength));
  }
  if (absl::StartsWith(raw, "/")) {
    return EntryError(raw, "absolute name");
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(raw, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return EntryError(raw, "\"..\" in its name");
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "/");
}

// A symbolic link's target as an entry name: relative to the link's
// directory, and never above the archive's root.
absl::StatusOr<std::string> ResolveSymlinkTarget(absl::string_view link,
                                                 absl::string_view target) {
  if (target.empty() || absl::StartsWith(target, "/")) {
    return EntryError(link, absl::StrCat("symbolic link to ", Quote(target),
                                         ", outside the archive"));
  }
  std::vector<std::string> parts = absl::StrSplit(link, '/');
  parts.pop_back();  // the link itself
  for (absl::string_view part : absl::StrSplit(target, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) {
        return EntryError(link, absl::StrCat("symbolic link to ", Quote(target),
                                             ", outside the archive"));
      }
      parts.pop_back();
      continue;
    }
    parts.emplace_back(part);
  }
  return absl::StrJoin(parts, "/");
}

// Parses a small document of the archive (its size was limited when it was
// read). Never throws.
absl::StatusOr<Json> ParseJsonDocument(absl::string_view text,
                                       absl::string_view name) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not valid JSON: ", e.what()));
  }
}

enum class Compression { kNone, kGzip, kZstd };

Compression Sniff(absl::string_view head) {
  if (absl::StartsWith(head, "\x1f\x8b")) return Compression::kGzip;
  if (absl::StartsWith(head, "\x28\xb5\x2f\xfd")) return Compression::kZstd;
  return Compression::kNone;
}

// What the first pass over an archive learnt of one entry.
struct EntryInfo {
  // Set for a link (symbolic or hard): the entry name it stands for.
  std::optional<std::string> link;
  // A regular file's digest (from its name under blobs/sha256/, or hashed)
  // and size; empty digest when not known (another algorithm's blob).
  std::string digest;
  int64_t size = 0;
  Compression compression = Compression::kNone;
  // Written to the store already (a blobs/sha256/ entry).
  bool stored = false;
};

// Reads `size` bytes (or to the end, when -1) through `read` into a writer
// of `store` for `digest`. OK when the store had the blob already (the data
// is then not read). Errors name `what`; a failed write leaves nothing.
absl::Status StoreStream(
    ContentStore* store, const std::string& digest, int64_t size,
    absl::string_view what, Compression* compression,
    const std::function<absl::StatusOr<size_t>(char*, size_t)>& read,
    bool* skipped) {
  *skipped = false;
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store->Writer(digest, size);
  if (absl::IsAlreadyExists(writer.status())) {
    *skipped = true;
    return absl::OkStatus();
  }
  if (!writer.ok()) return Annotate(writer.status(), what);
  BlobWriter& out = **writer;
  // An ingest file left by an interrupted write is started over: an archive
  // is read from its start.
  if (out.offset() > 0) {
    if (absl::Status s = out.Truncate(); !s.ok()) {
      out.Abort(/*remove=*/true);
      return Annotate(s, what);
    }
  }
  std::string buffer(kChunk, '\0');
  std::string head;
  while (true) {
    absl::StatusOr<size_t> n = read(buffer.data(), buffer.size());
    if (!n.ok()) {
      out.Abort(/*remove=*/true);
      return Annotate(n.status(), what);
    }
    if (*n == 0) break;
    const absl::string_view data(buffer.data(), *n);
    if (head.size() < 4)
      absl::StrAppend(&head, data.substr(0, 4 - head.size()));
    if (absl::Status s = out.Write(data); !s.ok()) {
      out.Abort(/*remove=*/true);
      return Annotate(s, what);
    }
  }
  if (compression != nullptr) *compression = Sniff(head);
  // On a mismatch the store deletes what was written and names the
  // expected and actual digest.
  return Annotate(out.Commit(), what);
}

// libarchive's reader of a tar, plain, gzip or zstd.
class TarReader {
 public:
  ~TarReader() {
    if (archive_ != nullptr) archive_read_free(archive_);
  }

  static absl::StatusOr<std::unique_ptr<TarReader>> Open(
      const std::string& path) {
    auto reader = std::unique_ptr<TarReader>(new TarReader(path));
    reader->archive_ = archive_read_new();
    if (reader->archive_ == nullptr) {
      return absl::ResourceExhaustedError("archive_read_new failed");
    }
    archive* a = reader->archive_;
    if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
        archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
        archive_read_support_format_tar(a) != ARCHIVE_OK) {
      return reader->Error("setting up libarchive");
    }
    if (archive_read_open_filename(a, path.c_str(), kChunk) != ARCHIVE_OK) {
      return reader->Error("opening");
    }
    return reader;
  }

  // The next entry, or nullptr at the end.
  absl::StatusOr<archive_entry*> Next() {
    archive_entry* entry = nullptr;
    const int r = archive_read_next_header(archive_, &entry);
    if (r == ARCHIVE_EOF) return nullptr;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return Error("reading the next entry");
    }
    return entry;
  }

  // Reads the current entry's data; 0 at its end.
  absl::StatusOr<size_t> Read(char* buffer, size_t size,
                              absl::string_view entry) {
    const la_ssize_t n = archive_read_data(archive_, buffer, size);
    if (n < 0) return Error(absl::StrCat("reading entry ", Quote(entry)));
    return static_cast<size_t>(n);
  }

  absl::Status Skip(absl::string_view entry) {
    if (archive_read_data_skip(archive_) != ARCHIVE_OK) {
      return Error(absl::StrCat("skipping entry ", Quote(entry)));
    }
    return absl::OkStatus();
  }

 private:
  explicit TarReader(std::string path) : path_(std::move(path)) {}

  absl::Status Error(absl::string_view doing) const {
    const char* message = archive_error_string(archive_);
    return absl::InvalidArgumentError(
        absl::StrCat("archive ", path_, ": ", doing, ": ",
                     message != nullptr ? message : "libarchive error"));
  }

  std::string path_;
  archive* archive_ = nullptr;
};

// Where the blobs an index names come from: already in the store (an
// archive's first pass wrote them), or copied from a layout directory.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // Makes `digest` present in the store, or fails naming it and `what`.
  virtual absl::Status Ensure(const std::string& digest,
                              absl::string_view what) = 0;
};

// Blobs an archive held: they are in the store already, or missing.
class StoredBlobs : public BlobSource {
 public:
  explicit StoredBlobs(ContentStore* store) : store_(store) {}
  absl::Status Ensure(const std::string& digest,
                      absl::string_view what) override {
    if (store_->Has(digest)) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat("blob ", digest, " (", what,
                                            ") is missing from the archive"));
  }

 private:
  ContentStore* store_;
};

// Opens the regular file `relative` of a layout directory. Links are
// followed: a directory is trusted as far as whoever names it (Bazel's
// runfiles are links); O_NONBLOCK and the type check keep a FIFO or device
// there from blocking or feeding the reader.
absl::StatusOr<base::UniqueFd> OpenLayoutFile(int dir_fd,
                                              const std::string& dir,
                                              const std::string& relative,
                                              int64_t* size) {
  const std::string path = absl::StrCat(dir, "/", relative);
  base::UniqueFd fd(
      openat(dir_fd, relative.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a regular file"));
  }
  *size = st.st_size;
  return fd;
}

// Reads the whole of a read()able descriptor, looping on EINTR.
absl::StatusOr<size_t> ReadSome(int fd, char* buffer, size_t size,
                                absl::string_view what) {
  while (true) {
    const ssize_t n = read(fd, buffer, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
    }
  }
}

// A small file of a layout directory.
absl::StatusOr<std::string> ReadLayoutFile(int dir_fd, const std::string& dir,
                                           const std::string& relative,
                                           int64_t max_size) {
  int64_t size = 0;
  absl::StatusOr<base::UniqueFd> fd =
      OpenLayoutFile(dir_fd, dir, relative, &size);
  if (!fd.ok()) return fd.status();
  if (size > max_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/", relative, " is ", size,
                     " bytes, more than the limit of ", max_size));
  }
  std::string content(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < content.size()) {
    absl::StatusOr<size_t> n =
        ReadSome(fd->get(), content.data() + got, content.size() - got,
                 absl::StrCat(dir, "/", relative));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    got += *n;
  }
  content.resize(got);
  return content;
}

// Blobs of an OCI layout directory, copied into the store when needed.
class LayoutBlobs : public BlobSource {
 public:
  LayoutBlobs(int dir_fd, std::string dir, ContentStore* store)
      : dir_fd_(dir_fd), dir_(std::move(dir)), store_(store) {}

  absl::Status Ensure(const std::string& digest,
                      absl::string_view what) override {
    if (store_->Has(digest)) return absl::OkStatus();
    const std::string relative =
        absl::StrCat(kSha256BlobsPrefix, DigestHex(digest));
    int64_t size = 0;
    absl::StatusOr<base::UniqueFd> fd =
        OpenLayoutFile(dir_fd_, dir_, relative, &size);
    if (absl::IsNotFound(fd.status())) {
      return absl::NotFoundError(absl::StrCat(
          "blob ", digest, " (", what, ") is missing from the layout ", dir_));
    }
    if (!fd.ok()) return Annotate(fd.status(), absl::StrCat("blob ", digest));
    const int raw_fd = fd->get();
    const std::string path = absl::StrCat(dir_, "/", relative);
    bool skipped = false;
    return StoreStream(
        store_, digest, size, path, /*compression=*/nullptr,
        [raw_fd, &path](char* buffer, size_t n) {
          return ReadSome(raw_fd, buffer, n, path);
        },
        &skipped);
  }

 private:
  int dir_fd_;
  std::string dir_;
  ContentStore* store_;
};

// Checks that what a descriptor names is in the store, as large as it says.
absl::Status RequireBlob(BlobSource& source, ContentStore* store,
                         const Descriptor& descriptor, absl::string_view what) {
  if (absl::Status s = source.Ensure(descriptor.digest, what); !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> size = store->Size(descriptor.digest);
  if (!size.ok()) return size.status();
  if (*size != descriptor.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", descriptor.digest, " is ", *size, " bytes, but ",
                     what, " says ", descriptor.size));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadDocument(BlobSource& source,
                                         ContentStore* store,
                                         const Descriptor& descriptor,
                                         absl::string_view what,
                                         int64_t max_size) {
  if (descriptor.size > max_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", descriptor.digest, " is ", descriptor.size,
                     " bytes, more than the limit of ", max_size));
  }
  if (absl::Status s = RequireBlob(source, store, descriptor, what); !s.ok()) {
    return s;
  }
  return store->ReadBlob(descriptor.digest, max_size);
}

// An image manifest, its config and layers are all present and agree.
absl::Status CheckImageManifest(BlobSource& source, ContentStore* store,
                                const Descriptor& descriptor,
                                absl::string_view what) {
  absl::StatusOr<std::string> document =
      ReadDocument(source, store, descriptor, what, kMaxManifestSize);
  if (!document.ok()) return document.status();
  const std::string manifest_name =
      absl::StrCat("manifest ", descriptor.digest);
  absl::StatusOr<Manifest> manifest =
      ParseManifest(*document, descriptor.media_type);
  if (!manifest.ok()) return Annotate(manifest.status(), manifest_name);
  absl::StatusOr<std::string> config_document = ReadDocument(
      source, store, manifest->config,
      absl::StrCat("the config of ", manifest_name), kMaxConfigSize);
  if (!config_document.ok()) return config_document.status();
  absl::StatusOr<ImageConfigFile> config = ParseImageConfig(*config_document);
  if (!config.ok()) {
    return Annotate(config.status(),
                    absl::StrCat("config ", manifest->config.digest));
  }
  if (config->diff_ids.size() != manifest->layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(manifest_name, " has ", manifest->layers.size(),
                     " layers, but its config ", manifest->config.digest,
                     " has ", config->diff_ids.size(), " diff_ids"));
  }
  for (size_t i = 0; i < manifest->layers.size(); ++i) {
    const Descriptor& layer = manifest->layers[i];
    const std::string layer_name =
        absl::StrCat("layer ", i, " of ", manifest_name);
    if (!IsLayerMediaType(layer.media_type)) {
      return absl::InvalidArgumentError(
          absl::StrCat(layer_name, " (", layer.digest, ") has media type ",
                       Quote(layer.media_type), ", not a layer's"));
    }
    if (absl::Status s = RequireBlob(source, store, layer, layer_name);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The image `descriptor` names is complete in the store for `platform`:
// for an index, the manifest chosen for the platform.
absl::Status CheckImage(BlobSource& source, ContentStore* store,
                        const Descriptor& descriptor,
                        const image::v1::Platform& platform,
                        absl::string_view what, int depth) {
  if (IsManifestMediaType(descriptor.media_type)) {
    return CheckImageManifest(source, store, descriptor, what);
  }
  if (!IsIndexMediaType(descriptor.media_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " (", descriptor.digest, ") has media type ",
                     Quote(descriptor.media_type),
                     ", neither an index nor an image manifest"));
  }
  if (depth >= kMaxIndexDepth) {
    return absl::InvalidArgumentError(absl::StrCat(what, " (",
                                                   descriptor.digest,
                                                   "): indexes nested more "
                                                   "than ",
                                                   kMaxIndexDepth, " deep"));
  }
  absl::StatusOr<std::string> document =
      ReadDocument(source, store, descriptor, what, kMaxManifestSize);
  if (!document.ok()) return document.status();
  const std::string index_name = absl::StrCat("index ", descriptor.digest);
  absl::StatusOr<Index> index = ParseIndex(*document, descriptor.media_type);
  if (!index.ok()) return Annotate(index.status(), index_name);
  absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
  if (!chosen.ok()) return Annotate(chosen.status(), index_name);
  return CheckImage(
      source, store, *chosen, platform,
      absl::StrCat("the ", PlatformString(platform), " entry of ", index_name),
      depth + 1);
}

// The images an OCI layout's index.json names, checked complete.
absl::StatusOr<std::vector<ImportedImage>> ImportLayoutIndex(
    absl::string_view oci_layout, absl::string_view index_json,
    const image::v1::Platform& platform, BlobSource& source,
    ContentStore* store) {
  // oci-layout: {"imageLayoutVersion": "1.0.0"}.
  {
    absl::StatusOr<Json> parsed = ParseJsonDocument(oci_layout, kOciLayoutFile);
    if (!parsed.ok()) return parsed.status();
    const Json& layout = *parsed;
    auto version =
        layout.is_object() ? layout.find("imageLayoutVersion") : layout.end();
    if (!layout.is_object() || version == layout.end() ||
        !version->is_string()) {
      return absl::InvalidArgumentError(
          "oci-layout: field \"imageLayoutVersion\" must be a string");
    }
    const std::string& value = version->get_ref<const std::string&>();
    if (!absl::StartsWith(value, "1.")) {
      return absl::InvalidArgumentError(
          absl::StrCat("oci-layout: imageLayoutVersion ", Quote(value),
                       " is not supported (want 1.x)"));
    }
  }
  absl::StatusOr<Index> index = ParseIndex(index_json);
  if (!index.ok()) return Annotate(index.status(), kIndexJson);
  if (index->manifests.empty()) {
    return absl::InvalidArgumentError("index.json names no image");
  }
  std::vector<ImportedImage> images;
  for (size_t i = 0; i < index->manifests.size(); ++i) {
    const Descriptor& descriptor = index->manifests[i];
    absl::Status complete =
        CheckImage(source, store, descriptor, platform,
                   absl::StrCat("entry ", i, " of index.json"), /*depth=*/0);
    if (!complete.ok()) return complete;
    ImportedImage image;
    auto name = descriptor.annotations.find(kContainerdNameAnnotation);
    if (name == descriptor.annotations.end()) {
      name = descriptor.annotations.find(kRefNameAnnotation);
    }
    if (name != descriptor.annotations.end()) image.name = name->second;
    image.digest = descriptor.digest;
    image.media_type = descriptor.media_type;
    images.push_back(std::move(image));
  }
  return images;
}

absl::StatusOr<std::vector<ImportedImage>> ImportLayoutDirectory(
    const std::string& dir, const image::v1::Platform& platform,
    ContentStore* store) {
  base::UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", dir));
  absl::StatusOr<std::string> oci_layout =
      ReadLayoutFile(dir_fd.get(), dir, kOciLayoutFile, kMaxLayoutFileSize);
  if (!oci_layout.ok()) {
    return Annotate(oci_layout.status(),
                    absl::StrCat(dir, " is not an OCI image layout"));
  }
  absl::StatusOr<std::string> index_json =
      ReadLayoutFile(dir_fd.get(), dir, kIndexJson, kMaxManifestSize);
  if (!index_json.ok()) {
    return Annotate(index_json.status(),
                    absl::StrCat(dir, " is not an OCI image layout"));
  }
  LayoutBlobs source(dir_fd.get(), dir, store);
  return ImportLayoutIndex(*oci_layout, *index_json, platform, source, store);
}

// A tar of an OCI layout or a docker save archive.
class TarImport {
 public:
  TarImport(std::string path, const image::v1::Platform& platform,
            ContentStore* store)
      : path_(std::move(path)), platform_(platform), store_(store) {}

  absl::StatusOr<std::vector<ImportedImage>> Run() {
    if (absl::Status s = FirstPass(); !s.ok()) return s;
    const bool has_index = small_files_.count(kIndexJson) > 0;
    const bool has_layout = small_files_.count(kOciLayoutFile) > 0;
    if (has_index && has_layout) {
      StoredBlobs source(store_);
      return ImportLayoutIndex(small_files_[kOciLayoutFile],
                               small_files_[kIndexJson], platform_, source,
                               store_);
    }
    if (small_files_.count(kDockerManifestJson) > 0) return ImportDockerSave();
    if (has_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "archive ", path_, " has index.json but no oci-layout file"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "archive ", path_,
        " is neither an OCI image layout (oci-layout, index.json) nor a "
        "docker save archive (manifest.json)"));
  }

 private:
  // Kept in memory: the layout's and docker's small documents (a docker
  // image config is "<hex>.json" at the top).
  static bool IsSmallDocument(absl::string_view name, int64_t* limit) {
    if (name == kIndexJson || name == kDockerManifestJson) {
      *limit = kMaxManifestSize;
      return true;
    }
    if (name == kOciLayoutFile) {
      *limit = kMaxLayoutFileSize;
      return true;
    }
    if (name.find('/') == absl::string_view::npos &&
        absl::EndsWith(name, ".json")) {
      *limit = kMaxConfigSize;
      return true;
    }
    return false;
  }

  // Every entry's name is checked; blobs/sha256/ entries go into the store
  // (verified there), small documents into memory, other files are hashed
  // (docker save's layer tars, named by path).
  absl::Status FirstPass() {
    absl::StatusOr<std::unique_ptr<TarReader>> reader = TarReader::Open(path_);
    if (!reader.ok()) return reader.status();
    int64_t small_total = 0;
    while (true) {
      absl::StatusOr<archive_entry*> entry = (*reader)->Next();
      if (!entry.ok()) return entry.status();
      if (*entry == nullptr) break;
      const char* raw_name = archive_entry_pathname(*entry);
      if (raw_name == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("archive ", path_, ": an entry without a name"));
      }
      absl::StatusOr<std::string> name = CleanEntryName(raw_name);
      if (!name.ok()) return name.status();
      if (name->empty()) continue;
      const mode_t type = archive_entry_filetype(*entry);
      if (type == AE_IFDIR) continue;
      if (entries_.size() >= kMaxEntries) {
        return absl::InvalidArgumentError(absl::StrCat(
            "archive ", path_, " has more than ", kMaxEntries, " entries"));
      }
      if (entries_.count(*name) > 0) {
        return EntryError(*name, "appears twice in the archive");
      }
      EntryInfo& info = entries_[*name];

      const char* hardlink = archive_entry_hardlink(*entry);
      if (hardlink != nullptr || type == AE_IFLNK) {
        if (absl::StartsWith(*name, kBlobsPrefix)) {
          return EntryError(*name, "a link where a blob must be a file");
        }
        absl::StatusOr<std::string> target;
        if (hardlink != nullptr) {
          target = CleanEntryName(hardlink);
          if (!target.ok()) {
            return Annotate(target.status(),
                            absl::StrCat("hard link ", Quote(*name)));
          }
        } else {
          const char* symlink = archive_entry_symlink(*entry);
          target =
              ResolveSymlinkTarget(*name, symlink != nullptr ? symlink : "");
          if (!target.ok()) return target.status();
        }
        info.link = *std::move(target);
        continue;
      }
      if (type != AE_IFREG) {
        return EntryError(*name, "neither a file, a directory nor a link");
      }
      if (!archive_entry_size_is_set(*entry)) {
        return EntryError(*name, "no size");
      }
      const int64_t size = archive_entry_size(*entry);
      if (size < 0 || size > kMaxBlobSize) {
        return EntryError(*name, absl::StrCat("size ", size, " is outside [0, ",
                                              kMaxBlobSize, "]"));
      }
      info.size = size;
      TarReader& tar = **reader;
      const std::string& entry_name = *name;
      auto read = [&tar, &entry_name](char* buffer, size_t n) {
        return tar.Read(buffer, n, entry_name);
      };

      if (absl::StartsWith(*name, kBlobsPrefix)) {
        if (!absl::StartsWith(*name, kSha256BlobsPrefix)) {
          // Another algorithm's blob: not usable here; a descriptor naming
          // it fails its digest check.
          if (absl::Status s = tar.Skip(*name); !s.ok()) return s;
          continue;
        }
        const std::string digest = DigestFromHex(
            absl::string_view(*name).substr(kSha256BlobsPrefix.size()));
        if (absl::Status s = ValidateDigest(
                digest, absl::StrCat("blob name of entry ", Quote(*name)));
            !s.ok()) {
          return s;
        }
        bool skipped = false;
        absl::Status stored = StoreStream(
            store_, digest, size, absl::StrCat("archive entry ", Quote(*name)),
            &info.compression, read, &skipped);
        if (!stored.ok()) return stored;
        if (skipped) {
          // Stored before: its first bytes tell its compression.
          absl::StatusOr<base::UniqueFd> blob = store_->OpenBlob(digest);
          if (!blob.ok()) return blob.status();
          char head[4];
          const ssize_t n = pread(blob->get(), head, sizeof(head), 0);
          if (n > 0) info.compression = Sniff(absl::string_view(head, n));
        }
        info.digest = digest;
        info.stored = true;
        continue;
      }

      int64_t limit = 0;
      if (IsSmallDocument(*name, &limit)) {
        if (size > limit) {
          return EntryError(*name, absl::StrCat(size,
                                                " bytes, more than the "
                                                "limit of ",
                                                limit));
        }
        small_total += size;
        if (small_total > kMaxSmallFilesTotal) {
          return EntryError(*name,
                            absl::StrCat("the archive's documents exceed ",
                                         kMaxSmallFilesTotal, " bytes"));
        }
        std::string& content = small_files_[*name];
        content.resize(static_cast<size_t>(size));
        size_t got = 0;
        while (got < content.size()) {
          absl::StatusOr<size_t> n =
              read(content.data() + got, content.size() - got);
          if (!n.ok()) return n.status();
          if (*n == 0) break;
          got += *n;
        }
        if (got != content.size()) {
          return EntryError(*name, "shorter than its header says");
        }
        info.digest = DigestOf(content);
        info.compression = Sniff(content);
        continue;
      }

      // A file named by path: hashed now, stored in the second pass if an
      // image uses it.
      Sha256 hash;
      std::string buffer(kChunk, '\0');
      std::string head;
      while (true) {
        absl::StatusOr<size_t> n = read(buffer.data(), buffer.size());
        if (!n.ok()) return n.status();
        if (*n == 0) break;
        const absl::string_view data(buffer.data(), *n);
        if (head.size() < 4)
          absl::StrAppend(&head, data.substr(0, 4 - head.size()));
        hash.Update(data);
      }
      if (static_cast<int64_t>(hash.size()) != size) {
        return EntryError(*name, "shorter than its header says");
      }
      info.digest = DigestFromHex(Sha256::Hex(hash.Finish()));
      info.compression = Sniff(head);
    }
    return absl::OkStatus();
  }

  // The regular-file entry `name` stands for, following links.
  absl::StatusOr<std::pair<std::string, const EntryInfo*>> Resolve(
      const std::string& name, absl::string_view what) const {
    std::string current = name;
    for (int hop = 0; hop <= kMaxLinkHops; ++hop) {
      auto it = entries_.find(current);
      if (it == entries_.end()) {
        return absl::NotFoundError(absl::StrCat(
            what, " ", Quote(name), " is missing from the archive"));
      }
      if (!it->second.link.has_value()) {
        return std::make_pair(current, &it->second);
      }
      current = *it->second.link;
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " ", Quote(name),
                                                   ": more than ", kMaxLinkHops,
                                                   " links in a row"));
  }

  struct DockerLayer {
    std::string entry;  // the regular file's entry name
    Descriptor descriptor;
  };

  absl::StatusOr<std::vector<ImportedImage>> ImportDockerSave() {
    const std::string& text = small_files_[kDockerManifestJson];
    absl::StatusOr<Json> parsed = ParseJsonDocument(text, kDockerManifestJson);
    if (!parsed.ok()) return parsed.status();
    const Json& images_json = *parsed;
    if (!images_json.is_array() || images_json.empty()) {
      return absl::InvalidArgumentError(
          "manifest.json must be a non-empty array of images");
    }
    struct PendingImage {
      std::vector<std::string> tags;
      Descriptor config;
      std::vector<DockerLayer> layers;
      bool oci = false;
    };
    std::vector<PendingImage> pending;
    // Entries the second pass writes, with their digests.
    std::map<std::string, std::string> to_write;
    for (size_t i = 0; i < images_json.size(); ++i) {
      const std::string where = absl::StrCat("manifest.json[", i, "]");
      const Json& object = images_json[i];
      if (!object.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " must be an object"));
      }
      PendingImage image;
      // Config.
      auto config_path = object.find("Config");
      if (config_path == object.end() || !config_path->is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field \"Config\" must be a string"));
      }
      absl::StatusOr<std::string> config_name =
          CleanEntryName(config_path->get_ref<const std::string&>());
      if (!config_name.ok()) return Annotate(config_name.status(), where);
      absl::StatusOr<std::pair<std::string, const EntryInfo*>> config_entry =
          Resolve(*config_name, absl::StrCat(where, ": config"));
      if (!config_entry.ok()) return config_entry.status();
      std::string config_text;
      if (auto it = small_files_.find(config_entry->first);
          it != small_files_.end()) {
        config_text = it->second;
      } else if (config_entry->second->stored) {
        absl::StatusOr<std::string> blob =
            store_->ReadBlob(config_entry->second->digest, kMaxConfigSize);
        if (!blob.ok()) return Annotate(blob.status(), where);
        config_text = *std::move(blob);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": config ", Quote(*config_name),
            " is not an image config (not a JSON document at the top or "
            "a blob)"));
      }
      absl::StatusOr<ImageConfigFile> config = ParseImageConfig(config_text);
      if (!config.ok()) {
        return Annotate(config.status(),
                        absl::StrCat(where, ": config ", Quote(*config_name)));
      }
      image.config.digest = DigestOf(config_text);
      image.config.size = static_cast<int64_t>(config_text.size());
      if (absl::Status s = store_->WriteBlob(image.config.digest, config_text);
          !s.ok()) {
        return Annotate(s, absl::StrCat(where, ": config"));
      }
      // Layers.
      auto layers = object.find("Layers");
      if (layers == object.end() || !layers->is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field \"Layers\" must be an array"));
      }
      if (layers->size() != config->diff_ids.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " has ", layers->size(), " layers, but its config has ",
            config->diff_ids.size(), " diff_ids"));
      }
      for (size_t j = 0; j < layers->size(); ++j) {
        const std::string layer_where = absl::StrCat(where, ": layer ", j);
        const Json& path = (*layers)[j];
        if (!path.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(layer_where, " must be a string"));
        }
        absl::StatusOr<std::string> layer_name =
            CleanEntryName(path.get_ref<const std::string&>());
        if (!layer_name.ok()) return Annotate(layer_name.status(), layer_where);
        absl::StatusOr<std::pair<std::string, const EntryInfo*>> entry =
            Resolve(*layer_name, layer_where);
        if (!entry.ok()) return entry.status();
        const EntryInfo& info = *entry->second;
        if (info.digest.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat(layer_where, " ", Quote(*layer_name),
                           " is a blob of an unsupported digest algorithm"));
        }
        DockerLayer layer;
        layer.entry = entry->first;
        layer.descriptor.digest = info.digest;
        layer.descriptor.size = info.size;
        switch (info.compression) {
          case Compression::kNone:
            // An uncompressed layer is its own diff_id.
            if (info.digest != config->diff_ids[j]) {
              return absl::InvalidArgumentError(absl::StrCat(
                  layer_where, " ", Quote(*layer_name), " is ", info.digest,
                  ", but the config's diff_id is ", config->diff_ids[j]));
            }
            layer.descriptor.media_type = kDockerLayerTar;
            break;
          case Compression::kGzip:
            layer.descriptor.media_type = kDockerLayerGzip;
            break;
          case Compression::kZstd:
            layer.descriptor.media_type = kOciLayerZstd;
            image.oci = true;
            break;
        }
        if (!info.stored && !store_->Has(info.digest)) {
          to_write[entry->first] = info.digest;
        }
        image.layers.push_back(std::move(layer));
      }
      // RepoTags.
      if (auto tags = object.find("RepoTags");
          tags != object.end() && !tags->is_null()) {
        if (!tags->is_array()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": field \"RepoTags\" must be an array"));
        }
        for (const Json& tag : *tags) {
          if (!tag.is_string()) {
            return absl::InvalidArgumentError(absl::StrCat(
                where, ": field \"RepoTags\" must be an array of strings"));
          }
          image.tags.push_back(tag.get<std::string>());
        }
      }
      pending.push_back(std::move(image));
    }

    if (!to_write.empty()) {
      if (absl::Status s = SecondPass(to_write); !s.ok()) return s;
    }

    std::vector<ImportedImage> imported;
    for (PendingImage& image : pending) {
      // Every layer is stored now (a blob named entry was verified in the
      // first pass, the others in the second).
      for (const DockerLayer& layer : image.layers) {
        if (!store_->Has(layer.descriptor.digest)) {
          return absl::NotFoundError(
              absl::StrCat("layer ", layer.descriptor.digest, " (",
                           Quote(layer.entry), ") was not stored"));
        }
      }
      if (image.oci) {
        image.config.media_type = kOciConfig;
        for (DockerLayer& layer : image.layers) {
          if (layer.descriptor.media_type == kDockerLayerTar) {
            layer.descriptor.media_type = kOciLayerTar;
          } else if (layer.descriptor.media_type == kDockerLayerGzip) {
            layer.descriptor.media_type = kOciLayerGzip;
          }
        }
      } else {
        image.config.media_type = kDockerConfig;
      }
      const std::string manifest_media_type =
          image.oci ? kOciManifest : kDockerManifest;
      auto descriptor_json = [](const Descriptor& d) {
        return Json{{"mediaType", d.media_type},
                    {"digest", d.digest},
                    {"size", d.size}};
      };
      Json manifest = {{"schemaVersion", 2},
                       {"mediaType", manifest_media_type},
                       {"config", descriptor_json(image.config)},
                       {"layers", Json::array()}};
      for (const DockerLayer& layer : image.layers) {
        manifest["layers"].push_back(descriptor_json(layer.descriptor));
      }
      const std::string manifest_text = manifest.dump();
      const std::string manifest_digest = DigestOf(manifest_text);
      if (absl::Status s = store_->WriteBlob(manifest_digest, manifest_text);
          !s.ok()) {
        return Annotate(s, "the manifest made for a docker save image");
      }
      if (image.tags.empty()) image.tags.push_back("");
      for (std::string& tag : image.tags) {
        imported.push_back(ImportedImage{std::move(tag), manifest_digest,
                                         manifest_media_type});
      }
    }
    return imported;
  }

  // Writes the entries of `to_write` (name -> digest) into the store.
  absl::Status SecondPass(std::map<std::string, std::string> to_write) {
    absl::StatusOr<std::unique_ptr<TarReader>> reader = TarReader::Open(path_);
    if (!reader.ok()) return reader.status();
    while (!to_write.empty()) {
      absl::StatusOr<archive_entry*> entry = (*reader)->Next();
      if (!entry.ok()) return entry.status();
      if (*entry == nullptr) break;
      const char* raw_name = archive_entry_pathname(*entry);
      if (raw_name == nullptr) continue;
      absl::StatusOr<std::string> name = CleanEntryName(raw_name);
      if (!name.ok()) return name.status();
      auto it = to_write.find(*name);
      if (it == to_write.end() || archive_entry_filetype(*entry) != AE_IFREG) {
        continue;
      }
      TarReader& tar = **reader;
      const std::string& entry_name = *name;
      bool skipped = false;
      absl::Status stored = StoreStream(
          store_, it->second, archive_entry_size(*entry),
          absl::StrCat("archive entry ", Quote(*name)),
          /*compression=*/nullptr,
          [&tar, &entry_name](char* buffer, size_t n) {
            return tar.Read(buffer, n, entry_name);
          },
          &skipped);
      if (!stored.ok()) return stored;
      to_write.erase(it);
    }
    if (!to_write.empty()) {
      return absl::DataLossError(
          absl::StrCat("archive ", path_, " changed while it was read: entry ",
                       Quote(to_write.begin()->first), " is gone"));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  const image::v1::Platform platform_;
  ContentStore* const store_;
  std::map<std::string, EntryInfo> entries_;
  std::map<std::string, std::string> small_files_;
};

}  // namespace

absl::StatusOr<std::vector<ImportedImage>> ImportArchive(
    const std::string& archive_path, const image::v1::Platform& platform,
    ContentStore* store) {
  struct stat st;
  if (stat(archive_path.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("import ", archive_path));
  }
  if (S_ISDIR(st.st_mode)) {
    return ImportLayoutDirectory(archive_path, platform, store);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "import ", archive_path, ": neither a file nor a directory"));
  }
  TarImport import(archive_path, platform, store);
  return import.Run();
}

}  // namespace berth::images
