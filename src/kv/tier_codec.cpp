#include "kv/tier_codec.h"

namespace hearth {

std::string TierCodec::entry_name(const BlockHash& key) const {
  // A plain tier's names are the block keys: an unkeyed hash of the namespace and the tokens, so whoever can list
  // the store and knows the namespace (the model's fingerprint and the salt) can confirm a guessed prompt. The
  // contents are in clear there anyway. A sealed tier names entries by an HMAC under its key, which confirms nothing.
  return seal_key_ ? seal_key_->entry_name(key) : key.hex();
}

BlockHash TierCodec::entry_name_digest(const BlockHash& key) const {
  if (!seal_key_) return key;
  return block_hash_from_hex(seal_key_->entry_name(key)).value_or(key);
}

std::vector<uint8_t> TierCodec::encode(const TierEntryHeader& header, std::span<const uint8_t> payload) const {
  return seal_key_ ? seal_key_->seal(header, payload) : encode_tier_entry(header, payload);
}

Result<TierEntryHeader, TierEntryError> TierCodec::decode_header(std::span<const uint8_t> prefix,
                                                                 uint64_t entry_bytes) const {
  if (seal_key_) return seal_key_->open_header(prefix, entry_bytes);
  if (is_sealed_tier_entry(prefix)) {
    return TierEntryError{TierEntryProblem::kKeyMismatch, "an encrypted entry, and no key is set"};
  }
  return decode_tier_header(prefix, entry_bytes);
}

Result<TierEntryHeader, TierEntryError> TierCodec::verify(std::span<uint8_t> entry,
                                                          std::span<const uint8_t>* payload) const {
  if (seal_key_) return seal_key_->open(entry, payload);
  if (is_sealed_tier_entry(entry)) {
    return TierEntryError{TierEntryProblem::kKeyMismatch, "an encrypted entry, and no key is set"};
  }
  return verify_tier_entry(entry, payload);
}

Result<TierBlock, TierBlockError> TierCodec::open_block(std::span<uint8_t> entry, const BlockHash& key,
                                                        const std::string& layout) const {
  std::span<const uint8_t> payload;
  auto header = verify(entry, &payload);
  if (!header) {
    const bool mismatch = header.error().problem == TierEntryProblem::kKeyMismatch;
    return TierBlockError{mismatch ? TierBlockRefusal::kKeyMismatch : TierBlockRefusal::kCorrupt,
                          header.error().message};
  }
  if (header->key != key) return TierBlockError{TierBlockRefusal::kOtherBlock, "an entry of another block"};
  if (header->layout != layout) return TierBlockError{TierBlockRefusal::kOtherLayout, "a block of another layout"};
  return TierBlock{std::move(*header), std::vector<uint8_t>(payload.begin(), payload.end())};
}

std::optional<BlockHash> block_hash_from_hex(std::string_view hex) {
  BlockHash h;
  if (hex.size() != 2 * h.bytes.size()) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < h.bytes.size(); ++i) {
    const int hi = digit(hex[2 * i]);
    const int lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    h.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return h;
}

}  // namespace hearth
