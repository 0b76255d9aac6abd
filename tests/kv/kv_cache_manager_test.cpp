// KvCacheManager with a tiny pool (10 blocks of 4 tokens): exact ids, ref counts, reuse lengths, eviction order.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hearth {
namespace {

std::vector<TokenId> seq(int32_t first, int32_t n) {
  std::vector<TokenId> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(TokenId{first + i});
  return out;
}

// `base` with everything from `shared` on replaced by tokens that appear nowhere else.
std::vector<TokenId> diverge(std::vector<TokenId> base, size_t shared) {
  for (size_t i = shared; i < base.size(); ++i) base[i] = TokenId{static_cast<int32_t>(9000 + i)};
  return base;
}

std::vector<int32_t> ids(std::span<const BlockId> blocks) {
  std::vector<int32_t> out;
  for (BlockId b : blocks) out.push_back(b.value);
  return out;
}

class KvCacheManagerTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }

  // Admits, "computes" (copies done, blocks registered), and returns the cached-token count.
  int32_t run(uint64_t id, const std::vector<TokenId>& tokens, const BlockHash& ns) {
    auto admitted = kv_.admit(RequestId{id}, ns, tokens, static_cast<int32_t>(tokens.size()), true);
    EXPECT_TRUE(admitted.has_value());
    kv_.complete_copies();
    kv_.cache_full_blocks(RequestId{id}, tokens, static_cast<int32_t>(tokens.size()));
    kv_.check_invariants();
    return admitted->num_cached_tokens;
  }

  KvCacheManager kv_{{.num_blocks = 10, .block_size = 4, .max_pinned_blocks = 4}};
  BlockHash ns_ = CacheNamespace{.model_fingerprint = "test-model"}.digest();
  std::vector<TokenId> prompt_ = seq(100, 12);  // three full blocks
};

TEST_F(KvCacheManagerTest, ColdRequestTakesFreshBlocksAndCachesThem) {
  EXPECT_EQ(run(1, prompt_, ns_), 0);
  EXPECT_EQ(ids(kv_.block_table(RequestId{1})), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  kv_.release(RequestId{1});
  std::vector<int32_t> queue;
  for (BlockId b : kv_.pool().free_queue()) queue.push_back(b.value);
  EXPECT_EQ(queue, (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 9, 2, 1, 0}));  // tail of the chain evicted first
}

TEST_F(KvCacheManagerTest, ReusesExactlyTheSharedTokens) {
  for (int32_t shared : {0, 3, 4, 5, 9}) {
    KvCacheManager kv({.num_blocks = 10, .block_size = 4});
    ASSERT_TRUE(kv.admit(RequestId{1}, ns_, prompt_, 12, true).has_value());
    kv.cache_full_blocks(RequestId{1}, prompt_, 12);
    kv.release(RequestId{1});
    const auto prompt = diverge(prompt_, shared);
    auto admitted = kv.admit(RequestId{2}, ns_, prompt, 12, true);
    ASSERT_TRUE(admitted.has_value());
    EXPECT_EQ(admitted->num_cached_tokens, shared) << shared << " shared tokens";
    EXPECT_EQ(admitted->num_copied_tokens, shared % 4) << shared << " shared tokens";
    EXPECT_EQ(kv.pending_copies().size(), shared % 4 ? 1u : 0u);
    EXPECT_EQ(kv.counters().num_hit_tokens, static_cast<uint64_t>(shared));
    kv.complete_copies();
    kv.release(RequestId{2});
    kv.check_invariants();
  }
}

TEST_F(KvCacheManagerTest, PartialReuseCopiesIntoAFreshBlock) {
  run(1, prompt_, ns_);
  kv_.release(RequestId{1});
  const auto prompt = diverge(prompt_, 5);
  auto admitted = kv_.admit(RequestId{2}, ns_, prompt, 12, true);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(admitted->num_cached_tokens, 5);
  EXPECT_EQ(admitted->num_copied_tokens, 1);
  EXPECT_EQ(ids(kv_.block_table(RequestId{2})), (std::vector<int32_t>{0, 3, 4}));
  ASSERT_EQ(kv_.pending_copies().size(), 1u);
  EXPECT_EQ(kv_.pending_copies()[0].src, BlockId{1});
  EXPECT_EQ(kv_.pending_copies()[0].dst, BlockId{3});
  EXPECT_EQ(kv_.pending_copies()[0].n_slots, 1);
  EXPECT_EQ(kv_.pool().meta(BlockId{0}).ref_cnt, 1);
  EXPECT_EQ(kv_.pool().meta(BlockId{1}).ref_cnt, 1);  // held as the copy source
  kv_.check_invariants();
  kv_.complete_copies();
  EXPECT_EQ(kv_.pool().meta(BlockId{1}).ref_cnt, 0);
  kv_.release(RequestId{2});
}

