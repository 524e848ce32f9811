#include "services/images/registry/registry_test_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace berth::images::testing {

std::unique_ptr<RegistryClient> MakeClient(const std::string& json,
                                           int attempts) {
  absl::StatusOr<RegistriesConfig> config = RegistriesConfig::Parse(json);
  EXPECT_TRUE(config.ok()) << config.status() << " in " << json;
  if (!config.ok()) return nullptr;
  RegistryClientOptions options;
  options.config = *std::move(config);
  options.attempts = attempts;
  options.retry_backoff = absl::Milliseconds(1);
  absl::StatusOr<std::unique_ptr<RegistryClient>> client =
      RegistryClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  return *std::move(client);
}

std::string InsecureConfig(const std::string& host, const std::string& extra) {
  return absl::StrCat(R"({"registries": {")", host, R"(": {"insecure": true)",
                      extra, "}}}");
}

Reference Ref(const std::string& text) {
  absl::StatusOr<Reference> reference = ParseReference(text);
  EXPECT_TRUE(reference.ok()) << reference.status();
  return reference.ok() ? *reference : Reference();
}

std::unique_ptr<ContentStore> OpenStore(const std::string& root) {
  absl::StatusOr<std::unique_ptr<ContentStore>> store =
      ContentStore::Open(root);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return nullptr;
  return *std::move(store);
}

absl::Status FetchIntoStore(RegistryClient& client, ContentStore& store,
                            const Reference& reference,
                            const std::string& digest, int64_t size,
                            std::vector<int64_t>* progress) {
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store.Writer(digest, size);
  if (!writer.ok()) return writer.status();
  absl::Status status = client.FetchBlob(reference, digest, size, writer->get(),
                                         [progress](int64_t held) {
                                           if (progress != nullptr)
                                             progress->push_back(held);
                                         });
  if (!status.ok()) (*writer)->Abort(/*remove=*/false);
  return status;
}

absl::Status LeavePrefix(ContentStore& store, const std::string& digest,
                         int64_t size, absl::string_view prefix) {
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer =
      store.Writer(digest, size);
  if (!writer.ok()) return writer.status();
  absl::Status written = (*writer)->Write(prefix);
  (*writer)->Abort(/*remove=*/false);
  return written;
}

}  // namespace berth::images::testing
