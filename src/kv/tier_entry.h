#pragma once
// One KV block as a lower tier stores it: a self-describing, checksummed entry (the disk tier writes one file per
// block; a shared tier such as Redis could store the same bytes under the same key).
//
//   offset size
//   0      8    magic "HEARTHKV"
//   8      4    u32 format version (kTierEntryVersion)
//   12     4    u32 header bytes (offset of the payload)
//   16     32   block key            (kv/block_hash.h: version-stable, covers the namespace and the whole prefix)
//   48     32   parent key           (the namespace digest for the first block of a chain)
//   80     32   namespace digest
//   112    4    u32 depth            (the block's index in its chain, 0 first)
//   116    4    u32 token count
//   120    1    u8 retention priority ┐ retention: the only bytes the checksum skips, so a tier can change them in
//   121    7    reserved (zero)       │ place; damage there only reorders eviction, it never reaches attention
//   128    8    i64 expiry, unix ms   ┘ (0: none)
//   136    8    i64 written at, unix ms
//   144    8    u64 payload bytes
//   152    2    u16 layout length
//   154    ...  layout text (how the payload is laid out: dtypes, shape, block size; the engine compares it)
//   ...    4n   i32 tokens
//   ...    ...  payload (the block's K/V bytes)
//   end-8  8    u64 XXH3-64 of every byte before it except [120, 136)
//
// All integers little-endian. A reader accepts an entry only when the magic, version, every size, the checksum, and
// key == hash_block(parent, namespace, tokens) agree; anything else is corrupt or foreign and is never loaded.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/retention_queue.h"
#include "util/ids.h"
#include "util/result.h"

namespace hearth {

inline constexpr uint32_t kTierEntryVersion = 1;
inline constexpr size_t kTierEntryFixedBytes = 154;
inline constexpr size_t kTierRetentionOffset = 120;
inline constexpr size_t kTierRetentionBytes = 16;
inline constexpr size_t kTierMaxLayoutBytes = 512;
inline constexpr uint32_t kTierMaxTokens = 4096;
inline constexpr uint64_t kTierMaxPayloadBytes = 1ull << 30;

// A pinned block's priority on disk (the pool's pins are "never evicted" within their cap; on disk they are the
// highest priority). kDefaultRetentionPriority is the pool's (kv/retention_queue.h).
inline constexpr uint8_t kPinnedRetentionPriority = kMaxRetentionPriority;

struct TierRetention {
  uint8_t priority = kDefaultRetentionPriority;  // 0-100: higher is evicted later
  int64_t expires_at_ms = 0;  // unix ms; 0: never
};

struct TierEntryHeader {
  BlockHash key;
  BlockHash parent_key;
  BlockHash ns;
  int32_t depth = 0;
  std::vector<TokenId> tokens;
  TierRetention retention;
  int64_t written_at_ms = 0;
  uint64_t payload_bytes = 0;
  std::string layout;

  size_t header_bytes() const { return kTierEntryFixedBytes + layout.size() + 4 * tokens.size(); }
  size_t file_bytes() const { return header_bytes() + payload_bytes + 8; }
};

// kKeyMismatch: sealed with another key, sealed while no key is set, or plain while one is (kv/tier_seal.h).
enum class TierEntryProblem { kTruncated, kBadMagic, kBadVersion, kBadSize, kBadChecksum, kBadKey, kKeyMismatch };
struct TierEntryError {
  TierEntryProblem problem;
  std::string message;
};

// The whole entry (header, payload, checksum). Requires payload.size() == header.payload_bytes and the bounds above.
std::vector<uint8_t> encode_tier_entry(const TierEntryHeader& header, std::span<const uint8_t> payload);

// The header from the first bytes of an entry whose whole size is `entry_bytes` (at least header_bytes() of it must
// be given). Checks magic, version, bounds and that the sizes add up to entry_bytes; not the checksum.
Result<TierEntryHeader, TierEntryError> decode_tier_header(std::span<const uint8_t> prefix, uint64_t entry_bytes);

// Decodes and fully verifies a whole entry: header, checksum, and the key against its parent, namespace and tokens.
// On success *payload views the payload inside `entry`.
Result<TierEntryHeader, TierEntryError> verify_tier_entry(std::span<const uint8_t> entry,
                                                          std::span<const uint8_t>* payload);

// The retention bytes [120, 136) for `r` (what a tier rewrites in place).
std::array<uint8_t, kTierRetentionBytes> encode_tier_retention(const TierRetention& r);
TierRetention decode_tier_retention(std::span<const uint8_t, kTierRetentionBytes> bytes);

}  // namespace hearth