TEST_F(KvCacheManagerTest, FullyCachedPromptStillComputesItsLastToken) {
  run(1, prompt_, ns_);
  kv_.release(RequestId{1});
  EXPECT_EQ(run(2, prompt_, ns_), 11);
  // The recomputed last block has the cached block's key, so the table switches to the cached block.
  EXPECT_EQ(ids(kv_.block_table(RequestId{2})), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  kv_.release(RequestId{2});
}

TEST_F(KvCacheManagerTest, SaltsIsolateTenants) {
  const BlockHash salted = CacheNamespace{.model_fingerprint = "test-model", .cache_salt = "alice"}.digest();
  run(1, prompt_, ns_);
  EXPECT_EQ(run(2, prompt_, salted), 0);
  EXPECT_EQ(run(3, prompt_, salted), 11);
  kv_.release(RequestId{1});
  kv_.release(RequestId{2});
  kv_.release(RequestId{3});
}

TEST_F(KvCacheManagerTest, EvictsLeastRecentlyUsedChainFirst) {
  const auto a = seq(100, 8), b = seq(200, 8);
  run(1, a, ns_);
  kv_.release(RequestId{1});
  run(2, b, ns_);
  kv_.release(RequestId{2});
  EXPECT_EQ(run(3, a, ns_), 7);  // a is now the most recently used
  kv_.release(RequestId{3});
  // 6 uncached blocks are free; a 28-token request needs 7, so exactly one cached block goes: b's tail.
  EXPECT_EQ(run(4, seq(500, 28), ns_), 0);
  EXPECT_EQ(kv_.pool().num_evictions(), 1u);
  kv_.release(RequestId{4});
  EXPECT_EQ(kv_.find_longest_prefix(ns_, b, 8).num_tokens(), 4);  // b lost its tail, kept its head
  EXPECT_EQ(kv_.find_longest_prefix(ns_, a, 8).num_tokens(), 8);  // a is untouched
}

TEST_F(KvCacheManagerTest, AdmitReportsNoRoomWithoutChangingAnything) {
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, seq(0, 32), 32, true).has_value());  // 8 of 10 blocks
  EXPECT_FALSE(kv_.admit(RequestId{2}, ns_, seq(100, 12), 12, true).has_value());
  EXPECT_FALSE(kv_.is_active(RequestId{2}));
  EXPECT_EQ(kv_.pool().num_blocks_free(), 2);
  EXPECT_FALSE(kv_.allocate_slots(RequestId{1}, 44));  // needs 3 more
  EXPECT_EQ(kv_.block_table(RequestId{1}).size(), 8u);
  EXPECT_TRUE(kv_.allocate_slots(RequestId{1}, 40));
  EXPECT_EQ(kv_.pool().num_blocks_free(), 0);
  kv_.release(RequestId{1});
  EXPECT_EQ(kv_.pool().num_blocks_free(), 10);
}

TEST_F(KvCacheManagerTest, PinnedPrefixSurvivesPressure) {
  run(1, prompt_, ns_);
  kv_.release(RequestId{1});
  auto pin = kv_.pin_prefix(ns_, prompt_);
  ASSERT_TRUE(pin.ok()) << pin.error().message;
  EXPECT_EQ(pin->num_tokens, 12);
  EXPECT_EQ(kv_.num_blocks_pinned(), 3);
  // Fill the rest of the pool twice over; the pinned blocks are never taken.
  EXPECT_EQ(run(2, seq(500, 28), ns_), 0);
  kv_.release(RequestId{2});
  EXPECT_EQ(run(3, seq(700, 28), ns_), 0);
  kv_.release(RequestId{3});
  EXPECT_FALSE(kv_.admit(RequestId{4}, ns_, seq(900, 32), 32, true).has_value());
  EXPECT_EQ(run(5, prompt_, ns_), 11);
  kv_.release(RequestId{5});
  EXPECT_TRUE(kv_.unpin(pin->key));
  EXPECT_FALSE(kv_.unpin(pin->key));
  EXPECT_EQ(kv_.num_blocks_pinned(), 0);
}

