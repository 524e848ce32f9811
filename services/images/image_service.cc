#include "services/images/image_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/io.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "glog/logging.h"
#include "services/common/remove_tree.h"
#include "services/common/status.h"
#include "services/common/stream_log.h"
#include "services/images/image_record.h"
#include "services/images/importer/importer.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/reference.h"
#include "services/images/snapshot_idmaps.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;

constexpr char kRpcPrefix[] = "berth.image.v1.ImageService/";

bool IsHex(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// `text` in quotes.
std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", text, "\"");
}

// The normalised name of `text`, or INVALID_ARGUMENT naming `field`.
absl::StatusOr<std::string> NormalizedName(absl::string_view text,
                                           absl::string_view field) {
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  }
  absl::StatusOr<Reference> reference = ParseReference(text);
  if (!reference.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", reference.status().message()));
  }
  return reference->String();
}

// A name an archive gives that is only a tag ("latest", as OCI layouts'
// org.opencontainers.image.ref.name usually is): no '/', ':' or '@'.
bool IsBareTag(absl::string_view name) {
  return !name.empty() && name.find_first_of("/:@") == absl::string_view::npos;
}

// Whether a name as a user wrote it has a tag or digest of its own.
bool HasTagOrDigest(absl::string_view name) {
  const size_t slash = name.rfind('/');
  const absl::string_view last =
      slash == absl::string_view::npos ? name : name.substr(slash + 1);
  return last.find_first_of(":@") != absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ImportNames(
    const std::vector<ImportedImage>& images, absl::string_view option_name) {
  std::vector<std::string> names;
  std::map<std::string, std::string> digest_of_name;
  for (const ImportedImage& image : images) {
    const bool bare = image.name.empty() || IsBareTag(image.name);
    std::string text;
    std::string field;
    if (!option_name.empty() && (images.size() == 1 || bare)) {
      // The caller's name; a bare tag of the archive completes a name
      // given without one.
      text = std::string(option_name);
      if (IsBareTag(image.name) && !HasTagOrDigest(option_name)) {
        absl::StrAppend(&text, ":", image.name);
      }
      field = "ImportOptions.name";
    } else if (bare) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image ", image.digest, " in the archive has no name",
          image.name.empty()
              ? ""
              : absl::StrCat(" (only the tag \"", image.name, "\")"),
          ": pass one (ImportOptions.name, berth image import --name)"));
    } else {
      text = image.name;
      field = absl::StrCat("the archive's name of image ", image.digest);
    }
    absl::StatusOr<std::string> name = NormalizedName(text, field);
    if (!name.ok()) return name.status();
    auto [it, inserted] = digest_of_name.emplace(*name, image.digest);
    if (!inserted && it->second != image.digest) {
      return absl::InvalidArgumentError(absl::StrCat(
          "images ", it->second, " and ", image.digest,
          " of the archive would both be named ", *name,
          "; ImportOptions.name names one image, or the images of bare "
          "tags"));
    }
    names.push_back(*std::move(name));
  }
  return names;
}

