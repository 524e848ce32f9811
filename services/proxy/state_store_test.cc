#include "services/proxy/state_store.h"

#include <stdio.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth {
namespace proxy {
namespace {

using ::berth::testing::ShortTempDir;

TEST(StateStoreTest, KeepsRecordsUntilRemoved) {
  ShortTempDir dir;
  const std::string path = dir.Join("a/b/proxy");
  {
    absl::StatusOr<StateStore> store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(store->PutSandbox({"sb/../1\n", "unix:/x.sock"}).ok());
    ASSERT_TRUE(store->PutSandbox({"sb2", "unix:/y.sock"}).ok());
    ASSERT_TRUE(store->PutSession({"tok", "sb/../1\n", "c", "p-1"}).ok());
    ASSERT_TRUE(store->PutSession({"tok2", "sb2", "c", "p-2"}).ok());
    store->RemoveSandbox("sb2");
    store->RemoveSession("p-2");
  }
  EXPECT_EQ(berth::testing::FileMode(path), 0700);
  // A session record holds a token: the owner only.
  EXPECT_EQ(berth::testing::FileMode(path + "/sessions/702d31"), 0600);
  absl::StatusOr<StateStore> store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  StateStore::State state = store->Load();
  ASSERT_EQ(state.sandboxes.size(), 1u);
  EXPECT_EQ(state.sandboxes[0].sandbox_id, "sb/../1\n");
  EXPECT_EQ(state.sandboxes[0].target, "unix:/x.sock");
  ASSERT_EQ(state.sessions.size(), 1u);
  EXPECT_EQ(state.sessions[0].token, "tok");
  EXPECT_EQ(state.sessions[0].sandbox_id, "sb/../1\n");
  EXPECT_EQ(state.sessions[0].container_id, "c");
  EXPECT_EQ(state.sessions[0].process_id, "p-1");
}

// Found by state_store_fuzzer: an empty field was an empty line, which
// reading skipped, and the record (one field short) was dropped.
TEST(StateStoreTest, EmptyFieldsAndEscapesRoundTrip) {
  ShortTempDir dir;
  absl::StatusOr<StateStore> store = StateStore::Open(dir.Join("proxy"));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(
      store->PutSession({"a\\b\"c", std::string("\0\x01\xff\n", 4), "", "p"})
          .ok());
  ASSERT_TRUE(store->PutSandbox({"sb", ""}).ok());
  StateStore::State state = store->Load();
  ASSERT_EQ(state.sessions.size(), 1u);
  EXPECT_EQ(state.sessions[0].token, "a\\b\"c");
  EXPECT_EQ(state.sessions[0].sandbox_id, std::string("\0\x01\xff\n", 4));
  EXPECT_EQ(state.sessions[0].container_id, "");
  EXPECT_EQ(state.sessions[0].process_id, "p");
  ASSERT_EQ(state.sandboxes.size(), 1u);
  EXPECT_EQ(state.sandboxes[0].sandbox_id, "sb");
  EXPECT_EQ(state.sandboxes[0].target, "");
}

TEST(StateStoreTest, OpenNamesTheDirectoryItCannotMake) {
  absl::StatusOr<StateStore> store = StateStore::Open("/proc/berth-nope");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::HasSubstr("/proc/berth-nope"));
}

// A record a killed proxy was writing is removed when the next one opens the
// store; whole records stay.
TEST(StateStoreTest, OpenRemovesHalfWrittenRecords) {
  ShortTempDir dir;
  const std::string path = dir.Join("proxy");
  {
    absl::StatusOr<StateStore> store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(store->PutSandbox({"sb1", "unix:/x.sock"}).ok());
  }
  for (const char* half : {"/sandboxes/736232.tmp", "/sessions/702d32.tmp"}) {
    FILE* f = fopen((path + half).c_str(), "w");
    ASSERT_NE(f, nullptr) << path + half;
    fputs("sb2\n", f);
    fclose(f);
  }
  absl::StatusOr<StateStore> store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_NE(access((path + "/sandboxes/736232.tmp").c_str(), F_OK), 0);
  EXPECT_NE(access((path + "/sessions/702d32.tmp").c_str(), F_OK), 0);
  StateStore::State state = store->Load();
  ASSERT_EQ(state.sandboxes.size(), 1u);
  EXPECT_EQ(state.sandboxes[0].sandbox_id, "sb1");
}

}  // namespace
}  // namespace proxy
}  // namespace berth
