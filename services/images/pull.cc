#include "services/images/pull.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "services/images/image_record.h"
#include "services/images/oci/digest.h"
#include "services/images/oci/manifest.h"
#include "services/images/oci/reference.h"

namespace berth::images {
namespace {

namespace pb = ::berth::image::v1;

// How often a thread waiting for a slot or another pull's download looks
// whether its pull was cancelled.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

// A writer that refuses further bytes once its pull is stopped, so that a
// download in the registry client ends at its next chunk.
class StoppableWriter : public BlobWriter {
 public:
  StoppableWriter(BlobWriter* inner, const std::atomic<bool>* stop,
                  std::string digest)
      : inner_(inner), stop_(stop), digest_(std::move(digest)) {}
  int64_t offset() const override { return inner_->offset(); }
  absl::Status Write(absl::string_view data) override {
    if (stop_->load()) {
      return absl::CancelledError(
          absl::StrCat("download of blob ", digest_, " stopped"));
    }
    return inner_->Write(data);
  }
  absl::Status Truncate() override { return inner_->Truncate(); }
  absl::Status Commit() override { return inner_->Commit(); }
  void Abort(bool remove) override { inner_->Abort(remove); }

 private:
  BlobWriter* const inner_;
  const std::atomic<bool>* const stop_;
  const std::string digest_;
};

}  // namespace

// One blob being downloaded by one pull, which others of the same blob wait
// for.
struct Puller::Flight {
  std::atomic<int64_t> downloaded{0};
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
};

// One pull: resolution on the caller's thread, a thread per layer, progress
// sent from the caller's thread.
class Puller::Operation {
 public:
  Operation(Puller* puller, const pb::PullImageRequest& request,
            const PullCallbacks& callbacks)
      : puller_(puller),
        store_(puller->store_),
        request_(request),
        callbacks_(callbacks),
        lease_(store_->NewLease()) {}

  absl::StatusOr<pb::Image> Run();

 private:
  struct LayerTask {
    Descriptor descriptor;
    std::string diff_id;
    pb::LayerState state = pb::LAYER_STATE_WAITING;
    int64_t downloaded = 0;
    int64_t unpacked_size = 0;
  };

  // "pulling REF from HOST: " and what.
  absl::Status Annotate(const absl::Status& status,
                        absl::string_view what) const;
  // Sends a status line (and the layers known) now.
  void SendStatus(std::string line) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `message`; notes a caller that went away.
  void Send(const pb::PullImageProgress& message);
  bool CallerGone();