namespace {

// Empties `dir` (creating it 0700 if missing).
absl::Status PrepareImportDir(const std::string& dir) {
  absl::Status removed = RemoveTree(dir);
  if (!removed.ok()) {
    return absl::Status(removed.code(), absl::StrCat("emptying ", dir, ": ",
                                                     removed.message()));
  }
  if (mkdir(dir.c_str(), 0700) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("creating ", dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageServiceImpl>> ImageServiceImpl::Create(
    Store* store, RegistryClient* registry, ImageServiceOptions options) {
  if (options.import_dir.empty()) {
    return absl::InvalidArgumentError(
        "ImageServiceOptions.import_dir is empty");
  }
  if (options.idmap_dir.empty()) {
    return absl::InvalidArgumentError("ImageServiceOptions.idmap_dir is empty");
  }
  absl::Status prepared = PrepareImportDir(options.import_dir);
  if (!prepared.ok()) return prepared;
  absl::StatusOr<std::unique_ptr<SnapshotIdMaps>> idmaps =
      SnapshotIdMaps::Open(options.idmap_dir);
  if (!idmaps.ok()) return idmaps.status();
  absl::StatusOr<std::vector<SnapshotInfo>> snapshots =
      store->snapshots()->List();
  if (!snapshots.ok()) return snapshots.status();
  std::set<std::string> ids;
  for (const SnapshotInfo& snapshot : *snapshots) ids.insert(snapshot.id);
  (*idmaps)->Clean(ids);
  return std::unique_ptr<ImageServiceImpl>(new ImageServiceImpl(
      store, registry, *std::move(idmaps), std::move(options)));
}

ImageServiceImpl::ImageServiceImpl(Store* store, RegistryClient* registry,
                                   std::unique_ptr<SnapshotIdMaps> idmaps,
                                   ImageServiceOptions options)
    : store_(store),
      idmaps_(std::move(idmaps)),
      options_(std::move(options)),
      puller_(store, registry, [this] {
        PullerOptions options;
        options.max_concurrent_downloads = options_.max_concurrent_downloads;
        options.platform = options_.platform;
        options.collect_garbage = [this] { return CollectGarbage(false); };
        return options;
      }()) {}

absl::StatusOr<GcResult> ImageServiceImpl::CollectGarbage(
    bool all_unused_images) {
  absl::WriterMutexLock lock(&import_mu_);
  return store_->CollectGarbage(all_unused_images);
}

absl::StatusOr<std::vector<pb::Image>> ImageServiceImpl::FindImages(
    absl::string_view text, bool* by_name) const {
  if (by_name != nullptr) *by_name = false;
  if (text.empty()) return absl::InvalidArgumentError("reference is empty");
  std::vector<pb::Image> found;
  // A name (possibly with a digest): one record read, before every record
  // is (the common case, each image task's PrepareSnapshot).
  absl::StatusOr<Reference> reference = ParseReference(text);
  if (reference.ok()) {
    absl::StatusOr<pb::Image> image =
        store_->images()->Get(reference->String());
    if (image.ok()) {
      if (by_name != nullptr) *by_name = true;
      found.push_back(*std::move(image));
      return found;
    }
  }
  const std::vector<pb::Image> all = store_->images()->List();
  if (reference.ok()) {
    if (!reference->digest.empty()) {
      // repo@digest: any name of that repository stored with that digest.
      for (const pb::Image& candidate : all) {
        absl::StatusOr<Reference> name = ParseReference(candidate.name());
        if (name.ok() && name->Name() == reference->Name() &&
            (candidate.digest() == reference->digest ||
             candidate.manifest_digest() == reference->digest)) {
          found.push_back(candidate);
        }
      }
      if (!found.empty()) return found;
    }
  }
  // A digest of a document of the image.
  if (ValidateDigest(text).ok()) {
    for (const pb::Image& candidate : all) {
      if (candidate.digest() == text || candidate.manifest_digest() == text ||
          candidate.config_digest() == text) {
        found.push_back(candidate);
      }
    }
    if (!found.empty()) return found;
  }
  // A prefix of an image id.
  absl::string_view hex = text;
  absl::ConsumePrefix(&hex, "sha256:");
  if (hex.size() >= 12 && hex.size() <= 64 && IsHex(hex)) {
    std::set<std::string> ids;
    for (const pb::Image& candidate : all) {
      if (absl::StartsWith(DigestHex(candidate.config_digest()), hex)) {
        found.push_back(candidate);
        ids.insert(candidate.config_digest());
      }
    }
    if (ids.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("image id prefix ", Quoted(text),
                       " is ambiguous: ", absl::StrJoin(ids, ", ")));
    }
    if (!found.empty()) return found;
  }
  if (ValidateDigest(text).ok()) {
    return absl::NotFoundError(absl::StrCat(
        "no image has digest ", text, " (as its index, manifest or config)"));
  }
  if (reference.ok()) {
    return absl::NotFoundError(
        absl::StrCat("image ", reference->String(), " not found"));
  }
  return absl::NotFoundError(absl::StrCat(
      "image ", Quoted(text),
      " not found (not a stored name, digest or image id; as a name: ",
      reference.status().message(), ")"));
}

grpc::Status ImageServiceImpl::PullImage(
    grpc::ServerContext* context, const pb::PullImageRequest* request,
    grpc::ServerWriter<pb::PullImageProgress>* writer) {
  PullCallbacks callbacks;
  callbacks.progress = [writer](const pb::PullImageProgress& message) {
    return writer->Write(message);
  };
  callbacks.cancelled = [context] { return context->IsCancelled(); };
  absl::StatusOr<pb::Image> image = puller_.Pull(*request, callbacks);
  grpc::Status status = ToGrpcStatus(image.status());
  LogStreamEnd(absl::StrCat(kRpcPrefix, "PullImage"), status, context);
  return status;
}

grpc::Status ImageServiceImpl::ImportImage(
    grpc::ServerContext* context,
    grpc::ServerReader<pb::ImportImageRequest>* reader,
    pb::ImportImageResponse* response) {
  std::string path = absl::StrCat(options_.import_dir, "/import-XXXXXX");
  base::UniqueFd fd(mkostemp(path.data(), O_CLOEXEC));
  if (!fd) {
    return ToGrpcStatus(absl::ErrnoToStatus(
        errno, absl::StrCat("creating a file in ", options_.import_dir)));
  }
  absl::Cleanup remove = [&path] { unlink(path.c_str()); };
  pb::ImportOptions options;
  pb::ImportImageRequest chunk;
  bool first = true;
  int64_t bytes = 0;
  while (reader->Read(&chunk)) {
    if (first) {
      options = chunk.options();
      first = false;
    } else if (chunk.has_options()) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          "ImportImageRequest.options is set in a message other than the "
          "first"));
    }
    absl::Status written = base::WriteAll(fd.get(), chunk.chunk(),
                                          absl::StrCat("import file ", path));
    if (!written.ok()) return ToGrpcStatus(written);
    bytes += static_cast<int64_t>(chunk.chunk().size());
  }
  if (context->IsCancelled()) {
    grpc::Status status(grpc::StatusCode::CANCELLED, "import cancelled");
    LogStreamEnd(absl::StrCat(kRpcPrefix, "ImportImage"), status, context);
    return status;
  }
  if (bytes == 0) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("the import stream carried no archive"));
  }
  fd.reset();
  absl::StatusOr<std::vector<pb::Image>> images = Import(path, options);
  grpc::Status status = ToGrpcStatus(images.status());
  if (images.ok()) {
    for (pb::Image& image : *images) {
      *response->add_images() = std::move(image);
    }
  }
  LogStreamEnd(absl::StrCat(kRpcPrefix, "ImportImage"), status, context);
  return status;
}

