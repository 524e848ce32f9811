#include "base/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

namespace {

// EVP fails only when out of memory or when the digest is not built in;
// neither leaves a way to go on.
void CheckEvp(int ok) {
  if (ok != 1) std::abort();
}

}  // namespace

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  if (context_->ctx == nullptr) std::abort();
  CheckEvp(EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr));
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Update(absl::string_view data) {
  Update(data.data(), data.size());
}

void Sha256::Update(const void* data, size_t size) {
  if (size == 0) return;
  CheckEvp(EVP_DigestUpdate(context_->ctx, data, size));
  size_ += size;
}

Sha256::Digest Sha256::Finish() {
  Digest digest{};
  unsigned int length = 0;
  CheckEvp(EVP_DigestFinal_ex(context_->ctx, digest.data(), &length));
  CheckEvp(EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr));
  size_ = 0;
  return digest;
}

std::string Sha256::Hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (uint8_t byte : digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0xf]);
  }
  return hex;
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 hash;
  hash.Update(data);
  return Sha256::Hex(hash.Finish());
}

absl::StatusOr<std::string> Sha256HexOfFd(int fd) {
  Sha256 hash;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "read for sha256");
    }
    if (n == 0) break;
    hash.Update(buffer, static_cast<size_t>(n));
  }
  return Sha256::Hex(hash.Finish());
}

}  // namespace berth
