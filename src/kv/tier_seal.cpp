#include "kv/tier_seal.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace hearth {
namespace fs = std::filesystem;
namespace {

constexpr char kSealMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'K', 'S'};
constexpr char kPlainMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'K', 'V'};
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kClearBytes = 24;  // [0, 24): magic, version, h, key id: the AAD of both segments
constexpr size_t kKeyIdOffset = 16;
constexpr size_t kHeaderNonceOffset = 40;
constexpr size_t kHeaderTagOffset = 52;
constexpr size_t kPayloadNonceOffset = 68;
constexpr size_t kPayloadTagOffset = 80;
constexpr size_t kMaxHeaderBytes = kTierEntryFixedBytes + kTierMaxLayoutBytes + 4 * kTierMaxTokens;
constexpr size_t kMaxKeyFileBytes = 65;  // 64 hex digits and a newline

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

TierEntryError problem(TierEntryProblem p, std::string message) {
  return TierEntryError{p, std::move(message)};
}

// AES-256-GCM, fetched from OpenSSL's provider once for the process (as util/sha256.cpp does SHA-256).
const EVP_CIPHER* aes_256_gcm() {
  static const EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

// One AES-256-GCM pass over `data`, in place, authenticating `aad` and `aad_more` too. Encrypting writes the tag to
// `tag`; decrypting checks it and returns false when the bytes, the AAD or the key are not those sealed.
bool gcm(bool encrypt, std::span<const uint8_t, 32> key, const uint8_t* nonce, std::span<const uint8_t> aad,
         std::span<const uint8_t> aad_more, std::span<uint8_t> data, uint8_t* tag) {
  constexpr size_t kChunk = 1u << 28;  // EVP lengths are ints
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
  HEARTH_CHECK(ctx != nullptr && aes_256_gcm() != nullptr, "OpenSSL has no AES-256-GCM");
  int len = 0;
  bool ok = EVP_CipherInit_ex2(ctx.get(), aes_256_gcm(), key.data(), nonce, encrypt ? 1 : 0, nullptr) == 1;
  for (std::span<const uint8_t> a : {aad, aad_more}) {
    ok = ok && (a.empty() || EVP_CipherUpdate(ctx.get(), nullptr, &len, a.data(), static_cast<int>(a.size())) == 1);
  }
  for (size_t at = 0; ok && at < data.size(); at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, data.size() - at));
    ok = EVP_CipherUpdate(ctx.get(), data.data() + at, &len, data.data() + at, n) == 1;
  }
  uint8_t tag_in[kTagBytes];
  if (!encrypt) std::memcpy(tag_in, tag, kTagBytes);
  ok = ok && (encrypt || EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag_in) == 1);
  uint8_t final_out[kTagBytes];  // GCM writes nothing here
  ok = ok && EVP_CipherFinal_ex(ctx.get(), final_out, &len) == 1;
  ok = ok && (!encrypt || EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1);
  HEARTH_CHECK(ok || !encrypt, "OpenSSL AES-256-GCM encryption failed");
  return ok;
}

// HMAC-SHA256(key, data) into out.
void hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data, std::span<uint8_t, 32> out) {
  unsigned int len = 0;
  HEARTH_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(),
                    &len) != nullptr &&
                   len == out.size(),
               "OpenSSL HMAC-SHA256 failed");
}

void derive(std::span<const uint8_t> secret, std::string_view label, std::span<uint8_t> out) {
  std::array<uint8_t, 32> full{};
  hmac_sha256(secret, {reinterpret_cast<const uint8_t*>(label.data()), label.size()}, full);
  std::memcpy(out.data(), full.data(), out.size());
  OPENSSL_cleanse(full.data(), full.size());
}

// The clear part of a sealed entry: h (the sealed header's bytes), once the magic, version, sizes and key id agree.
Result<uint32_t, TierEntryError> check_clear(std::span<const uint8_t> prefix, uint64_t entry_bytes,
                                             std::span<const uint8_t, 8> key_id) {
  using enum TierEntryProblem;
  const uint8_t* p = prefix.data();
  if (prefix.size() >= 8 && std::memcmp(p, kPlainMagic, 8) == 0) {
    return problem(kKeyMismatch, "a plain entry, in a tier whose entries are encrypted");
  }
  if (prefix.size() < kTierSealFixedBytes || entry_bytes < kTierSealFixedBytes + kTierEntryFixedBytes + 8) {
    return problem(kTruncated, "shorter than an encrypted tier entry's fixed header");
  }
  if (std::memcmp(p, kSealMagic, 8) != 0) return problem(kBadMagic, "not a Hearth KV tier entry (bad magic)");
  if (const uint32_t v = get_u32(p + 8); v != kTierSealVersion) {
    return problem(kBadVersion,
                   fmt::format("encrypted tier entry format version {} (this build reads {})", v, kTierSealVersion));
  }
  const uint32_t h = get_u32(p + 12);
  if (h < kTierEntryFixedBytes || h > kMaxHeaderBytes || kTierSealFixedBytes + h + 8 > entry_bytes) {
    return problem(kBadSize, "encrypted tier entry sizes are out of bounds or inconsistent");
  }
  if (std::memcmp(p + kKeyIdOffset, key_id.data(), key_id.size()) != 0) {
    return problem(kKeyMismatch, "encrypted with another key");
  }
  if (prefix.size() < kTierSealFixedBytes + h) return problem(kTruncated, "encrypted tier entry header cut short");
  return h;
}

