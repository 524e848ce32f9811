// SHA-256 through OpenSSL's libcrypto (EVP), for content digests: image blobs
// and layers, and data checked end to end in tests.

#ifndef BASE_SHA256_H_
#define BASE_SHA256_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// An incremental SHA-256:
//   Sha256 hash;
//   hash.Update(part1);
//   hash.Update(part2);
//   std::string hex = Sha256::Hex(hash.Finish());
// Not thread-safe; one object per stream of data. Movable.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  // Adds `data` to the message.
  void Update(absl::string_view data);
  void Update(const void* data, size_t size);

  // The digest of everything added. The object is then reset, ready for a
  // new message.
  Digest Finish();

  // Bytes added since construction or the last Finish.
  uint64_t size() const { return size_; }

  // Lower-case hex of a digest (64 characters).
  static std::string Hex(const Digest& digest);

 private:
  struct Context;
  std::unique_ptr<Context> context_;
  uint64_t size_ = 0;
};

// The hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// The hex SHA-256 of what is left to read from `fd` (read to its end).
absl::StatusOr<std::string> Sha256HexOfFd(int fd);

}  // namespace berth

#endif  // BASE_SHA256_H_
