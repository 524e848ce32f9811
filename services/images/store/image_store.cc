#include "services/images/store/image_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/io.h"
#include "base/sha256.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"
#include "services/images/oci/digest.h"
#include "services/images/store/fs_util.h"

namespace berth::images {
namespace {

// Records are small; a larger file was not written by Put.
constexpr size_t kMaxRecordSize = 16 << 20;

absl::Status CheckImage(const ImageStore::Image& image) {
  if (image.name().empty()) {
    return absl::InvalidArgumentError("image record without a name");
  }
  const std::string what = absl::StrCat("image ", image.name());
  absl::Status status =
      ValidateDigest(image.digest(), absl::StrCat(what, ": digest"));
  if (status.ok()) {
    status = ValidateDigest(image.manifest_digest(),
                            absl::StrCat(what, ": manifest digest"));
  }
  if (status.ok()) {
    status = ValidateDigest(image.config_digest(),
                            absl::StrCat(what, ": config digest"));
  }
  for (int i = 0; status.ok() && i < image.layers_size(); ++i) {
    status = ValidateDigest(image.layers(i).digest(),
                            absl::StrCat(what, ": layer ", i, " digest"));
    if (status.ok()) {
      status = ValidateDigest(image.layers(i).diff_id(),
                              absl::StrCat(what, ": layer ", i, " diff_id"));
    }
  }
  return status;
}

// Protobuf 3.21's util::Status is a class of its own.
absl::Status FromProtobuf(const google::protobuf::util::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageStore>> ImageStore::Open(
    const std::string& dir) {
  absl::Status status = store_internal::MakeDirs(dir);
  if (!status.ok()) return status;
  std::unique_ptr<ImageStore> store(new ImageStore(dir));
  absl::StatusOr<std::vector<std::string>> names = store_internal::ListDir(dir);
  if (!names.ok()) return names.status();
  absl::MutexLock lock(&store->mu_);
  for (const std::string& name : *names) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (!absl::EndsWith(name, ".json")) {
      // A temporary file of an interrupted Put.
      LOG(INFO) << "removing " << path;
      unlink(path.c_str());
      continue;
    }
    absl::StatusOr<std::string> json = base::ReadFile(path, kMaxRecordSize);
    Image image;
    absl::Status parsed =
        json.ok() ? FromProtobuf(google::protobuf::util::JsonStringToMessage(
                        *json, &image))
                  : json.status();
    if (parsed.ok()) parsed = CheckImage(image);
    if (parsed.ok() && store->RecordPath(image.name()) != path) {
      parsed = absl::DataLossError("the name does not match the file name");
    }
    if (!parsed.ok()) {
      LOG(WARNING) << "removing unreadable image record " << path << ": "
                   << parsed;
      unlink(path.c_str());
      continue;
    }
    store->images_[image.name()] = std::move(image);
  }
  return store;
}

std::string ImageStore::RecordPath(absl::string_view name) const {
  return absl::StrCat(dir_, "/", Sha256Hex(name), ".json");
}

ImageStore::Image ImageStore::WithOtherNames(const Image& image) const {
  Image result = image;
  result.clear_other_names();
  for (const auto& [name, other] : images_) {
    if (name != image.name() && other.digest() == image.digest()) {
      result.add_other_names(name);
    }
  }
  return result;
}

absl::Status ImageStore::Put(const Image& image) {
  absl::Status status = CheckImage(image);
  if (!status.ok()) return status;
  Image record = image;
  record.clear_other_names();
  if (!record.has_stored_at()) {
    const absl::Time now = absl::Now();
    record.mutable_stored_at()->set_seconds(absl::ToUnixSeconds(now));
    record.mutable_stored_at()->set_nanos(
        static_cast<int32_t>(absl::ToUnixNanos(now) % 1000000000));
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  status = FromProtobuf(
      google::protobuf::util::MessageToJsonString(record, &json, options));
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  status = store_internal::WriteFileAtomic(RecordPath(record.name()), json);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("storing the record of image ",
                                     record.name(), ": ", status.message()));
  }
  images_[record.name()] = std::move(record);
  return absl::OkStatus();
}

absl::StatusOr<ImageStore::Image> ImageStore::Get(
    absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = images_.find(name);
  if (it == images_.end()) {
    return absl::NotFoundError(absl::StrCat("image ", name, " not found"));
  }
  return WithOtherNames(it->second);
}

std::vector<ImageStore::Image> ImageStore::List(
    absl::string_view name_prefix) const {
  absl::MutexLock lock(&mu_);
  std::vector<Image> result;
  for (auto it = images_.lower_bound(name_prefix);
       it != images_.end() && absl::StartsWith(it->first, name_prefix); ++it) {
    result.push_back(WithOtherNames(it->second));
  }
  return result;
}

absl::Status ImageStore::Delete(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = images_.find(name);
  if (it == images_.end()) {
    return absl::NotFoundError(absl::StrCat("image ", name, " not found"));
  }
  const std::string path = RecordPath(name);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("removing the record of image ", name));
  }
  images_.erase(it);
  return store_internal::FsyncDir(dir_);
}

absl::StatusOr<ImageStore::Image> ImageStore::Tag(absl::string_view source,
                                                  absl::string_view target) {
  absl::StatusOr<Image> image = Get(source);
  if (!image.ok()) return image.status();
  if (target.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tagging image ", source, ": empty target name"));
  }
  image->set_name(std::string(target));
  image->clear_stored_at();
  absl::Status status = Put(*image);
  if (!status.ok()) return status;
  return Get(target);
}

}  // namespace berth::images
