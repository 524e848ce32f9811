#include "services/images/store/content_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"
#include "services/images/store/store_test_util.h"

namespace berth::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ContentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Join("content");
    auto store = ContentStore::Open(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  testing::ShortTempDir dir_;
  std::string root_;
  std::unique_ptr<ContentStore> store_;
};

TEST_F(ContentStoreTest, WritesReadsListsAndDeletes) {
  const std::string data = "hello blob";
  const std::string digest = DigestOf(data);
  EXPECT_FALSE(store_->Has(digest));
  ASSERT_TRUE(store_->WriteBlob(digest, data).ok());
  EXPECT_TRUE(store_->Has(digest));
  EXPECT_EQ(*store_->Size(digest), static_cast<int64_t>(data.size()));
  EXPECT_EQ(*store_->ReadBlob(digest, 100), data);
  EXPECT_EQ(store_->ReadBlob(digest, 3).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store_->BlobPath(digest),
            absl::StrCat(root_, "/blobs/sha256/", Sha256Hex(data)));
  EXPECT_THAT(*store_->List(), ElementsAre(digest));
  // Writing it again is a no-op.
  EXPECT_TRUE(store_->WriteBlob(digest, data).ok());
  auto writer = store_->Writer(digest, -1);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE(store_->Delete(digest).ok());
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_TRUE(store_->Delete(digest).ok());
  EXPECT_EQ(store_->Size(digest).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store_->OpenBlob(digest).status().message(), HasSubstr(digest));
}

TEST_F(ContentStoreTest, RefusesInvalidDigests) {
  for (const char* bad :
       {"", "sha256:", "sha512:00", "sha256:../../../etc/passwd",
        "sha256:"
        "ABCDEF0000000000000000000000000000000000000000000000000000000000",
        "md5:d41d8cd98f00b204e9800998ecf8427e"}) {
    auto writer = store_->Writer(bad, -1);
    EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_FALSE(store_->Has(bad));
    EXPECT_EQ(store_->WriteBlob(bad, "x").code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(*store_->List(), IsEmpty());
}

TEST_F(ContentStoreTest, DigestMismatchStoresNothing) {
  const std::string digest = DigestOf("expected");
  auto writer = store_->Writer(digest, -1);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Write("tampered").ok());
  absl::Status status = (*writer)->Commit();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(digest));
  EXPECT_THAT(status.message(), HasSubstr(DigestOf("tampered")));
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_THAT(*store_->List(), IsEmpty());
  EXPECT_FALSE(testing::PathExists(store_->IngestPath(digest)));
  EXPECT_FALSE(testing::PathExists(
      absl::StrCat(root_, "/blobs/sha256/", Sha256Hex("tampered"))));
}

TEST_F(ContentStoreTest, SizeMismatchStoresNothing) {
  const std::string data = "twelve bytes";
  const std::string digest = DigestOf(data);
  {
    auto writer = store_->Writer(digest, 5);
    ASSERT_TRUE(writer.ok());
    absl::Status status = (*writer)->Write(data);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("more than the expected 5 bytes"));
    EXPECT_FALSE(testing::PathExists(store_->IngestPath(digest)));
  }
  {
    auto writer = store_->Writer(digest, 100);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write(data).ok());
    absl::Status status = (*writer)->Commit();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("expected size 100, got 12"));
  }
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_FALSE(testing::PathExists(store_->IngestPath(digest)));
}

TEST_F(ContentStoreTest, ResumesAfterPartialWriteAndReopen) {
  const std::string data(300000, 'r');
  const std::string digest = DigestOf(data);
  {
    auto writer = store_->Writer(digest, data.size());
    ASSERT_TRUE(writer.ok());
    EXPECT_EQ((*writer)->offset(), 0);
    ASSERT_TRUE((*writer)->Write(data.substr(0, 120000)).ok());
    (*writer)->Abort(/*remove=*/false);
  }
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_THAT(*store_->List(), IsEmpty());
  // A restart keeps the partial file for the resume.
  store_.reset();
  store_ = *ContentStore::Open(root_);
  {
    auto writer = store_->Writer(digest, data.size());
    ASSERT_TRUE(writer.ok());
    ASSERT_EQ((*writer)->offset(), 120000);
    ASSERT_TRUE((*writer)->Write(data.substr(120000)).ok());
    ASSERT_TRUE((*writer)->Commit().ok());
  }
  EXPECT_EQ(*store_->ReadBlob(digest, 1 << 20), data);
  EXPECT_FALSE(testing::PathExists(store_->IngestPath(digest)));
}