  absl::Status Resolve();
  absl::Status StoreBytes(absl::string_view digest, absl::string_view body,
                          absl::string_view what);
  absl::Status FetchConfig();
  absl::Status PlanLayers();
  void RunLayers();
  void RunLayer(size_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // Downloads the blob of layer `index` (or waits for the pull that is).
  absl::Status FetchLayerBlob(size_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // Downloads `digest` into the store, whoever else wants it.
  absl::Status Download(const std::string& digest, int64_t size,
                        const std::function<void(int64_t)>& progress);
  void SetState(size_t index, pb::LayerState state) ABSL_LOCKS_EXCLUDED(mu_);
  void SetDownloaded(size_t index, int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  pb::PullImageProgress Progress() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pb::Image MakeImage() const ABSL_LOCKS_EXCLUDED(mu_);

  Puller* const puller_;
  Store* const store_;
  const pb::PullImageRequest& request_;
  const PullCallbacks& callbacks_;
  std::unique_ptr<Store::Lease> lease_;

  Reference reference_;
  std::string endpoint_;  // the host or mirror that answered
  ResolvedImage image_;

  // Set when the pull is to stop: its caller went away, or a layer failed.
  std::atomic<bool> stop_{false};
  bool caller_gone_ = false;

  mutable absl::Mutex mu_;
  std::vector<LayerTask> layers_ ABSL_GUARDED_BY(mu_);
  size_t layers_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool state_changed_ ABSL_GUARDED_BY(mu_) = false;
  bool bytes_moved_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

Puller::Puller(Store* store, RegistryClient* registry, PullerOptions options)
    : store_(store), registry_(registry), options_(std::move(options)) {}

Puller::~Puller() = default;

absl::StatusOr<pb::Image> Puller::Pull(const pb::PullImageRequest& request,
                                       const PullCallbacks& callbacks) {
  Operation operation(this, request, callbacks);
  return operation.Run();
}

bool Puller::AcquireSlot(const std::function<bool()>& cancelled) {
  const int limit = std::max(1, options_.max_concurrent_downloads);
  absl::MutexLock lock(&mu_);
  auto free = [this, limit]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return slots_in_use_ < limit;
  };
  while (!mu_.AwaitWithTimeout(absl::Condition(&free), kCancelPoll)) {
    if (cancelled()) return false;
  }
  if (cancelled()) return false;
  ++slots_in_use_;
  return true;
}

void Puller::ReleaseSlot() {
  absl::MutexLock lock(&mu_);
  --slots_in_use_;
}

std::shared_ptr<Puller::Flight> Puller::Board(const std::string& digest,
                                              bool* owner) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = flights_.try_emplace(digest);
  if (inserted) it->second = std::make_shared<Flight>();
  *owner = inserted;
  return it->second;
}

void Puller::Land(const std::string& digest,
                  const std::shared_ptr<Flight>& flight, absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    auto it = flights_.find(digest);
    if (it != flights_.end() && it->second == flight) flights_.erase(it);
  }
  absl::MutexLock lock(&flight->mu);
  flight->status = std::move(status);
  flight->done = true;
}

absl::Status Puller::Operation::Annotate(const absl::Status& status,
                                         absl::string_view what) const {
  if (status.ok()) return status;
  std::string host = reference_.domain;
  if (!endpoint_.empty() && endpoint_.find(host) == std::string::npos) {
    absl::StrAppend(&host, " (through ", endpoint_, ")");
  }
  return absl::Status(
      status.code(),
      absl::StrCat("pulling ", reference_.String(), " from ", host, ": ", what,
                   what.empty() ? "" : ": ", status.message()));
}

bool Puller::Operation::CallerGone() {
  if (callbacks_.cancelled && callbacks_.cancelled()) caller_gone_ = true;
  if (caller_gone_) stop_ = true;
  return caller_gone_;
}

void Puller::Operation::Send(const pb::PullImageProgress& message) {
  if (callbacks_.progress && !callbacks_.progress(message)) {
    caller_gone_ = true;
    stop_ = true;
  }
}

void Puller::Operation::SendStatus(std::string line) {
  pb::PullImageProgress message;
  {
    absl::MutexLock lock(&mu_);
    message = Progress();
  }
  VLOG(1) << line;
  message.set_status(std::move(line));
  Send(message);
}

pb::PullImageProgress Puller::Operation::Progress() const {
  pb::PullImageProgress message;
  for (const LayerTask& layer : layers_) {
    pb::LayerProgress* progress = message.add_layers();
    progress->set_digest(layer.descriptor.digest);
    progress->set_size(layer.descriptor.size);
    progress->set_downloaded(layer.downloaded);
    progress->set_state(layer.state);
  }
  return message;
}

absl::StatusOr<pb::Image> Puller::Operation::Run() {
  absl::StatusOr<Reference> reference = ParseReference(request_.reference());
  if (!reference.ok()) return reference.status();
  reference_ = *std::move(reference);

  absl::Status status = Resolve();
  if (status.ok()) status = FetchConfig();
  if (status.ok()) status = PlanLayers();
  if (status.ok()) {
    RunLayers();
    absl::MutexLock lock(&mu_);
    status = error_;
  }
  if (status.ok() && (CallerGone() || stop_)) {
    status = absl::CancelledError(
        absl::StrCat("pull of ", reference_.String(), " cancelled"));
  }
  if (!status.ok()) {
    if (absl::IsDataLoss(status)) {
      // Bytes that did not match their digest: what this pull stored
      // besides is not kept either.
      lease_.reset();
      absl::StatusOr<GcResult> collected =
          puller_->options_.collect_garbage
              ? puller_->options_.collect_garbage()
              : store_->CollectGarbage(false);
      if (!collected.ok()) {
        LOG(WARNING) << "after a failed pull of " << reference_.String() << ": "
                     << collected.status();
      }
    }
    return status;
  }

  pb::Image image = MakeImage();
  status = store_->images()->Put(image);
  if (!status.ok()) return Annotate(status, "storing the image record");
  absl::StatusOr<pb::Image> stored = store_->images()->Get(image.name());
  if (!stored.ok()) return Annotate(stored.status(), "reading back the record");
  pb::PullImageProgress last;
  {
    absl::MutexLock lock(&mu_);
    last = Progress();
  }
  last.set_status(
      absl::StrCat("pulled ", image.name(), " (", image.digest(), ")"));
  *last.mutable_image() = *stored;
  LOG(INFO) << last.status();
  Send(last);
  return stored;
}

absl::Status Puller::Operation::StoreBytes(absl::string_view digest,
                                           absl::string_view body,
                                           absl::string_view what) {
  lease_->AddBlob(digest);
  if (store_->content()->Has(digest)) return absl::OkStatus();
  return Annotate(store_->content()->WriteBlob(digest, body),
                  absl::StrCat("storing ", what, " ", digest));
}

absl::Status Puller::Operation::Resolve() {
  RegistryClient* registry = puller_->registry_;
  SendStatus(absl::StrCat("resolving ", reference_.String()));
  absl::StatusOr<FetchedManifest> top = registry->FetchManifest(reference_);
  if (!top.ok()) return Annotate(top.status(), "");
  endpoint_ = top->endpoint;
  image_.digest = top->digest;
  image_.media_type = top->media_type;
  if (!IsIndexMediaType(top->media_type)) {
    SendStatus(absl::StrCat("resolved ", reference_.String(), " to ",
                            top->digest, " at ", endpoint_));
  }
  if (CallerGone()) return absl::OkStatus();
  if (IsIndexMediaType(top->media_type)) {
    absl::StatusOr<Index> index = ParseIndex(top->body, top->media_type);
    if (!index.ok()) {
      return Annotate(index.status(), absl::StrCat("index ", top->digest));
    }
    // The request's platform, its os the node's when it names none.
    pb::Platform platform = puller_->options_.platform;
    if (request_.has_platform()) {
      const std::string os = platform.os();
      platform = request_.platform();
      if (platform.os().empty()) platform.set_os(os);
    }
    absl::StatusOr<Descriptor> chosen = ChoosePlatform(*index, platform);
    if (!chosen.ok()) {
      return Annotate(chosen.status(), absl::StrCat("index ", top->digest));
    }
    absl::Status stored = StoreBytes(top->digest, top->body, "index");
    if (!stored.ok()) return stored;
    image_.index_platform = chosen->platform;
    SendStatus(absl::StrCat("resolved ", reference_.String(), " to index ",
                            top->digest, " at ", endpoint_,
                            "; fetching the manifest for ",
                            PlatformString(platform), " ", chosen->digest));
    absl::StatusOr<FetchedManifest> fetched = registry->FetchManifestByDigest(
        reference_, chosen->digest, chosen->media_type);
    if (!fetched.ok()) {
      return Annotate(fetched.status(),
                      absl::StrCat("manifest ", chosen->digest));
    }
    if (fetched->digest != chosen->digest) {
      return Annotate(
          absl::DataLossError(absl::StrCat(
              "the registry sent ", fetched->digest, " for ", chosen->digest)),
          absl::StrCat("manifest ", chosen->digest));
    }
    *top = *std::move(fetched);
  } else if (!IsManifestMediaType(top->media_type)) {
    return Annotate(absl::InvalidArgumentError(absl::StrCat(
                        "media type ", top->media_type,
                        " is neither an image manifest nor an index")),
                    absl::StrCat("manifest ", top->digest));
  }
  image_.manifest_digest = top->digest;
  absl::StatusOr<Manifest> manifest = ParseManifest(top->body, top->media_type);
  if (!manifest.ok()) {
    return Annotate(manifest.status(),
                    absl::StrCat("manifest ", image_.manifest_digest));
  }
  image_.manifest = *std::move(manifest);
  return StoreBytes(image_.manifest_digest, top->body, "manifest");
}

absl::Status Puller::Operation::FetchConfig() {
  if (stop_) return absl::OkStatus();
  const Descriptor& config = image_.manifest.config;
  const std::string what = absl::StrCat("config ", config.digest);
  if (config.size > puller_->options_.max_config_size) {
    return Annotate(absl::ResourceExhaustedError(absl::StrCat(
                        "its size ", config.size, " is over the limit of ",
                        puller_->options_.max_config_size, " bytes")),
                    what);
  }
  lease_->AddBlob(config.digest);
  if (!store_->content()->Has(config.digest)) {
    absl::Status status = Download(config.digest, config.size, nullptr);
    if (!status.ok()) return Annotate(status, what);
  }
  absl::StatusOr<std::string> body = store_->content()->ReadBlob(
      config.digest, puller_->options_.max_config_size);
  if (!body.ok()) return Annotate(body.status(), what);
  absl::StatusOr<ImageConfigFile> parsed = ParseImageConfig(*body);
  if (!parsed.ok()) return Annotate(parsed.status(), what);
  image_.config = *std::move(parsed);
  return Annotate(CheckLayers(image_), "");
}

absl::Status Puller::Operation::PlanLayers() {
  if (stop_) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < image_.manifest.layers.size(); ++i) {
    const Descriptor& layer = image_.manifest.layers[i];
    lease_->AddBlob(layer.digest);
    lease_->AddLayer(image_.config.diff_ids[i]);
    LayerTask task;
    task.descriptor = layer;
    task.diff_id = image_.config.diff_ids[i];
    if (store_->content()->Has(layer.digest) &&
        store_->layers()->Has(task.diff_id)) {
      task.state = pb::LAYER_STATE_ALREADY_EXISTS;
      task.downloaded = layer.size;
    }
    layers_.push_back(std::move(task));
  }
  return absl::OkStatus();
}

void Puller::Operation::RunLayers() {
  size_t count;
  {
    absl::MutexLock lock(&mu_);
    count = layers_.size();
  }
  SendStatus(
      absl::StrCat("pulling ", count, " layers of ", image_.manifest_digest));
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([this, i] { RunLayer(i); });
  }
  const absl::Duration interval = puller_->options_.progress_interval;
  absl::Time last_sent = absl::Now();
  for (;;) {
    pb::PullImageProgress message;
    bool send = false;
    bool finished = false;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return layers_done_ == count || state_changed_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&wake), interval);
      finished = layers_done_ == count;
      const absl::Time now = absl::Now();
      if (state_changed_ || (bytes_moved_ && now - last_sent >= interval)) {
        message = Progress();
        state_changed_ = bytes_moved_ = false;
        last_sent = now;
        send = true;
      }
    }
    if (send && !finished) Send(message);
    CallerGone();
    if (finished) break;
  }
  for (std::thread& thread : threads) thread.join();
}

