#pragma once
// SHA-256 through OpenSSL, incremental.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hearth {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256();

  Sha256& update(const void* data, size_t n);
  Sha256& update(std::span<const uint8_t> bytes) { return update(bytes.data(), bytes.size()); }
  // Little-endian fixed-width integers, so digests are identical on every machine and build.
  Sha256& update_u32(uint32_t v);
  Sha256& update_u64(uint64_t v);
  // Length-prefixed (u64 LE) string, so concatenations cannot collide.
  Sha256& update_string(std::string_view s);
  Sha256Digest finish();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace hearth
