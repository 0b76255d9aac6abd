// The tier entry format: round trip, and every kind of damage is detected (each byte flipped, every truncation, a
// key that does not match its tokens); only the retention bytes may change in place.
#include "kv/tier_entry.h"

#include <gtest/gtest.h>

#include "tier_test_util.h"

namespace hearth {
namespace {

const BlockHash kNs = CacheNamespace{.model_fingerprint = "tier-test"}.digest();

TEST(TierEntry, RoundTrips) {
  auto chain = testing::make_chain(kNs, 2, 100);
  chain.headers[1].retention = {90, 1234567};
  const auto bytes = encode_tier_entry(chain.headers[1], chain.payloads[1]);
  EXPECT_EQ(bytes.size(), chain.headers[1].file_bytes());
  std::span<const uint8_t> payload;
  auto h = verify_tier_entry(bytes, &payload);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->key, chain.headers[1].key);
  EXPECT_EQ(h->parent_key, chain.headers[0].key);
  EXPECT_EQ(h->depth, 1);
  EXPECT_EQ(h->tokens, chain.headers[1].tokens);
  EXPECT_EQ(h->layout, "test-layout");
  EXPECT_EQ(h->retention.priority, 90);
  EXPECT_EQ(h->retention.expires_at_ms, 1234567);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), chain.payloads[1].begin(), chain.payloads[1].end()));
}

TEST(TierEntry, EveryFlippedByteOutsideRetentionIsDetected) {
  auto chain = testing::make_chain(kNs, 1, 64);
  const auto good = encode_tier_entry(chain.headers[0], chain.payloads[0]);
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      auto bad = good;
      bad[i] ^= mask;
      const bool retention = i >= kTierRetentionOffset && i < kTierRetentionOffset + kTierRetentionBytes;
      EXPECT_EQ(verify_tier_entry(bad, nullptr).ok(), retention) << "byte " << i;
    }
  }
}

TEST(TierEntry, EveryTruncationIsDetected) {
  auto chain = testing::make_chain(kNs, 1, 40);
  const auto good = encode_tier_entry(chain.headers[0], chain.payloads[0]);
  for (size_t n = 0; n < good.size(); ++n) {
    const std::span<const uint8_t> cut(good.data(), n);
    EXPECT_FALSE(verify_tier_entry(cut, nullptr).ok()) << n;
    if (n < chain.headers[0].header_bytes()) {
      EXPECT_FALSE(decode_tier_header(cut, good.size()).ok()) << n;
    }
  }
}

TEST(TierEntry, KeyMustMatchItsTokensEvenWithAGoodChecksum) {
  auto chain = testing::make_chain(kNs, 2, 16);
  TierEntryHeader forged = chain.headers[1];
  forged.tokens[0] = TokenId{999};  // key no longer hashes from these tokens; the checksum is computed over them
  const auto bytes = encode_tier_entry(forged, chain.payloads[1]);
  auto h = verify_tier_entry(bytes, nullptr);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().problem, TierEntryProblem::kBadKey);
}

TEST(TierEntry, RetentionChangesInPlace) {
  auto chain = testing::make_chain(kNs, 1, 16);
  auto bytes = encode_tier_entry(chain.headers[0], chain.payloads[0]);
  const auto retention = encode_tier_retention({100, 0});
  std::copy(retention.begin(), retention.end(), bytes.begin() + kTierRetentionOffset);
  auto h = verify_tier_entry(bytes, nullptr);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->retention.priority, 100);
}

}  // namespace
}  // namespace hearth