void Puller::Operation::SetState(size_t index, pb::LayerState state) {
  absl::MutexLock lock(&mu_);
  LayerTask& layer = layers_[index];
  if (layer.state == state) return;
  layer.state = state;
  state_changed_ = true;
}

void Puller::Operation::SetDownloaded(size_t index, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  LayerTask& layer = layers_[index];
  if (layer.downloaded == bytes) return;
  layer.downloaded = bytes;
  bytes_moved_ = true;
  if (layer.state == pb::LAYER_STATE_DOWNLOADING && bytes > 0 &&
      bytes == layer.descriptor.size) {
    layer.state = pb::LAYER_STATE_VERIFYING;
    state_changed_ = true;
  }
}

void Puller::Operation::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  // The first error is the pull's; the layers stopped because of it fail
  // too, with CANCELLED.
  if (error_.ok() && !(stop_ && absl::IsCancelled(status))) {
    error_ = std::move(status);
  }
  stop_ = true;
}

void Puller::Operation::RunLayer(size_t index) {
  Descriptor descriptor;
  std::string diff_id;
  bool exists;
  {
    absl::MutexLock lock(&mu_);
    descriptor = layers_[index].descriptor;
    diff_id = layers_[index].diff_id;
    exists = layers_[index].state == pb::LAYER_STATE_ALREADY_EXISTS;
  }
  const std::string what =
      absl::StrCat("layer ", index + 1, " ", descriptor.digest);
  absl::Status status;
  if (!exists) status = FetchLayerBlob(index);
  absl::StatusOr<LayerInfo> info;
  if (status.ok()) {
    if (!exists && !store_->layers()->Has(diff_id)) {
      SetState(index, pb::LAYER_STATE_UNPACKING);
    }
    info = store_->layers()->Unpack(descriptor.digest, diff_id);
    status = info.status();
  }
  if (!status.ok()) Fail(Annotate(status, what));
  absl::MutexLock lock(&mu_);
  LayerTask& layer = layers_[index];
  if (status.ok()) {
    layer.unpacked_size = info->unpacked_size;
    if (!exists) layer.state = pb::LAYER_STATE_COMPLETE;
  } else {
    layer.state = pb::LAYER_STATE_FAILED;
  }
  state_changed_ = true;
  ++layers_done_;
}

