// Fuzz target: a disk-tier entry read back from a file someone else may have written (src/kv/tier_entry.h). The
// header decoder and the full verification on arbitrary bytes, as the scan at start and every load run them:
// errors are expected; crashes, out-of-bounds reads and huge allocations are not, and nothing but a well-formed
// entry whose key matches its tokens may verify. The same bytes as an encrypted entry (kv/tier_seal.h), under a fixed
// key: the clear header's bounds are checked before any decryption, and nothing forged without the key opens.

#include <cstdint>
#include <span>

#include <memory>
#include <vector>

#include "kv/tier_entry.h"
#include "kv/tier_seal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)hearth::decode_tier_header(bytes, size);
  (void)hearth::decode_tier_header(bytes, size + 1);  // a file longer than what was read
  std::span<const uint8_t> payload;
  auto h = hearth::verify_tier_entry(bytes, &payload);
  if (h) {
    HEARTH_CHECK(h->file_bytes() == size, "a verified entry's sizes add up");
    HEARTH_CHECK(payload.size() == h->payload_bytes && payload.data() + payload.size() <= data + size,
                 "the payload lies inside the entry");
    HEARTH_CHECK(h->key == hearth::hash_block(h->parent_key, h->ns, h->tokens), "a verified key matches");
  }
  static const std::shared_ptr<const hearth::TierKey> key = [] {
    std::array<uint8_t, hearth::kTierKeyBytes> secret{};
    secret.fill(7);
    return hearth::TierKey::from_secret(secret);
  }();
  (void)key->open_header(bytes, size);
  (void)key->open_header(bytes, size + 1);
  std::vector<uint8_t> copy(data, data + size);
  (void)key->open(copy, nullptr);  // decrypts in place
  return 0;
}
