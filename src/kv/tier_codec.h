#pragma once
// TierCodec: the bytes every lower tier stores for one block, and how a read is checked, in one place so the disk
// tier and the Redis tier store the same entries and verify them the same way:
//
//   plain   (no key)   kv/tier_entry.h's entry, named by the block key in hex
//   sealed  (a key)    kv/tier_seal.h's entry (AES-256-GCM around the plain one), named by an HMAC of the block key
//
// An entry that does not match the setting (another key, sealed without a key, plain with one) is foreign:
// kKeyMismatch. A read is accepted only when the entry verifies (checksum, key against its parent, namespace and
// tokens), its key is the one asked for, and its layout is the reader's (open_block).

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/tier_entry.h"
#include "kv/tier_seal.h"
#include "util/result.h"

namespace hearth {

// One block read back from a tier: its verified header and payload.
struct TierBlock {
  TierEntryHeader header;
  std::vector<uint8_t> payload;
};

// Why open_block refused an entry.
enum class TierBlockRefusal { kCorrupt, kKeyMismatch, kOtherBlock, kOtherLayout };
struct TierBlockError {
  TierBlockRefusal refusal;
  std::string message;
};

class TierCodec {
 public:
  // `seal_key` null: plain entries.
  explicit TierCodec(std::shared_ptr<const TierKey> seal_key = nullptr) : seal_key_(std::move(seal_key)) {}

  bool sealed() const { return seal_key_ != nullptr; }
  // The entry's name: the block key in hex, or its HMAC under the key (kv/tier_seal.h).
  std::string entry_name(const BlockHash& key) const;
  // The same name as 32 bytes (what a bounded set of names keeps).
  BlockHash entry_name_digest(const BlockHash& key) const;
  // Where the retention bytes lie in an entry of this setting.
  size_t retention_offset() const { return seal_key_ ? kTierSealRetentionOffset : kTierRetentionOffset; }

  // The whole entry this setting stores. Requirements as encode_tier_entry.
  std::vector<uint8_t> encode(const TierEntryHeader& header, std::span<const uint8_t> payload) const;
  // The header from the first bytes of an entry of `entry_bytes` (the index scan); not the payload's checksum.
  Result<TierEntryHeader, TierEntryError> decode_header(std::span<const uint8_t> prefix, uint64_t entry_bytes) const;
  // Verifies a whole entry (decrypting a sealed one in place). On success *payload views the payload in `entry`.
  Result<TierEntryHeader, TierEntryError> verify(std::span<uint8_t> entry, std::span<const uint8_t>* payload) const;
  // Verifies `entry` as verify() does and accepts it only as block `key` of `layout`.
  Result<TierBlock, TierBlockError> open_block(std::span<uint8_t> entry, const BlockHash& key,
                                               const std::string& layout) const;

 private:
  std::shared_ptr<const TierKey> seal_key_;
};

// The 32 bytes of a 64-digit hex name; nullopt for anything else.
std::optional<BlockHash> block_hash_from_hex(std::string_view hex);

}  // namespace hearth