absl::StatusOr<std::vector<pb::Image>> ImageServiceImpl::Import(
    const std::string& archive_path, const pb::ImportOptions& options) {
  const pb::Platform& platform =
      options.has_platform() ? options.platform() : options_.platform;
  if (!options.name().empty()) {
    absl::StatusOr<std::string> name =
        NormalizedName(options.name(), "ImportOptions.name");
    if (!name.ok()) return name.status();
  }
  // No collection from the first blob written to the records: the lease
  // can name the blobs only once the archive has said what they are.
  absl::ReaderMutexLock no_collection(&import_mu_);
  std::unique_ptr<Store::Lease> lease = store_->NewLease();
  absl::StatusOr<std::vector<ImportedImage>> imported =
      ImportArchive(archive_path, platform, store_->content());
  if (!imported.ok()) {
    return absl::Status(
        imported.status().code(),
        absl::StrCat("importing the archive: ", imported.status().message()));
  }
  if (imported->empty()) {
    return absl::InvalidArgumentError("the archive holds no image");
  }
  // Names first: an archive that cannot be named stores no record.
  absl::StatusOr<std::vector<std::string>> names =
      ImportNames(*imported, options.name());
  if (!names.ok()) return names.status();
  std::vector<pb::Image> records;
  for (size_t i = 0; i < imported->size(); ++i) {
    const ImportedImage& image = (*imported)[i];
    lease->AddBlob(image.digest);
    absl::StatusOr<ResolvedImage> resolved = ResolveStoredImage(
        *store_->content(), image.digest, image.media_type, platform);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          absl::StrCat("importing ", (*names)[i], ": ",
                                       resolved.status().message()));
    }
    lease->AddBlob(resolved->manifest_digest);
    lease->AddBlob(resolved->manifest.config.digest);
    std::vector<int64_t> unpacked_sizes;
    for (size_t l = 0; l < resolved->manifest.layers.size(); ++l) {
      const std::string& blob = resolved->manifest.layers[l].digest;
      const std::string& diff_id = resolved->config.diff_ids[l];
      lease->AddBlob(blob);
      lease->AddLayer(diff_id);
      absl::StatusOr<LayerInfo> layer = store_->layers()->Unpack(blob, diff_id);
      if (!layer.ok()) {
        return absl::Status(
            layer.status().code(),
            absl::StrCat("importing ", (*names)[i], ": layer ", l + 1, " ",
                         blob, ": ", layer.status().message()));
      }
      unpacked_sizes.push_back(layer->unpacked_size);
    }
    records.push_back(MakeImageRecord((*names)[i], *resolved, unpacked_sizes));
  }
  std::vector<pb::Image> stored;
  for (const pb::Image& record : records) {
    absl::Status put = store_->images()->Put(record);
    if (!put.ok()) return put;
    LOG(INFO) << "imported " << record.name() << " (" << record.digest() << ")";
  }
  for (const pb::Image& record : records) {
    absl::StatusOr<pb::Image> image = store_->images()->Get(record.name());
    if (!image.ok()) return image.status();
    stored.push_back(*std::move(image));
  }
  return stored;
}

