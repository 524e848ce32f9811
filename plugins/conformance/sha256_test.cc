#include "plugins/conformance/sha256.h"

#include <string>

#include "gtest/gtest.h"

namespace berth::conformance {
namespace {

// Known answers: FIPS 180-4 examples and NIST's long messages (checked
// against coreutils' sha256sum).
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      Sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha256Hex("The quick brown fox jumps over the lazy dog"),
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
}

TEST(Sha256Test, AMillionAs) {
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same in uneven pieces.
  Sha256 hash;
  size_t added = 0;
  for (size_t piece = 1; added < 1000000; piece = piece * 7 % 1000 + 1) {
    const size_t n = std::min(piece, 1000000 - added);
    hash.Update(std::string(n, 'a'));
    added += n;
  }
  EXPECT_EQ(hash.size(), 1000000u);
  EXPECT_EQ(Sha256::Hex(hash.Finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Messages around the padding boundaries (55, 56 and 64 bytes).
TEST(Sha256Test, PaddingBoundaries) {
  EXPECT_EQ(Sha256Hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Sha256Hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Sha256Hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256Test, EverySplitGivesTheSameDigest) {
  std::string message;
  for (int i = 0; i < 200; ++i) message.push_back(static_cast<char>(i * 31));
  const std::string whole = Sha256Hex(message);
  for (size_t split = 0; split <= message.size(); ++split) {
    Sha256 hash;
    hash.Update(absl::string_view(message).substr(0, split));
    hash.Update(absl::string_view(message).substr(split));
    ASSERT_EQ(Sha256::Hex(hash.Finish()), whole) << "split at " << split;
  }
}

TEST(Sha256Test, FinishResets) {
  Sha256 hash;
  hash.Update("something else");
  hash.Finish();
  EXPECT_EQ(hash.size(), 0u);
  hash.Update("abc");
  EXPECT_EQ(Sha256::Hex(hash.Finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, DifferentDataDiffers) {
  EXPECT_NE(Sha256Hex("abc"), Sha256Hex("abd"));
  EXPECT_NE(Sha256Hex(std::string(1 << 16, 'x')),
            Sha256Hex(std::string((1 << 16) + 1, 'x')));
}

}  // namespace
}  // namespace berth::conformance
