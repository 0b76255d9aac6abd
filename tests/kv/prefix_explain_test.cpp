// KvCacheManager::explain_prefix: where reuse stops and why, in exact token indexes and ids.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"

#include "token_seq.h"  // tests/kv

namespace hearth {
namespace {

using testing::concat;
using testing::seq;

class PrefixExplainTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }

  // Admits, "computes" and releases a request, leaving its full blocks cached.
  void run(const std::vector<TokenId>& tokens, const BlockHash& ns) {
    const RequestId id{next_id_++};
    ASSERT_TRUE(kv_.admit(id, ns, tokens, static_cast<int32_t>(tokens.size()), true).has_value());
    kv_.complete_copies();
    kv_.cache_full_blocks(id, tokens, static_cast<int32_t>(tokens.size()));
    kv_.release(id);
    kv_.check_invariants();
  }
  PrefixExplanation explain(const std::vector<TokenId>& tokens, const BlockHash& ns,
                            std::span<const BlockHash> others = {}) {
    return kv_.explain_prefix(ns, tokens, static_cast<int32_t>(tokens.size()) - 1, others);
  }

  uint64_t next_id_ = 1;
  KvCacheManager kv_{{.num_blocks = 300, .block_size = 4, .max_pinned_blocks = 0}};
  BlockHash ns_ = CacheNamespace{.model_fingerprint = "test-model", .block_size = 4}.digest();
};

TEST_F(PrefixExplainTest, TimestampAtToken5DivergesAtToken5WithTheCachedContinuation) {
  const auto base = seq(1000, 500);
  run(base, ns_);
  const auto timestamp = seq(7000, 6);
  const auto stamped = concat({{base.begin(), base.begin() + 5}, timestamp, {base.begin() + 5, base.end()}});
  const PrefixExplanation e = explain(stamped, ns_);
  EXPECT_EQ(e.reason, ReuseStop::kDiverged);
  EXPECT_STREQ(reuse_stop_name(e.reason), "diverged");
  EXPECT_EQ(e.reuse_stopped_at, 5);
  EXPECT_EQ(e.num_cached_blocks, 1);
  EXPECT_EQ(e.num_copied_tokens, 1);  // token 4 of block 1 is copied from the cached block
  EXPECT_EQ(e.num_tokens, 505);
  // The cached prefix goes on with base[5..], across block boundaries, up to the bound.
  const std::vector<TokenId> expected(base.begin() + 5, base.begin() + 5 + PrefixExplanation::kMaxContinuation);
  EXPECT_EQ(e.cached_continuation, expected);
  // The explanation agrees with what admission reuses.
  const RequestId id{99};
  auto admitted = kv_.admit(id, ns_, stamped, static_cast<int32_t>(stamped.size()), true);
  ASSERT_TRUE(admitted.has_value());
  EXPECT_EQ(admitted->num_cached_tokens, e.reuse_stopped_at);
  kv_.complete_copies();
  kv_.release(id);
}

TEST_F(PrefixExplainTest, ReorderedToolListDivergesAtTheFirstDifferingTool) {
  const auto preamble = seq(10, 6);
  const auto t1 = seq(100, 10), t2 = seq(200, 10), t3 = seq(300, 10), t4 = seq(400, 10);
  const auto question = seq(900, 7);
  run(concat({preamble, t1, t2, t3, t4, question}), ns_);
  const auto reordered = concat({preamble, t1, t3, t2, t4, question});
  const PrefixExplanation e = explain(reordered, ns_);
  EXPECT_EQ(e.reason, ReuseStop::kDiverged);
  EXPECT_EQ(e.reuse_stopped_at, 16);  // where t3 now stands instead of t2
  const std::vector<TokenId> cached_head(e.cached_continuation.begin(), e.cached_continuation.begin() + 10);
  EXPECT_EQ(cached_head, t2);
}