absl::Status Puller::Operation::FetchLayerBlob(size_t index) {
  std::string digest;
  int64_t size;
  {
    absl::MutexLock lock(&mu_);
    digest = layers_[index].descriptor.digest;
    size = layers_[index].descriptor.size;
  }
  if (store_->content()->Has(digest)) {
    SetDownloaded(index, size);
    SetState(index, pb::LAYER_STATE_DOWNLOADED);
    return absl::OkStatus();
  }
  absl::Status status = Download(digest, size, [this, index](int64_t bytes) {
    SetState(index, pb::LAYER_STATE_DOWNLOADING);
    SetDownloaded(index, bytes);
  });
  if (status.ok()) {
    SetDownloaded(index, size);
    SetState(index, pb::LAYER_STATE_DOWNLOADED);
  }
  return status;
}

absl::Status Puller::Operation::Download(
    const std::string& digest, int64_t size,
    const std::function<void(int64_t)>& progress) {
  auto stopped = [this] { return stop_.load(); };
  for (;;) {
    if (stop_) {
      return absl::CancelledError(
          absl::StrCat("download of blob ", digest, " stopped"));
    }
    bool owner = false;
    std::shared_ptr<Flight> flight = puller_->Board(digest, &owner);
    if (!owner) {
      // Another pull downloads it: wait, showing its bytes.
      absl::MutexLock lock(&flight->mu);
      for (;;) {
        if (flight->mu.AwaitWithTimeout(absl::Condition(&flight->done),
                                        kCancelPoll)) {
          break;
        }
        if (progress) progress(flight->downloaded.load());
        if (stop_) {
          return absl::CancelledError(
              absl::StrCat("download of blob ", digest, " stopped"));
        }
      }
      if (flight->status.ok()) return absl::OkStatus();
      // Its pull was cancelled or stopped: try again, ourselves.
      if (absl::IsCancelled(flight->status)) continue;
      return flight->status;
    }
    absl::Status status;
    if (store_->content()->Has(digest)) {
      status = absl::OkStatus();
    } else if (!puller_->AcquireSlot(stopped)) {
      status = absl::CancelledError(
          absl::StrCat("download of blob ", digest, " stopped"));
    } else {
      absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
          store_->content()->Writer(digest, size);
      if (absl::IsAlreadyExists(writer.status())) {
        status = absl::OkStatus();
      } else if (!writer.ok()) {
        status = writer.status();
      } else {
        StoppableWriter stoppable(writer->get(), &stop_, digest);
        flight->downloaded = (*writer)->offset();
        if (progress) progress((*writer)->offset());
        status =
            puller_->registry_->FetchBlob(reference_, digest, size, &stoppable,
                                          [&flight, &progress](int64_t bytes) {
                                            flight->downloaded = bytes;
                                            if (progress) progress(bytes);
                                          });
        if (!status.ok()) {
          // Kept for a later pull to resume (a digest mismatch removed it).
          (*writer)->Abort(/*remove=*/false);
          if (stop_ && !absl::IsDataLoss(status)) {
            status = absl::CancelledError(
                absl::StrCat("download of blob ", digest, " stopped"));
          }
        }
      }
      puller_->ReleaseSlot();
    }
    puller_->Land(digest, flight, status);
    return status;
  }
}

pb::Image Puller::Operation::MakeImage() const {
  std::vector<int64_t> unpacked_sizes;
  {
    absl::MutexLock lock(&mu_);
    for (const LayerTask& task : layers_) {
      unpacked_sizes.push_back(task.unpacked_size);
    }
  }
  return MakeImageRecord(reference_.String(), image_, unpacked_sizes);
}

}  // namespace berth::images
