#include "util/sha256.h"

#include <openssl/evp.h>

#include "util/result.h"

namespace hearth {

namespace {

// SHA-256 fetched from OpenSSL's provider once, for the process: EVP_sha256() makes every init look the algorithm
// up again, which took two thirds of a 16-token block's hash. A prompt's block keys
// are hashed a few times on admission (the prefix lookup, the miss explanation, the tiers), 157 blocks for a
// 2,500-token household prompt. Kept for the process's life: never freed.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  HEARTH_CHECK(ctx_ != nullptr && sha256_md() != nullptr &&
                   EVP_DigestInit_ex2(static_cast<EVP_MD_CTX*>(ctx_), sha256_md(), nullptr) == 1,
               "OpenSSL SHA-256 init failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256& Sha256::update(const void* data, size_t n) {
  HEARTH_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n) == 1, "OpenSSL SHA-256 update failed");
  return *this;
}

Sha256& Sha256::update_u32(uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  return update(b, 4);
}

Sha256& Sha256::update_u64(uint64_t v) {
  update_u32(static_cast<uint32_t>(v));
  return update_u32(static_cast<uint32_t>(v >> 32));
}

Sha256& Sha256::update_string(std::string_view s) {
  update_u64(s.size());
  return update(s.data(), s.size());
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  unsigned int len = 0;
  HEARTH_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out.data(), &len) == 1 && len == out.size(),
               "OpenSSL SHA-256 final failed");
  return out;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

}  // namespace hearth
