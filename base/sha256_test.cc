#include "base/sha256.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace berth {
namespace {

// FIPS 180-4 examples.
TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, IncrementalEqualsWholeAndResetsAfterFinish) {
  std::string data(100000, 'a');
  Sha256 hash;
  for (size_t i = 0; i < data.size(); i += 777) {
    hash.Update(absl::string_view(data).substr(i, 777));
  }
  EXPECT_EQ(hash.size(), data.size());
  EXPECT_EQ(Sha256::Hex(hash.Finish()), Sha256Hex(data));
  EXPECT_EQ(hash.size(), 0u);
  hash.Update("abc");
  EXPECT_EQ(Sha256::Hex(hash.Finish()), Sha256Hex("abc"));
}

TEST(Sha256Test, MovedHashKeepsItsState) {
  Sha256 first;
  first.Update("ab");
  Sha256 second = std::move(first);
  second.Update("c");
  EXPECT_EQ(Sha256::Hex(second.Finish()), Sha256Hex("abc"));
}

TEST(Sha256Test, OfFdReadsToTheEnd) {
  int fd = memfd_create("sha256_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string data(300000, 'x');
  ASSERT_EQ(write(fd, data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
  absl::StatusOr<std::string> hex = Sha256HexOfFd(fd);
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ(*hex, Sha256Hex(data));
  close(fd);
  EXPECT_FALSE(Sha256HexOfFd(fd).ok());
}

}  // namespace
}  // namespace berth
