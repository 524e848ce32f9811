#include "services/images/store/layer_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "services/common/remove_tree.h"
#include "services/images/oci/digest.h"
#include "services/images/store/fs_util.h"

namespace berth::images {
namespace {

using store_internal::IsHex64;

constexpr absl::string_view kTmpPrefix = "tmp-";

bool IsDirectory(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LayerStore>> LayerStore::Open(
    const std::string& dir, const ContentStore* content,
    UnpackFunction unpack) {
  absl::Status status = store_internal::MakeDirs(dir);
  if (!status.ok()) return status;
  if (!unpack) {
    return absl::InvalidArgumentError("LayerStore::Open without an unpacker");
  }
  std::unique_ptr<LayerStore> store(
      new LayerStore(dir, content, std::move(unpack)));
  status = store->Recover();
  if (!status.ok()) return status;
  return store;
}

absl::Status LayerStore::Recover() {
  absl::StatusOr<std::vector<std::string>> names =
      store_internal::ListDir(dir_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    const std::string path = absl::StrCat(dir_, "/", name);
    if (absl::StartsWith(name, kTmpPrefix)) {
      LOG(INFO) << "removing an interrupted unpack: " << path;
      absl::Status removed = RemoveTree(path);
      if (!removed.ok()) LOG(WARNING) << removed;
    } else if (IsHex64(name)) {
      if (!IsDirectory(path) ||
          access(absl::StrCat(path, ".json").c_str(), F_OK) != 0) {
        LOG(INFO) << "removing a layer without its metadata: " << path;
        absl::Status removed = RemoveTree(path);
        if (!removed.ok()) LOG(WARNING) << removed;
      }
    } else if (absl::EndsWith(name, ".json") && IsHex64(name.substr(0, 64)) &&
               name.size() == 69) {
      if (!IsDirectory(absl::StrCat(dir_, "/", name.substr(0, 64)))) {
        LOG(INFO) << "removing metadata without its layer: " << path;
        unlink(path.c_str());
      }
    } else if (name.find(".json.tmp-") != std::string::npos) {
      unlink(path.c_str());
    } else {
      LOG(WARNING) << "unknown entry in the layer store: " << path;
    }
  }
  return absl::OkStatus();
}

std::string LayerStore::LayerPath(absl::string_view diff_id) const {
  return absl::StrCat(dir_, "/", DigestHex(diff_id));
}

std::string LayerStore::MetadataPath(absl::string_view diff_id) const {
  return absl::StrCat(dir_, "/", DigestHex(diff_id), ".json");
}

bool LayerStore::Has(absl::string_view diff_id) const {
  return ValidateDigest(diff_id).ok() &&
         access(MetadataPath(diff_id).c_str(), F_OK) == 0 &&
         IsDirectory(LayerPath(diff_id));
}

absl::StatusOr<LayerInfo> LayerStore::Get(absl::string_view diff_id) const {
  absl::Status valid = ValidateDigest(diff_id, "diff_id");
  if (!valid.ok()) return valid;
  absl::StatusOr<std::string> text = base::ReadFile(MetadataPath(diff_id));
  if (!text.ok() || !IsDirectory(LayerPath(diff_id))) {
    return absl::NotFoundError(absl::StrCat("layer ", diff_id, " not found"));
  }
  const nlohmann::json json = nlohmann::json::parse(*text, nullptr, false);
  if (!json.is_object()) {
    return absl::DataLossError(absl::StrCat("layer ", diff_id, ": unreadable ",
                                            MetadataPath(diff_id)));
  }
  LayerInfo info;
  info.diff_id = std::string(diff_id);
  info.path = LayerPath(diff_id);
  info.blob_digest = json.value("blob_digest", "");
  info.unpacked_size = json.value("unpacked_size", int64_t{0});
  info.entries = json.value("entries", int64_t{0});
  info.unpacked_at =
      absl::FromUnixNanos(json.value("unpacked_at_ns", int64_t{0}));
  return info;
}

absl::StatusOr<std::vector<LayerInfo>> LayerStore::List() const {
  absl::StatusOr<std::vector<std::string>> names =
      store_internal::ListDir(dir_);
  if (!names.ok()) return names.status();
  std::vector<LayerInfo> layers;
  for (const std::string& name : *names) {
    if (!IsHex64(name)) continue;
    absl::StatusOr<LayerInfo> info = Get(DigestFromHex(name));
    if (info.ok()) layers.push_back(*std::move(info));
  }
  return layers;
}

absl::StatusOr<LayerInfo> LayerStore::Unpack(absl::string_view blob_view,
                                             absl::string_view diff_id_view,
                                             const UnpackOptions& options) {
  absl::Status valid = ValidateDigest(blob_view, "layer blob digest");
  if (valid.ok()) valid = ValidateDigest(diff_id_view, "diff_id");
  if (!valid.ok()) return valid;
  const std::string blob_digest(blob_view);
  const std::string diff_id(diff_id_view);
  std::string tmp;
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      // Another Unpack of the same layer: wait for it, then use its layer
      // (or, if it failed, try again).
      struct Idle {
        const std::set<std::string>* unpacking;
        const std::string* diff_id;
        bool operator()() const { return unpacking->count(*diff_id) == 0; }
      } idle{&unpacking_, &diff_id};
      mu_.Await(absl::Condition(&idle, &Idle::operator()));
      if (Has(diff_id)) return Get(diff_id);
      tmp = store_internal::RandomName(kTmpPrefix);
      if (busy_tmp_.insert(tmp).second) break;
    }
    unpacking_.insert(diff_id);
  }
  absl::StatusOr<LayerInfo> info =
      UnpackInto(tmp, blob_digest, diff_id, options);
  absl::MutexLock lock(&mu_);
  unpacking_.erase(diff_id);
  busy_tmp_.erase(tmp);
  return info;
}

absl::StatusOr<LayerInfo> LayerStore::UnpackInto(const std::string& tmp,
                                                 const std::string& blob_digest,
                                                 const std::string& diff_id,
                                                 const UnpackOptions& options) {
  const std::string tmp_path = absl::StrCat(dir_, "/", tmp);
  const std::string what =
      absl::StrCat("unpacking layer ", diff_id, " (blob ", blob_digest, ")");
  absl::StatusOr<base::UniqueFd> blob = content_->OpenBlob(blob_digest);
  if (!blob.ok()) {
    return absl::Status(blob.status().code(),
                        absl::StrCat(what, ": ", blob.status().message()));
  }
  if (mkdir(tmp_path.c_str(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, ": mkdir ", tmp_path));
  }
  auto fail = [&](absl::Status status) -> absl::Status {
    absl::Status removed = RemoveTree(tmp_path);
    if (!removed.ok()) LOG(WARNING) << removed;
    return status;
  };
  absl::StatusOr<UnpackResult> result = unpack_(blob->get(), tmp_path, options);
  if (!result.ok()) {
    return fail(
        absl::Status(result.status().code(),
                     absl::StrCat(what, ": ", result.status().message())));
  }
  if (result->diff_id != diff_id) {
    return fail(absl::DataLossError(absl::StrCat(
        "layer blob ", blob_digest, ": uncompressed digest ", result->diff_id,
        " is not the expected diff_id ", diff_id)));
  }
  // The files reach the disk before the layer is named: after a crash of
  // the machine a layer with metadata is whole.
  {
    base::UniqueFd dir(
        open(tmp_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir || syncfs(dir.get()) != 0) {
      return fail(absl::ErrnoToStatus(errno, absl::StrCat(what, ": syncfs")));
    }
  }
  const std::string path = LayerPath(diff_id);
  if (rename(tmp_path.c_str(), path.c_str()) != 0) {
    if (errno != ENOTEMPTY && errno != EEXIST) {
      return fail(absl::ErrnoToStatus(errno, absl::StrCat(what, ": rename")));
    }
    // A directory left without metadata (a Delete cut short): replace it.
    absl::Status removed = RemoveTree(path);
    if (!removed.ok() || rename(tmp_path.c_str(), path.c_str()) != 0) {
      return fail(absl::ErrnoToStatus(errno, absl::StrCat(what, ": rename")));
    }
  }
  LayerInfo info;
  info.diff_id = diff_id;
  info.blob_digest = blob_digest;
  info.path = path;
  info.unpacked_size = result->unpacked_size;
  info.entries = result->entries;
  info.unpacked_at = absl::Now();
  const nlohmann::json json = {
      {"diff_id", diff_id},
      {"blob_digest", blob_digest},
      {"unpacked_size", info.unpacked_size},
      {"entries", info.entries},
      {"unpacked_at_ns", absl::ToUnixNanos(info.unpacked_at)},
  };
  absl::Status written =
      store_internal::WriteFileAtomic(MetadataPath(diff_id), json.dump(2));
  if (!written.ok()) {
    absl::Status removed = RemoveTree(path);
    if (!removed.ok()) LOG(WARNING) << removed;
    return absl::Status(written.code(),
                        absl::StrCat(what, ": ", written.message()));
  }
  return info;
}

absl::StatusOr<int64_t> LayerStore::Delete(absl::string_view diff_id) {
  absl::Status valid = ValidateDigest(diff_id, "diff_id");
  if (!valid.ok()) return valid;
  const std::string path = LayerPath(diff_id);
  std::string tmp;
  {
    absl::MutexLock lock(&mu_);
    if (unpacking_.count(std::string(diff_id)) > 0) return 0;
    const std::string metadata = MetadataPath(diff_id);
    if (unlink(metadata.c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("deleting layer ", diff_id, ": ", metadata));
    }
    absl::Status synced = store_internal::FsyncDir(dir_);
    if (!synced.ok()) return synced;
    do {
      tmp = store_internal::RandomName(kTmpPrefix);
    } while (!busy_tmp_.insert(tmp).second);
    // Moved aside under the lock, so that an Unpack of the same layer
    // starting next finds the name free.
    if (rename(path.c_str(), absl::StrCat(dir_, "/", tmp).c_str()) != 0) {
      const int error = errno;
      busy_tmp_.erase(tmp);
      if (error == ENOENT) return 0;
      return absl::ErrnoToStatus(
          error, absl::StrCat("deleting layer ", diff_id, ": ", path));
    }
  }
  const std::string tmp_path = absl::StrCat(dir_, "/", tmp);
  const int64_t freed = store_internal::DiskUsage(tmp_path);
  absl::Status status = RemoveTree(tmp_path);
  absl::MutexLock lock(&mu_);
  busy_tmp_.erase(tmp);
  if (!status.ok()) return status;
  return freed;
}

int64_t LayerStore::CleanTmp() {
  absl::StatusOr<std::vector<std::string>> names =
      store_internal::ListDir(dir_);
  if (!names.ok()) {
    LOG(WARNING) << names.status();
    return 0;
  }
  int64_t freed = 0;
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, kTmpPrefix)) continue;
    {
      absl::MutexLock lock(&mu_);
      if (busy_tmp_.count(name) > 0) continue;
      // Claimed so that no Unpack picks the name meanwhile.
      busy_tmp_.insert(name);
    }
    const std::string path = absl::StrCat(dir_, "/", name);
    const int64_t bytes = store_internal::DiskUsage(path);
    absl::Status removed = RemoveTree(path);
    if (removed.ok()) {
      freed += bytes;
    } else {
      LOG(WARNING) << removed;
    }
    absl::MutexLock lock(&mu_);
    busy_tmp_.erase(name);
  }
  return freed;
}

}  // namespace berth::images
