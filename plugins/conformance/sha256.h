// SHA-256 (FIPS 180-4), for the suite's checksum of data sent through a
// driver: compact, no dependency (Debian's libssl is not in berth's lock).

#ifndef PLUGINS_CONFORMANCE_SHA256_H_
#define PLUGINS_CONFORMANCE_SHA256_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace berth::conformance {

// An incremental SHA-256:
//   Sha256 hash;
//   hash.Update(part1);
//   hash.Update(part2);
//   std::string hex = Sha256::Hex(hash.Finish());
// Not thread-safe; one object per stream of data.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();

  // Adds `data` to the message.
  void Update(absl::string_view data);

  // The digest of everything added. The object is then reset, ready for a
  // new message.
  Digest Finish();

  // Bytes added since construction or the last Finish.
  uint64_t size() const { return length_; }

  // Lower-case hex of a digest (64 characters).
  static std::string Hex(const Digest& digest);

 private:
  void Reset();
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // in bytes
};

// The hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_SHA256_H_
