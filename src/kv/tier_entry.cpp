#include "kv/tier_entry.h"

#include <xxhash.h>

#include <array>
#include <cstring>

namespace hearth {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'K', 'V'};

void put_u16(uint8_t* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// XXH3-64 of entry[0, n) without the retention bytes.
uint64_t entry_checksum(const uint8_t* entry, size_t n) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, entry, kTierRetentionOffset);
  const size_t rest = kTierRetentionOffset + kTierRetentionBytes;
  XXH3_64bits_update(state, entry + rest, n - rest);
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

TierEntryError problem(TierEntryProblem p, std::string message) { return TierEntryError{p, std::move(message)}; }

}  // namespace

std::array<uint8_t, kTierRetentionBytes> encode_tier_retention(const TierRetention& r) {
  std::array<uint8_t, kTierRetentionBytes> out{};
  out[0] = r.priority;
  put_u64(out.data() + 8, static_cast<uint64_t>(r.expires_at_ms));
  return out;
}

TierRetention decode_tier_retention(std::span<const uint8_t, kTierRetentionBytes> bytes) {
  return TierRetention{bytes[0], static_cast<int64_t>(get_u64(bytes.data() + 8))};
}

std::vector<uint8_t> encode_tier_entry(const TierEntryHeader& h, std::span<const uint8_t> payload) {
  HEARTH_CHECK(payload.size() == h.payload_bytes, "payload is {} bytes, header says {}", payload.size(),
               h.payload_bytes);
  HEARTH_CHECK(h.layout.size() <= kTierMaxLayoutBytes && h.tokens.size() <= kTierMaxTokens &&
                   h.payload_bytes <= kTierMaxPayloadBytes,
               "tier entry out of bounds");
  std::vector<uint8_t> out(h.file_bytes());
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, 8);
  put_u32(p + 8, kTierEntryVersion);
  put_u32(p + 12, static_cast<uint32_t>(h.header_bytes()));
  std::memcpy(p + 16, h.key.bytes.data(), 32);
  std::memcpy(p + 48, h.parent_key.bytes.data(), 32);
  std::memcpy(p + 80, h.ns.bytes.data(), 32);
  put_u32(p + 112, static_cast<uint32_t>(h.depth));
  put_u32(p + 116, static_cast<uint32_t>(h.tokens.size()));
  const auto retention = encode_tier_retention(h.retention);
  std::memcpy(p + kTierRetentionOffset, retention.data(), retention.size());
  put_u64(p + 136, static_cast<uint64_t>(h.written_at_ms));
  put_u64(p + 144, h.payload_bytes);
  put_u16(p + 152, static_cast<uint16_t>(h.layout.size()));
  std::memcpy(p + kTierEntryFixedBytes, h.layout.data(), h.layout.size());
  uint8_t* t = p + kTierEntryFixedBytes + h.layout.size();
  for (size_t i = 0; i < h.tokens.size(); ++i) put_u32(t + 4 * i, static_cast<uint32_t>(h.tokens[i].value));
  if (!payload.empty()) std::memcpy(p + h.header_bytes(), payload.data(), payload.size());
  const size_t body = out.size() - 8;
  put_u64(p + body, entry_checksum(p, body));
  return out;
}

Result<TierEntryHeader, TierEntryError> decode_tier_header(std::span<const uint8_t> prefix, uint64_t entry_bytes) {
  using enum TierEntryProblem;
  if (prefix.size() < kTierEntryFixedBytes || entry_bytes < kTierEntryFixedBytes + 8) {
    return problem(kTruncated, "shorter than a tier entry's fixed header");
  }
  const uint8_t* p = prefix.data();
  if (std::memcmp(p, kMagic, 8) != 0) return problem(kBadMagic, "not a Hearth KV tier entry (bad magic)");
  if (const uint32_t v = get_u32(p + 8); v != kTierEntryVersion) {
    return problem(kBadVersion, fmt::format("tier entry format version {} (this build reads {})", v,
                                            kTierEntryVersion));
  }
  TierEntryHeader h;
  const uint32_t header_bytes = get_u32(p + 12);
  std::memcpy(h.key.bytes.data(), p + 16, 32);
  std::memcpy(h.parent_key.bytes.data(), p + 48, 32);
  std::memcpy(h.ns.bytes.data(), p + 80, 32);
  h.depth = static_cast<int32_t>(get_u32(p + 112));
  const uint32_t n_tokens = get_u32(p + 116);
  h.retention = decode_tier_retention(
      std::span<const uint8_t, kTierRetentionBytes>(p + kTierRetentionOffset, kTierRetentionBytes));
  h.written_at_ms = static_cast<int64_t>(get_u64(p + 136));
  h.payload_bytes = get_u64(p + 144);
  const uint16_t layout_bytes = get_u16(p + 152);
  if (n_tokens == 0 || n_tokens > kTierMaxTokens || layout_bytes > kTierMaxLayoutBytes ||
      h.payload_bytes > kTierMaxPayloadBytes || h.depth < 0 ||
      header_bytes != kTierEntryFixedBytes + layout_bytes + 4ull * n_tokens) {
    return problem(kBadSize, "tier entry header sizes are out of bounds or inconsistent");
  }
  if (static_cast<uint64_t>(header_bytes) + h.payload_bytes + 8 != entry_bytes) {
    return problem(entry_bytes < static_cast<uint64_t>(header_bytes) + h.payload_bytes + 8 ? kTruncated : kBadSize,
                   fmt::format("tier entry is {} bytes, its header says {}", entry_bytes,
                               static_cast<uint64_t>(header_bytes) + h.payload_bytes + 8));
  }
  if (prefix.size() < header_bytes) return problem(kTruncated, "tier entry header cut short");
  h.layout.assign(reinterpret_cast<const char*>(p + kTierEntryFixedBytes), layout_bytes);
  const uint8_t* t = p + kTierEntryFixedBytes + layout_bytes;
  h.tokens.resize(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) h.tokens[i] = TokenId{static_cast<int32_t>(get_u32(t + 4 * i))};
  return h;
}

Result<TierEntryHeader, TierEntryError> verify_tier_entry(std::span<const uint8_t> entry,
                                                          std::span<const uint8_t>* payload) {
  auto h = decode_tier_header(entry, entry.size());
  if (!h) return h.error();
  const size_t body = entry.size() - 8;
  if (get_u64(entry.data() + body) != entry_checksum(entry.data(), body)) {
    return problem(TierEntryProblem::kBadChecksum, "tier entry checksum does not match its bytes");
  }
  const BlockHash expected = hash_block(h->parent_key, h->ns, h->tokens);
  if (expected != h->key || (h->depth == 0 && h->parent_key != h->ns)) {
    return problem(TierEntryProblem::kBadKey, "tier entry key does not match its parent, namespace and tokens");
  }
  if (payload) *payload = entry.subspan(h->header_bytes(), h->payload_bytes);
  return h;
}

}  // namespace hearth