TEST_F(KvCacheManagerTest, PinCapAndUncachedPrefixGiveClearErrors) {
  auto nothing = kv_.pin_prefix(ns_, prompt_);
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().message.find("nothing to pin"), std::string::npos);
  run(1, seq(0, 20), ns_);  // five full blocks, cap is four
  auto too_big = kv_.pin_prefix(ns_, seq(0, 20));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().message.find("pin cap"), std::string::npos) << too_big.error().message;
  EXPECT_NE(too_big.error().message.find("5 blocks"), std::string::npos) << too_big.error().message;
  auto fits = kv_.pin_prefix(ns_, seq(0, 16));
  EXPECT_TRUE(fits.ok());
  kv_.release(RequestId{1});
  EXPECT_TRUE(kv_.unpin(fits->key));
}

// A cache_salt is a tenant: its pins count against a cap of its own, so one tenant cannot fill the shared cap and
// block another's pins, and a refusal tells a tenant only its own numbers.
TEST(KvCacheManagerPins, EachNamespaceHasItsOwnPinCapWithinTheSharedOne) {
  KvCacheManager kv({.num_blocks = 16, .block_size = 4, .max_pinned_blocks = 6, .max_pinned_blocks_per_namespace = 3});
  const BlockHash alice = CacheNamespace{.model_fingerprint = "m", .cache_salt = "alice"}.digest();
  const BlockHash bob = CacheNamespace{.model_fingerprint = "m", .cache_salt = "bob"}.digest();
  const BlockHash carol = CacheNamespace{.model_fingerprint = "m", .cache_salt = "carol"}.digest();
  auto cache = [&](uint64_t id, const BlockHash& ns, std::vector<TokenId> tokens) {
    const auto n = static_cast<int32_t>(tokens.size());
    ASSERT_TRUE(kv.admit(RequestId{id}, ns, tokens, n, true).has_value());
    kv.cache_full_blocks(RequestId{id}, tokens, n);
    kv.release(RequestId{id});
  };
  cache(1, alice, seq(0, 16));
  cache(2, bob, seq(0, 12));
  cache(3, carol, seq(0, 4));
  auto too_many = kv.pin_prefix(alice, seq(0, 16));  // 4 blocks: past alice's 3
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().message,
            "pinning 4 blocks (16 tokens) would exceed this cache_salt's pin cap: 0 of 3 blocks already pinned by it");
  ASSERT_TRUE(kv.pin_prefix(alice, seq(0, 12)).ok());  // 3 blocks: alice's cap is full, the shared cap is not
  auto alice_more = kv.pin_prefix(alice, seq(0, 4));  // a shorter prefix is a pin of its own
  ASSERT_FALSE(alice_more.ok());
  EXPECT_EQ(alice_more.error().message,
            "pinning 1 blocks (4 tokens) would exceed this cache_salt's pin cap: 3 of 3 blocks already pinned by it");
  auto bob_pin = kv.pin_prefix(bob, seq(0, 12));
  ASSERT_TRUE(bob_pin.ok()) << bob_pin.error().message;  // alice's pins took nothing of bob's room
  auto carol_pin = kv.pin_prefix(carol, seq(0, 4));  // the shared cap (6) is full: no numbers of the others
  ASSERT_FALSE(carol_pin.ok());
  EXPECT_EQ(carol_pin.error().message,
            "pinning 1 blocks (4 tokens) would exceed the server's pin cap, which every cache_salt shares");
  EXPECT_TRUE(kv.unpin(bob_pin->key));
  EXPECT_TRUE(kv.pin_prefix(carol, seq(0, 4)).ok());
  EXPECT_EQ(kv.num_blocks_pinned(), 4);
  kv.check_invariants();
}

TEST_F(KvCacheManagerTest, GeneratedTokensAreCachedForTheNextTurn) {
  auto tokens = seq(100, 6);
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, tokens, 6, true).has_value());
  kv_.cache_full_blocks(RequestId{1}, tokens, 6);
  for (int32_t t = 0; t < 6; ++t) {  // decode six tokens, one per step
    tokens.push_back(TokenId{300 + t});
    ASSERT_TRUE(kv_.allocate_slots(RequestId{1}, static_cast<int32_t>(tokens.size())));
    kv_.cache_full_blocks(RequestId{1}, tokens, static_cast<int32_t>(tokens.size()));
  }
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  kv_.release(RequestId{1});
  auto next_turn = tokens;
  for (int32_t t = 0; t < 5; ++t) next_turn.push_back(TokenId{400 + t});
  EXPECT_EQ(run(2, next_turn, ns_), 12);
  kv_.release(RequestId{2});
}