TEST_F(ContentStoreTest, ResumedBadPrefixFailsAndTruncateStartsAgain) {
  const std::string data = "the real content";
  const std::string digest = DigestOf(data);
  {
    auto writer = store_->Writer(digest, -1);
    ASSERT_TRUE((*writer)->Write("garbage").ok());
  }  // destroyed: kept for resume
  {
    auto writer = store_->Writer(digest, -1);
    ASSERT_EQ((*writer)->offset(), 7);
    ASSERT_TRUE((*writer)->Write(data.substr(7)).ok());
    absl::Status status = (*writer)->Commit();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  }
  EXPECT_FALSE(store_->Has(digest));
  {
    auto writer = store_->Writer(digest, -1);
    ASSERT_EQ((*writer)->offset(), 0);
    ASSERT_TRUE((*writer)->Write("junk").ok());
    ASSERT_TRUE((*writer)->Truncate().ok());
    ASSERT_TRUE((*writer)->Write(data).ok());
    ASSERT_TRUE((*writer)->Commit().ok());
  }
  EXPECT_EQ(*store_->ReadBlob(digest, 100), data);
}

TEST_F(ContentStoreTest, PartialLongerThanSizeStartsAtZero) {
  const std::string data = "abc";
  const std::string digest = DigestOf(data);
  {
    auto writer = store_->Writer(digest, -1);
    ASSERT_TRUE((*writer)->Write("abcdefgh").ok());
  }
  auto writer = store_->Writer(digest, 3);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->offset(), 0);
  ASSERT_TRUE((*writer)->Write(data).ok());
  EXPECT_TRUE((*writer)->Commit().ok());
}

TEST_F(ContentStoreTest, SecondWriterOfADigestWaitsForTheFirst) {
  const std::string data = "shared layer";
  const std::string digest = DigestOf(data);
  auto first = store_->Writer(digest, data.size());
  ASSERT_TRUE(first.ok());
  std::atomic<bool> second_done{false};
  absl::Status second_status;
  std::thread second([&] {
    auto writer = store_->Writer(digest, data.size());
    second_status = writer.status();
    second_done = true;
  });
  // The second cannot get past the first while it is open.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(second_done.load());
  ASSERT_TRUE((*first)->Write(data).ok());
  ASSERT_TRUE((*first)->Commit().ok());
  second.join();
  EXPECT_EQ(second_status.code(), absl::StatusCode::kAlreadyExists)
      << second_status;
}

TEST_F(ContentStoreTest, OpenRemovesStrayIngestEntries) {
  const std::string stray = absl::StrCat(root_, "/ingest/not-a-digest");
  const std::string old_partial =
      absl::StrCat(root_, "/ingest/", std::string(64, 'a'));
  const std::string fresh_partial =
      absl::StrCat(root_, "/ingest/", std::string(64, 'b'));
  for (const std::string& path : {stray, old_partial, fresh_partial}) {
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("partial", f);
    fclose(f);
  }
  struct timespec times[2] = {{0, 0}, {1000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, old_partial.c_str(), times, 0), 0);
  store_.reset();
  store_ = *ContentStore::Open(root_);
  EXPECT_FALSE(testing::PathExists(stray));
  EXPECT_FALSE(testing::PathExists(old_partial));
  EXPECT_TRUE(testing::PathExists(fresh_partial));
  EXPECT_THAT(*store_->List(), IsEmpty());
  // The garbage collector's clean removes what no writer holds.
  auto held = store_->Writer(absl::StrCat("sha256:", std::string(64, 'c')), -1);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE((*held)->Write("in progress").ok());
  EXPECT_EQ(store_->CleanIngest(absl::ZeroDuration()), 7);
  EXPECT_FALSE(testing::PathExists(fresh_partial));
  EXPECT_TRUE(testing::PathExists(
      absl::StrCat(root_, "/ingest/", std::string(64, 'c'))));
}

TEST_F(ContentStoreTest, KilledWriterLeavesNothingListed) {
  const std::string data(8 << 20, 'k');
  const std::string digest = DigestOf(data);
  ASSERT_TRUE(store_testing::KillChildWhenReady([&](const auto& ready) {
                auto writer = store_->Writer(digest, data.size());
                if (!writer.ok()) return;
                (void)(*writer)->Write(data.substr(0, 1 << 20));
                ready();
                for (;;) {
                  // Writes slowly, forever (never the whole blob).
                  (void)(*writer)->Write("k");
                  usleep(1000);
                }
              }).ok());

  store_.reset();
  store_ = *ContentStore::Open(root_);
  EXPECT_FALSE(store_->Has(digest));
  EXPECT_THAT(*store_->List(), IsEmpty());
  // The partial bytes resume.
  auto writer = store_->Writer(digest, data.size());
  ASSERT_TRUE(writer.ok()) << writer.status();
  const int64_t offset = (*writer)->offset();
  EXPECT_GE(offset, 1 << 20);
  ASSERT_TRUE((*writer)->Write(absl::string_view(data).substr(offset)).ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_TRUE(store_->Has(digest));
}

}  // namespace
}  // namespace berth::images