TierRetention clear_retention(const uint8_t* entry) {
  return decode_tier_retention(
      std::span<const uint8_t, kTierRetentionBytes>(entry + kTierSealRetentionOffset, kTierRetentionBytes));
}

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether `file` lies under `dir`, both resolved (links followed) as far as they exist.
bool lies_inside(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  fs::path real_file = fs::canonical(file, ec);
  if (ec) real_file = fs::absolute(file, ec).lexically_normal();
  fs::path real_dir = fs::weakly_canonical(dir, ec);
  if (ec) real_dir = fs::absolute(dir, ec);
  real_dir = real_dir.lexically_normal();
  if (real_dir.has_relative_path() && real_dir.filename().empty()) real_dir = real_dir.parent_path();
  const fs::path rel = real_file.lexically_relative(real_dir);
  return !rel.empty() && *rel.begin() != "..";
}

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

std::shared_ptr<const TierKey> TierKey::from_secret(std::span<const uint8_t, kTierKeyBytes> secret) {
  std::shared_ptr<TierKey> key(new TierKey());
  derive(secret, "hearth kv-disk cipher key v1", key->cipher_key_);
  derive(secret, "hearth kv-disk entry names v1", key->name_key_);
  derive(secret, "hearth kv-disk key id v1", key->id_);
  return key;
}

TierKey::~TierKey() {
  OPENSSL_cleanse(cipher_key_.data(), cipher_key_.size());
  OPENSSL_cleanse(name_key_.data(), name_key_.size());
  OPENSSL_cleanse(id_.data(), id_.size());
}

std::string TierKey::entry_name(const BlockHash& key) const {
  std::array<uint8_t, 32> name{};
  hmac_sha256(name_key_, key.bytes, name);
  return to_hex(name);
}

std::vector<uint8_t> TierKey::seal(const TierEntryHeader& header, std::span<const uint8_t> payload) const {
  const std::vector<uint8_t> plain = encode_tier_entry(header, payload);
  const size_t h = header.header_bytes();
  std::vector<uint8_t> out(kTierSealFixedBytes + plain.size());
  uint8_t* p = out.data();
  std::memcpy(p, kSealMagic, 8);
  put_u32(p + 8, kTierSealVersion);
  put_u32(p + 12, static_cast<uint32_t>(h));
  std::memcpy(p + kKeyIdOffset, id_.data(), id_.size());
  const auto retention = encode_tier_retention(header.retention);
  std::memcpy(p + kTierSealRetentionOffset, retention.data(), retention.size());
  HEARTH_CHECK(
      RAND_bytes(p + kHeaderNonceOffset, kNonceBytes) == 1 && RAND_bytes(p + kPayloadNonceOffset, kNonceBytes) == 1,
      "OpenSSL cannot draw random nonces");
  std::memcpy(p + kTierSealFixedBytes, plain.data(), plain.size());
  std::fill_n(p + kTierSealFixedBytes + kTierRetentionOffset, kTierRetentionBytes, 0);  // kept in clear instead
  const std::span<const uint8_t> clear(p, kClearBytes);
  gcm(true, cipher_key_, p + kHeaderNonceOffset, clear, {}, {p + kTierSealFixedBytes, h}, p + kHeaderTagOffset);
  gcm(true, cipher_key_, p + kPayloadNonceOffset, clear, {p + kHeaderNonceOffset, kNonceBytes + kTagBytes},
      {p + kTierSealFixedBytes + h, plain.size() - h}, p + kPayloadTagOffset);
  return out;
}

