#include "services/images/fake_registry.h"

#include <dirent.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "nlohmann/json.hpp"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/oci/reference.h"

namespace berth::images {
namespace {

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::string content = testing::ReadFileOrEmpty(path);
  if (content.empty() && !testing::PathExists(path)) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return content;
}

}  // namespace

std::string FakeRegistry::TestImage(absl::string_view name) {
  return testing::RunfilePath(absl::StrCat("tools/testimages/images/", name));
}

absl::Status FakeRegistry::AddLayout(const std::string& layout_dir,
                                     absl::string_view reference_text) {
  absl::StatusOr<Reference> reference = ParseReference(reference_text);
  if (!reference.ok()) return reference.status();
  absl::StatusOr<std::string> index_json =
      Slurp(absl::StrCat(layout_dir, "/index.json"));
  if (!index_json.ok()) return index_json.status();
  nlohmann::json index = nlohmann::json::parse(*index_json, nullptr, false);
  if (index.is_discarded() || !index.contains("manifests") ||
      index["manifests"].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(layout_dir, "/index.json has no manifests"));
  }
  const nlohmann::json& top = index["manifests"][0];
  const std::string top_digest = top.value("digest", "");
  const std::string top_media_type = top.value("mediaType", "");
  const std::string blobs_dir = absl::StrCat(layout_dir, "/blobs/sha256");
  DIR* dir = opendir(blobs_dir.c_str());
  if (dir == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", blobs_dir));
  }
  std::vector<std::string> names;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  absl::MutexLock lock(&mu_);
  for (const std::string& name : names) {
    absl::StatusOr<std::string> bytes =
        Slurp(absl::StrCat(blobs_dir, "/", name));
    if (!bytes.ok()) return bytes.status();
    Blob& blob = blobs_[absl::StrCat("sha256:", name)];
    blob.bytes = *std::move(bytes);
    absl::StatusOr<std::string> type = DetectMediaType(blob.bytes);
    if (type.ok()) blob.media_type = *type;
  }
  if (blobs_.count(top_digest) == 0) {
    return absl::NotFoundError(
        absl::StrCat(layout_dir, " lacks its top blob ", top_digest));
  }
  blobs_[top_digest].media_type = top_media_type;
  tags_[reference->String()] = top_digest;
  return absl::OkStatus();
}

void FakeRegistry::SetBlob(absl::string_view digest, std::string bytes) {
  absl::MutexLock lock(&mu_);
  blobs_[std::string(digest)].bytes = std::move(bytes);
}

void FakeRegistry::set_before_chunk(
    std::function<void(const std::string&, int64_t)> hook) {
  absl::MutexLock lock(&mu_);
  before_chunk_ = std::move(hook);
}

void FakeRegistry::set_chunk_size(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  chunk_size_ = bytes;
}

void FakeRegistry::Hold(absl::string_view digest, int64_t offset) {
  absl::MutexLock lock(&mu_);
  hold_digest_ = std::string(digest);
  hold_offset_ = offset;
}

void FakeRegistry::Release() {
  absl::MutexLock lock(&mu_);
  hold_digest_.clear();
}

int FakeRegistry::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

int FakeRegistry::fetches(absl::string_view digest) const {
  absl::MutexLock lock(&mu_);
  auto it = fetches_.find(std::string(digest));
  return it == fetches_.end() ? 0 : it->second;
}

int64_t FakeRegistry::start_offset(absl::string_view digest) const {
  absl::MutexLock lock(&mu_);
  auto it = start_offsets_.find(std::string(digest));
  return it == start_offsets_.end() ? -1 : it->second;
}

int FakeRegistry::running_fetches() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int FakeRegistry::max_concurrent_fetches() const {
  absl::MutexLock lock(&mu_);
  return max_running_;
}

absl::Status FakeRegistry::WaitWhileHeld(const std::string& digest,
                                         int64_t offset, BlobWriter* writer) {
  {
    absl::MutexLock lock(&mu_);
    if (hold_digest_ != digest || offset < hold_offset_) {
      return absl::OkStatus();
    }
    ++held_;
  }
  absl::Status status;
  for (;;) {
    status = writer->Write("");
    if (!status.ok()) break;
    absl::MutexLock lock(&mu_);
    auto released = [this, &digest]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return hold_digest_ != digest;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&released),
                             absl::Milliseconds(10))) {
      break;
    }
  }
  absl::MutexLock lock(&mu_);
  --held_;
  return status;
}

absl::StatusOr<FetchedManifest> FakeRegistry::FetchManifest(
    const Reference& reference) {
  std::string digest = reference.digest;
  if (digest.empty()) {
    absl::MutexLock lock(&mu_);
    auto it = tags_.find(reference.String());
    if (it == tags_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "manifest ", reference.Object(), " of ", reference.repository,
          " not found on ", reference.domain, " (HTTP 404)"));
    }
    digest = it->second;
  }
  return FetchManifestByDigest(reference, digest, "");
}

absl::StatusOr<FetchedManifest> FakeRegistry::FetchManifestByDigest(
    const Reference& reference, absl::string_view digest,
    absl::string_view media_type) {
  absl::MutexLock lock(&mu_);
  auto it = blobs_.find(std::string(digest));
  if (it == blobs_.end()) {
    return absl::NotFoundError(
        absl::StrCat("manifest ", digest, " of ", reference.repository,
                     " not found on ", reference.domain, " (HTTP 404)"));
  }
  FetchedManifest fetched;
  fetched.body = it->second.bytes;
  fetched.media_type =
      media_type.empty() ? it->second.media_type : std::string(media_type);
  fetched.digest = DigestFromHex(Sha256Hex(fetched.body));
  fetched.endpoint = absl::StrCat("http://", reference.domain);
  if (fetched.digest != digest) {
    return absl::DataLossError(
        absl::StrCat("manifest ", digest, " of ", reference.repository, " on ",
                     reference.domain, " has digest ", fetched.digest));
  }
  return fetched;
}

absl::Status FakeRegistry::FetchBlob(
    const Reference& reference, absl::string_view digest_view, int64_t size,
    BlobWriter* writer, const std::function<void(int64_t)>& progress) {
  const std::string digest(digest_view);
  std::string bytes;
  int64_t chunk;
  std::function<void(const std::string&, int64_t)> hook;
  {
    absl::MutexLock lock(&mu_);
    auto it = blobs_.find(digest);
    if (it == blobs_.end()) {
      return absl::NotFoundError(
          absl::StrCat("blob ", digest, " of ", reference.repository,
                       " not found on ", reference.domain, " (HTTP 404)"));
    }
    bytes = it->second.bytes;
    chunk = chunk_size_;
    hook = before_chunk_;
    ++fetches_[digest];
    start_offsets_[digest] = writer->offset();
    max_running_ = std::max(max_running_, ++running_);
  }
  absl::Status status;
  int64_t offset = std::min<int64_t>(writer->offset(), bytes.size());
  while (status.ok() && offset < static_cast<int64_t>(bytes.size())) {
    if (hook) hook(digest, offset);
    status = WaitWhileHeld(digest, offset, writer);
    if (!status.ok()) break;
    const int64_t n =
        std::min<int64_t>(chunk, static_cast<int64_t>(bytes.size()) - offset);
    status = writer->Write(absl::string_view(bytes).substr(offset, n));
    if (!status.ok()) break;
    offset += n;
    if (progress) progress(offset);
  }
  if (status.ok()) status = writer->Commit();
  absl::MutexLock lock(&mu_);
  --running_;
  (void)size;
  return status;
}

}  // namespace berth::images