TEST_F(PrefixExplainTest, FullyCachedPromptStopsAtItsLastToken) {
  const auto prompt = seq(50, 12);
  run(prompt, ns_);
  const PrefixExplanation e = explain(prompt, ns_);
  EXPECT_EQ(e.reason, ReuseStop::kEndOfPrompt);
  EXPECT_EQ(e.reuse_stopped_at, 11);
  EXPECT_EQ(e.num_cached_blocks, 2);
  EXPECT_EQ(e.num_copied_tokens, 3);
}

TEST_F(PrefixExplainTest, LongerPromptStopsWhereTheCacheEnds) {
  const auto prompt = seq(50, 8);
  run(prompt, ns_);
  const PrefixExplanation e = explain(concat({prompt, seq(600, 9)}), ns_);
  EXPECT_EQ(e.reason, ReuseStop::kEndOfCachedPrefix);
  EXPECT_EQ(e.reuse_stopped_at, 8);
  EXPECT_TRUE(e.cached_continuation.empty());
}

TEST_F(PrefixExplainTest, ColdPromptHasNoCachedPrefix) {
  run(seq(50, 12), ns_);
  const PrefixExplanation e = explain(seq(5000, 12), ns_);
  EXPECT_EQ(e.reason, ReuseStop::kNoCachedPrefix);
  EXPECT_EQ(e.reuse_stopped_at, 0);
}

TEST_F(PrefixExplainTest, SameTokensUnderAnotherSaltAreReportedAsDifferentSalt) {
  const BlockHash salted = CacheNamespace{.model_fingerprint = "test-model", .block_size = 4, .cache_salt = "a"}.digest();
  const auto prompt = seq(50, 12);
  run(prompt, salted);
  EXPECT_EQ(explain(prompt, ns_).reason, ReuseStop::kNoCachedPrefix);  // without candidates it cannot know
  const std::vector<BlockHash> others{ns_, salted};
  const PrefixExplanation e = explain(prompt, ns_, others);
  EXPECT_EQ(e.reason, ReuseStop::kDifferentSalt);
  EXPECT_EQ(e.reuse_stopped_at, 0);
  EXPECT_EQ(e.other_namespace, salted);
  EXPECT_EQ(e.other_namespace_tokens, 11);
}

class PrefixExplainEvictionTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }
  KvCacheManager kv_{{.num_blocks = 10, .block_size = 4, .max_pinned_blocks = 0}};
  BlockHash ns_ = CacheNamespace{.model_fingerprint = "test-model", .block_size = 4}.digest();
};

TEST_F(PrefixExplainEvictionTest, EvictedTailIsReportedAsEvictedAtItsBlock) {
  const auto prompt = seq(100, 12);  // blocks 0, 1, 2
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, prompt, 12, true).has_value());
  kv_.cache_full_blocks(RequestId{1}, prompt, 12);
  kv_.release(RequestId{1});  // free queue: 3..9, then the chain tail first: 2, 1, 0
  // Another request takes 8 blocks: the 7 free ones and the LRU cached one, the prompt's last block.
  const auto other = seq(5000, 32);
  ASSERT_TRUE(kv_.admit(RequestId{2}, ns_, other, 32, true).has_value());
  EXPECT_EQ(kv_.pool().num_evictions(), 1u);
  kv_.release(RequestId{2});
  kv_.check_invariants();
  const PrefixExplanation e = kv_.explain_prefix(ns_, prompt, 11);
  EXPECT_EQ(e.reason, ReuseStop::kEvicted);
  EXPECT_EQ(e.reuse_stopped_at, 8);
  EXPECT_EQ(e.evicted_block, 2);
  // A prompt that only shares the cached part is not blamed on the eviction.
  const auto diverging = concat({seq(100, 8), seq(7000, 4)});
  EXPECT_EQ(kv_.explain_prefix(ns_, diverging, 11).reason, ReuseStop::kEndOfCachedPrefix);
}

}  // namespace
}  // namespace hearth