Result<TierEntryHeader, TierEntryError> TierKey::open_header(std::span<const uint8_t> prefix,
                                                             uint64_t entry_bytes) const {
  auto h = check_clear(prefix, entry_bytes, id_);
  if (!h) return h.error();
  const uint8_t* p = prefix.data();
  std::vector<uint8_t> plain(p + kTierSealFixedBytes, p + kTierSealFixedBytes + *h);
  uint8_t tag[kTagBytes];
  std::memcpy(tag, p + kHeaderTagOffset, kTagBytes);
  if (!gcm(false, cipher_key_, p + kHeaderNonceOffset, prefix.first(kClearBytes), {}, plain, tag)) {
    return problem(TierEntryProblem::kBadChecksum, "encrypted tier entry fails authentication (damaged or forged)");
  }
  auto header = decode_tier_header(plain, entry_bytes - kTierSealFixedBytes);
  if (!header) return header.error();
  if (header->header_bytes() != *h) {
    return problem(TierEntryProblem::kBadSize, "encrypted tier entry header size disagrees with its contents");
  }
  header->retention = clear_retention(p);
  return header;
}

Result<TierEntryHeader, TierEntryError> TierKey::open(std::span<uint8_t> entry,
                                                      std::span<const uint8_t>* payload) const {
  auto h = check_clear(entry, entry.size(), id_);
  if (!h) return h.error();
  uint8_t* p = entry.data();
  const std::span<const uint8_t> clear(p, kClearBytes);
  const bool authentic =
      gcm(false, cipher_key_, p + kHeaderNonceOffset, clear, {}, entry.subspan(kTierSealFixedBytes, *h),
          p + kHeaderTagOffset) &&
      gcm(false, cipher_key_, p + kPayloadNonceOffset, clear, {p + kHeaderNonceOffset, kNonceBytes + kTagBytes},
          entry.subspan(kTierSealFixedBytes + *h), p + kPayloadTagOffset);
  if (!authentic) {
    return problem(TierEntryProblem::kBadChecksum, "encrypted tier entry fails authentication (damaged or forged)");
  }
  auto header = verify_tier_entry(entry.subspan(kTierSealFixedBytes), payload);
  if (!header) return header.error();
  if (header->header_bytes() != *h) {
    return problem(TierEntryProblem::kBadSize, "encrypted tier entry header size disagrees with its contents");
  }
  header->retention = clear_retention(p);
  return header;
}

bool is_sealed_tier_entry(std::span<const uint8_t> prefix) {
  return prefix.size() >= 8 && std::memcmp(prefix.data(), kSealMagic, 8) == 0;
}

Result<std::shared_ptr<const TierKey>> load_tier_key(const fs::path& file, const fs::path& tier_dir) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // O_NONBLOCK: a FIFO never blocks
  if (fd < 0) return make_error("cannot open the key file {}: {}", file.string(), std::strerror(errno));
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return make_error("the key file {} is not a regular file", file.string());
  }
  if ((st.st_mode & 077) != 0) {
    return make_error(
        "the key file {} is accessible by other users (mode {:04o}); a key must be private to its "
        "owner: chmod 600 {}",
        file.string(), st.st_mode & 07777, file.string());
  }
  if (lies_inside(file, tier_dir)) {
    return make_error(
        "the key file {} lies inside the disk tier directory {}: keep the key apart from the data it "
        "protects (e.g. /etc/hearth/kv-disk.key)",
        file.string(), tier_dir.string());
  }
  std::array<uint8_t, kMaxKeyFileBytes + 1> bytes{};
  size_t n = 0;
  while (n < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + n, bytes.size() - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return make_error("cannot read the key file {}: {}", file.string(), std::strerror(errno));
    if (r == 0) break;
    n += static_cast<size_t>(r);
  }
  std::array<uint8_t, kTierKeyBytes> secret{};
  bool ok = n == kTierKeyBytes;
  if (ok) {
    std::memcpy(secret.data(), bytes.data(), kTierKeyBytes);
  } else if (n == 2 * kTierKeyBytes || (n == 2 * kTierKeyBytes + 1 && bytes[n - 1] == '\n')) {
    ok = true;
    for (size_t i = 0; i < kTierKeyBytes; ++i) {
      const int hi = hex_value(bytes[2 * i]);
      const int lo = hex_value(bytes[2 * i + 1]);
      ok = ok && hi >= 0 && lo >= 0;
      secret[i] = static_cast<uint8_t>(((hi & 15) << 4) | (lo & 15));
    }
  }
  std::shared_ptr<const TierKey> key = ok ? TierKey::from_secret(secret) : nullptr;
  OPENSSL_cleanse(bytes.data(), bytes.size());
  OPENSSL_cleanse(secret.data(), secret.size());
  if (!key) {
    return make_error(
        "the key file {} holds {} bytes{}; expected 32 random bytes, or 64 hex digits and an optional "
        "newline (e.g. made by `openssl rand -hex 32`)",
        file.string(), static_cast<int64_t>(st.st_size),
        n == 2 * kTierKeyBytes || n == 2 * kTierKeyBytes + 1 ? " that are not all hex digits" : "");
  }
  return key;
}

}  // namespace hearth