grpc::Status ImageServiceImpl::ListImages(grpc::ServerContext*,
                                          const pb::ListImagesRequest* request,
                                          pb::ListImagesResponse* response) {
  for (pb::Image& image : store_->images()->List(request->name_prefix())) {
    *response->add_images() = std::move(image);
  }
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::InspectImage(
    grpc::ServerContext*, const pb::InspectImageRequest* request,
    pb::InspectImageResponse* response) {
  absl::StatusOr<std::vector<pb::Image>> images =
      FindImages(request->reference());
  if (!images.ok()) return ToGrpcStatus(images.status());
  *response->mutable_image() = images->front();
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::RemoveImage(
    grpc::ServerContext*, const pb::RemoveImageRequest* request,
    pb::RemoveImageResponse* response) {
  absl::MutexLock lock(&mu_);
  bool by_name = false;
  absl::StatusOr<std::vector<pb::Image>> images =
      FindImages(request->reference(), &by_name);
  if (!images.ok()) return ToGrpcStatus(images.status());
  // By name: that name. By digest or id: every name of the image.
  std::set<std::string> names;
  for (const pb::Image& image : *images) names.insert(image.name());
  if (!request->force()) {
    std::set<std::string> kept_manifests;
    for (const pb::Image& image : store_->images()->List()) {
      if (names.count(image.name()) == 0) {
        kept_manifests.insert(image.manifest_digest());
      }
    }
    for (const pb::Image& image : *images) {
      if (kept_manifests.count(image.manifest_digest()) > 0) continue;
      std::vector<std::string> snapshots = store_->SnapshotsOf(image);
      if (!snapshots.empty()) {
        return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
            "image ", image.name(), " (", image.manifest_digest(),
            ") is used by snapshot", snapshots.size() > 1 ? "s " : " ",
            absl::StrJoin(snapshots, ", "),
            "; release them (remove their tasks) first, or force")));
      }
    }
  }
  for (const std::string& name : names) {
    absl::Status deleted = store_->images()->Delete(name);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return ToGrpcStatus(deleted);
    }
    response->add_untagged(name);
  }
  absl::StatusOr<GcResult> collected = CollectGarbage(false);
  if (!collected.ok()) {
    return ToGrpcStatus(absl::Status(
        collected.status().code(),
        absl::StrCat(
            "removed ", absl::StrJoin(names, ", "),
            " but collecting garbage failed: ", collected.status().message())));
  }
  for (const std::string& digest : collected->deleted) {
    response->add_deleted(digest);
  }
  LOG(INFO) << "removed " << absl::StrJoin(names, ", ") << "; deleted "
            << collected->deleted.size() << " blobs and layers";
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::TagImage(grpc::ServerContext*,
                                        const pb::TagImageRequest* request,
                                        pb::TagImageResponse* response) {
  absl::StatusOr<std::string> target =
      NormalizedName(request->target(), "target");
  if (!target.ok()) return ToGrpcStatus(target.status());
  absl::StatusOr<Reference> parsed = ParseReference(*target);
  if (parsed.ok() && !parsed->digest.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "target ", Quoted(request->target()),
        " has a digest: a tag names an image by repository and tag")));
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<pb::Image>> source = FindImages(request->source());
  if (!source.ok()) return ToGrpcStatus(source.status());
  absl::StatusOr<pb::Image> tagged =
      store_->images()->Tag(source->front().name(), *target);
  if (!tagged.ok()) return ToGrpcStatus(tagged.status());
  *response->mutable_image() = *std::move(tagged);
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::PruneImages(
    grpc::ServerContext*, const pb::PruneImagesRequest* request,
    pb::PruneImagesResponse* response) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<GcResult> collected = CollectGarbage(request->all());
  if (!collected.ok()) return ToGrpcStatus(collected.status());
  for (const std::string& name : collected->untagged) {
    response->add_untagged(name);
  }
  for (const std::string& digest : collected->deleted) {
    response->add_deleted(digest);
  }
  response->set_reclaimed_bytes(collected->reclaimed_bytes);
  LOG(INFO) << "pruned " << collected->untagged.size() << " images, "
            << collected->deleted.size() << " blobs and layers, "
            << collected->reclaimed_bytes << " bytes";
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::PrepareSnapshot(
    grpc::ServerContext*, const pb::PrepareSnapshotRequest* request,
    pb::PrepareSnapshotResponse* response) {
  const std::string& id = request->id();
  absl::Status valid = SnapshotStore::ValidateId(id);
  if (valid.ok()) {
    valid =
        ValidateIdMappings(request->uid_mappings(), request->gid_mappings());
  }
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<pb::Image>> images =
      FindImages(request->reference());
  if (!images.ok()) {
    return ToGrpcStatus(absl::Status(
        images.status().code(),
        absl::StrCat("snapshot ", id, ": ", images.status().message())));
  }
  const pb::Image& image = images->front();
  const bool existed = store_->snapshots()->Get(id).ok();
  if (existed) {
    absl::StatusOr<pb::Snapshot> maps = idmaps_->Get(id);
    if (!maps.ok()) return ToGrpcStatus(maps.status());
    if (!SameIdMappings(maps->uid_mappings(), request->uid_mappings()) ||
        !SameIdMappings(maps->gid_mappings(), request->gid_mappings())) {
      return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          "snapshot ", id, " exists with other id mappings (uid \"",
          absl::StripSuffix(IdMapText(maps->uid_mappings()), "\n"),
          "\", gid \"",
          absl::StripSuffix(IdMapText(maps->gid_mappings()), "\n"),
          "\"); release it first")));
    }
  }
  base::UniqueFd userns;
  if (!request->uid_mappings().empty()) {
    absl::StatusOr<base::UniqueFd> made =
        MakeIdmapNamespace(request->uid_mappings(), request->gid_mappings());
    if (!made.ok()) {
      return ToGrpcStatus(absl::Status(
          made.status().code(),
          absl::StrCat("snapshot ", id, ": ", made.status().message())));
    }
    userns = *std::move(made);
    if (!existed) {
      absl::Status put =
          idmaps_->Put(id, request->uid_mappings(), request->gid_mappings());
      if (!put.ok()) return ToGrpcStatus(put);
    }
  }
  std::unique_ptr<Store::Lease> lease = store_->NewLease();
  lease->AddImage(image);
  absl::StatusOr<SnapshotInfo> snapshot =
      store_->PrepareSnapshot(id, image, userns.get());
  if (!snapshot.ok()) {
    if (!existed) {
      absl::Status removed = idmaps_->Remove(id);
      if (!removed.ok()) LOG(WARNING) << removed;
    }
    return ToGrpcStatus(
        absl::Status(snapshot.status().code(),
                     absl::StrCat("snapshot ", id, " of ", image.name(), ": ",
                                  snapshot.status().message())));
  }
  response->set_rootfs(snapshot->rootfs);
  *response->mutable_image() = image;
  VLOG(1) << "prepared snapshot " << snapshot->id << " of " << image.name()
          << " at " << snapshot->rootfs;
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::ReleaseSnapshot(
    grpc::ServerContext*, const pb::ReleaseSnapshotRequest* request,
    pb::ReleaseSnapshotResponse*) {
  absl::Status valid = SnapshotStore::ValidateId(request->id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SnapshotInfo> snapshot =
      store_->snapshots()->Get(request->id());
  absl::Status released = store_->snapshots()->Release(request->id());
  if (released.ok()) released = idmaps_->Remove(request->id());
  if (!released.ok()) return ToGrpcStatus(released);
  if (!snapshot.ok()) return grpc::Status::OK;
  VLOG(1) << "released snapshot " << request->id();
  // The image was removed (forced) while this snapshot used it: its layers
  // are garbage now.
  for (const pb::Image& image : store_->images()->List()) {
    if (image.manifest_digest() == snapshot->manifest_digest) {
      return grpc::Status::OK;
    }
  }
  absl::StatusOr<GcResult> collected = CollectGarbage(false);
  if (!collected.ok()) {
    LOG(WARNING) << "after releasing snapshot " << request->id()
                 << " of removed image " << snapshot->image_name << ": "
                 << collected.status();
  }
  return grpc::Status::OK;
}

grpc::Status ImageServiceImpl::ListSnapshots(
    grpc::ServerContext*, const pb::ListSnapshotsRequest*,
    pb::ListSnapshotsResponse* response) {
  absl::StatusOr<std::vector<SnapshotInfo>> snapshots =
      store_->snapshots()->List();
  if (!snapshots.ok()) return ToGrpcStatus(snapshots.status());
  for (const SnapshotInfo& info : *snapshots) {
    pb::Snapshot* snapshot = response->add_snapshots();
    snapshot->set_id(info.id);
    snapshot->set_rootfs(info.rootfs);
    snapshot->set_image_name(info.image_name);
    snapshot->set_manifest_digest(info.manifest_digest);
    *snapshot->mutable_created() = base::ToProtoTimestamp(info.created);
    absl::StatusOr<pb::Snapshot> maps = idmaps_->Get(info.id);
    if (!maps.ok()) return ToGrpcStatus(maps.status());
    *snapshot->mutable_uid_mappings() = maps->uid_mappings();
    *snapshot->mutable_gid_mappings() = maps->gid_mappings();
  }
  return grpc::Status::OK;
}

}  // namespace berth::images
