#pragma once
// Tier entries encrypted at rest (`hearth serve --kv-disk-key FILE`): AES-256-GCM around the plain entry of
// kv/tier_entry.h, so neither the token ids, nor the block keys (hashes of them), nor the K/V bytes reach the disk
// in clear. A sealed entry:
//
//   offset size
//   0      8    magic "HEARTHKS" (a plain entry's is "HEARTHKV")  ┐ in clear, authenticated: the AAD of both
//   8      4    u32 seal format version (kTierSealVersion)         │ segments below
//   12     4    u32 h: the sealed header's bytes                   │
//   16     8    key id: tells another key without decrypting      ┘
//   24     16   retention (kv/tier_entry.h's 16 bytes): in clear and unauthenticated, rewritten in place
//   40     12   header nonce  ┐ random per entry (RAND_bytes): 2^32 entries under one key keep the chance of a
//   52     16   header tag    │ repeated nonce below 2^-32, and a tier holds millions at most
//   68     12   payload nonce │
//   80     16   payload tag   ┘
//   96     h    header ciphertext:  the plain entry's bytes [0, h): key, parent, namespace, depth, tokens, layout
//   96+h   ...  payload ciphertext: the plain entry's bytes [h, end): the K/V bytes and their XXH3-64
//
// Two segments, so the scan at open() authenticates and reads the headers alone (the index needs their keys and
// tokens) without reading every payload, as it does with plain entries. The payload's AAD also holds the header's
// nonce and tag, so a payload never passes with another entry's header. Decrypted, an entry is verified exactly as
// a plain one (checksum, key against its tokens, sizes). The plain entry's own retention bytes are zero inside.
//
// In clear on disk: the format, that an entry is sealed and by which key id, the retention (a priority 0-100 and
// an expiry: what eviction needs to change in place, never content), the sizes (a block's token count and K/V bytes
// are the model's shape, the same for every block) and the file times. File names are keyed too
// (TierKey::entry_name): a plain tier names entries by their block key, an unkeyed SHA-256 of the namespace and
// the tokens, so whoever can list the directory could confirm a guessed prompt; HMAC names confirm nothing.

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/tier_entry.h"
#include "util/result.h"

namespace hearth {

inline constexpr uint32_t kTierSealVersion = 1;
inline constexpr size_t kTierSealFixedBytes = 96;
inline constexpr size_t kTierSealRetentionOffset = 24;
inline constexpr size_t kTierKeyBytes = 32;

// The secret of --kv-disk-key, kept only as what is derived from it (HMAC-SHA256 of the secret over a label each):
// the cipher key, the key of entry names, and the key id. The secret itself is wiped once derived, these on
// destruction (OPENSSL_cleanse); none is ever logged. Immutable, so the tier's threads share it.
class TierKey {
 public:
  [[nodiscard]] static std::shared_ptr<const TierKey> from_secret(std::span<const uint8_t, kTierKeyBytes> secret);
  TierKey(const TierKey&) = delete;
  TierKey& operator=(const TierKey&) = delete;
  ~TierKey();

  // The file name (without extension) of the entry of `key`: HMAC-SHA256 under the names key, in hex.
  std::string entry_name(const BlockHash& key) const;

  // The whole sealed entry of `header` and `payload` (requirements as encode_tier_entry). Aborts only when OpenSSL
  // cannot encrypt or draw a nonce (a broken process: never written with a bad nonce).
  std::vector<uint8_t> seal(const TierEntryHeader& header, std::span<const uint8_t> payload) const;

  // The header of a sealed entry from its first bytes (at least kTierSealFixedBytes + h), whose whole size is
  // `entry_bytes`: checks the clear part, authenticates and decrypts the header segment, then decodes it as
  // decode_tier_header does. kKeyMismatch for a plain entry or one of another key; kBadChecksum when authentication
  // fails.
  Result<TierEntryHeader, TierEntryError> open_header(std::span<const uint8_t> prefix, uint64_t entry_bytes) const;

  // Authenticates and decrypts a whole sealed entry in place, then verifies it as verify_tier_entry does. On success
  // *payload views the payload inside `entry`. `entry` holds plaintext afterwards, whatever the result.
  Result<TierEntryHeader, TierEntryError> open(std::span<uint8_t> entry, std::span<const uint8_t>* payload) const;

 private:
  TierKey() = default;

  std::array<uint8_t, 32> cipher_key_{};
  std::array<uint8_t, 32> name_key_{};
  std::array<uint8_t, 8> id_{};
};

// Whether `prefix` starts like a sealed entry (its magic).
bool is_sealed_tier_entry(std::span<const uint8_t> prefix);

// Reads the key file of --kv-disk-key: 32 raw bytes, or 64 hex digits and an optional newline. Refuses, naming the
// file: a file other users may access in any way (mode & 077, as ssh refuses a private key), anything but a regular
// file, a file inside `tier_dir` (a key never lies beside the data it protects), and any other content. The bytes
// read are wiped before returning.
[[nodiscard]] Result<std::shared_ptr<const TierKey>> load_tier_key(const std::filesystem::path& file,
                                                                   const std::filesystem::path& tier_dir);

}  // namespace hearth