// A finished sequence's partly filled last block stays cached with its computed tokens: the next turn copies them
// (token-granular reuse) instead of recomputing up to block_size - 1 tokens.
TEST_F(KvCacheManagerTest, PartlyComputedTailIsCachedForCopying) {
  auto tokens = seq(100, 10);  // blocks of 4: two full, a tail of 2
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, tokens, 10, true).has_value());
  kv_.cache_full_blocks(RequestId{1}, tokens, 10);
  tokens.push_back(TokenId{300});  // sampled, never computed: its slot holds nothing
  ASSERT_TRUE(kv_.allocate_slots(RequestId{1}, 11));
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 2);
  kv_.release(RequestId{1}, tokens, 10);
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  const BlockId tail{2};
  EXPECT_EQ(kv_.pool().meta(tail).tokens, seq(108, 2));
  kv_.check_invariants();

  // The next turn: everything computed is reused, the partial tail by copying its two slots.
  auto next = tokens;
  for (int32_t t = 0; t < 5; ++t) next.push_back(TokenId{400 + t});
  auto admitted = kv_.admit(RequestId{2}, ns_, next, static_cast<int32_t>(next.size()), true);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(admitted->num_cached_tokens, 10);
  EXPECT_EQ(admitted->num_copied_tokens, 2);
  ASSERT_EQ(kv_.pending_copies().size(), 1u);
  EXPECT_EQ(kv_.pending_copies()[0].src, tail);
  EXPECT_EQ(kv_.pending_copies()[0].n_slots, 2);
  kv_.complete_copies();
  kv_.release(RequestId{2});

  // A full-block lookup never finds the tail; a prompt that differs inside it copies only what matches.
  auto other = seq(100, 8);
  other.push_back(TokenId{108});
  other.push_back(TokenId{999});
  other.push_back(TokenId{998});
  auto partly = kv_.admit(RequestId{3}, ns_, other, static_cast<int32_t>(other.size()), true);
  ASSERT_TRUE(partly.has_value());
  EXPECT_EQ(partly->num_cached_tokens, 9);
  EXPECT_EQ(partly->num_copied_tokens, 1);
  kv_.complete_copies();
  kv_.release(RequestId{3});
}

TEST_F(KvCacheManagerTest, TailIsCachedOnlyBehindCachedBlocksAndWithCacheOn) {
  // Cache off: nothing is cached, the tail included.
  auto tokens = seq(100, 6);
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, tokens, 6, /*use_cache=*/false).has_value());
  kv_.release(RequestId{1}, tokens, 6);
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 0);
  // A whole number of blocks leaves no tail; nothing computed leaves none either.
  ASSERT_TRUE(kv_.admit(RequestId{2}, ns_, prompt_, 12, true).has_value());
  kv_.cache_full_blocks(RequestId{2}, prompt_, 12);
  kv_.release(RequestId{2}, prompt_, 12);
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  auto fresh = seq(500, 6);
  ASSERT_TRUE(kv_.admit(RequestId{3}, ns_, fresh, 6, true).has_value());
  kv_.release(RequestId{3}, fresh, 0);
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  // The same tail twice: the second stays uncached, the first keeps its key.
  for (uint64_t id : {4, 5}) {
    ASSERT_TRUE(kv_.admit(RequestId{id}, ns_, fresh, 6, true).has_value());
    kv_.complete_copies();
    kv_.cache_full_blocks(RequestId{id}, fresh, 6);
    kv_.release(RequestId{id}, fresh, 6);
  }
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 5);
}

TEST_F(KvCacheManagerTest, CacheDisabledNeitherReadsNorWrites) {
  run(1, prompt_, ns_);
  kv_.release(RequestId{1});
  auto admitted = kv_.admit(RequestId{2}, ns_, prompt_, 12, /*use_cache=*/false);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(admitted->num_cached_tokens, 0);
  kv_.cache_full_blocks(RequestId{2}, prompt_, 12);
  EXPECT_EQ(kv_.pool().num_blocks_cached(), 3);
  kv_.release(RequestId{2});
}

}  // namespace
}  // namespace hearth
