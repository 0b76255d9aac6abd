// Window slabs (block_pool.h, kv_cache_manager.h): the sliding-window layers' K/V of a block is held only while a
// window reads it, idles (findable) afterwards, and a prefix hit is cut back to where every block its next token
// reads still has its slab. Blocks of 4 tokens, a 6-token window: a token at position p reads blocks
// (p - 5) / 4 .. p / 4 on those layers.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_plan.h"
#include "token_seq.h"

namespace hearth {
namespace {

using testing::seq;

constexpr int32_t kBlock = 4;
constexpr int32_t kWindow = 6;

class WindowSlabsTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }

  // Admits `tokens` and computes them in chunks of `chunk` tokens, as the scheduler does (allocate, compute,
  // register); returns the cached-token count. The sequence stays active.
  int32_t run(uint64_t id, const std::vector<TokenId>& tokens, int32_t chunk) {
    const auto n = static_cast<int32_t>(tokens.size());
    auto admitted = kv_.admit(RequestId{id}, ns_, tokens, n, true, {}, chunk);
    EXPECT_TRUE(admitted.has_value());
    if (!admitted) return -1;
    kv_.complete_copies();
    int32_t done = admitted->num_cached_tokens;
    bool first = true;
    while (done < n) {
      const int32_t step = std::min(chunk, n - done);
      if (!first) {
        EXPECT_TRUE(kv_.allocate_slots(RequestId{id}, done + step));
      }
      first = false;
      done += step;
      kv_.cache_full_blocks(RequestId{id}, tokens, done);
      kv_.check_invariants();
    }
    return admitted->num_cached_tokens;
  }

  // Blocks of `id` whose window slab it holds.
  std::vector<int32_t> held(uint64_t id) const {
    std::vector<int32_t> out;
    const auto slabs = kv_.window_table(RequestId{id});
    for (size_t i = 0; i < slabs.size(); ++i) {
      if (slabs[i].value >= 0) out.push_back(static_cast<int32_t>(i));
    }
    return out;
  }

  KvCacheManager kv_{{.num_blocks = 32, .block_size = kBlock, .max_pinned_blocks = 16, .window_tokens = kWindow,
                      .num_window_slabs = 8}};
  BlockHash ns_ = CacheNamespace{.model_fingerprint = "window-test"}.digest();
};

TEST(WindowBlocksHeld, CountsTheBlocksTheNextTokenReads) {
  // Next token at 10 reads 5..10: blocks 1 and 2; at 12 reads 7..12: blocks 1, 2 (not 3: nothing of it is computed).
  EXPECT_EQ(window_blocks_held(10, kWindow, kBlock), 2);
  EXPECT_EQ(window_blocks_held(12, kWindow, kBlock), 2);
  EXPECT_EQ(window_blocks_held(13, kWindow, kBlock), 2);  // reads 8..13: blocks 2, 3
  EXPECT_EQ(window_blocks_held(3, kWindow, kBlock), 1);
  EXPECT_EQ(window_blocks_held(0, kWindow, kBlock), 0);
  EXPECT_EQ(window_blocks_held(1000, 0, kBlock), 250);  // no window: every block
}

TEST_F(WindowSlabsTest, ASequenceHoldsOnlyItsWindow) {
  const auto tokens = seq(100, 40);
  run(1, tokens, 4);
  // 40 computed; the next allocation drops what token 40 does not read (35..40: blocks 8, 9 and the new 10).
  ASSERT_TRUE(kv_.allocate_slots(RequestId{1}, 41));
  EXPECT_EQ(held(1), (std::vector<int32_t>{8, 9, 10}));
  EXPECT_EQ(kv_.pool().num_window_slabs_in_use(), 3);
  // What it let go of idles on its cached blocks (8 slabs: the latest ones are still there).
  EXPECT_EQ(kv_.pool().num_window_slabs_idle(), 5);
  kv_.release(RequestId{1});
  EXPECT_EQ(kv_.pool().num_window_slabs_in_use(), 0);
}

TEST_F(WindowSlabsTest, HeldSlabsMatchThePlanPerUser) {
  // After computing C tokens and taking no more, a user holds ceil(C / bs) blocks and window_blocks_held(C) slabs:
  // what plan_memory charges one user.
  for (int32_t context : {5, 12, 13, 27, 40}) {
    KvCacheManager kv({.num_blocks = 32, .block_size = kBlock, .window_tokens = kWindow, .num_window_slabs = 16});
    const auto tokens = seq(7, context);
    ASSERT_TRUE(kv.admit(RequestId{1}, ns_, tokens, context, true, {}, 1).has_value());
    kv.cache_full_blocks(RequestId{1}, tokens, 1);
    for (int32_t done = 1; done < context; ++done) {  // one token per step, as a decode
      ASSERT_TRUE(kv.allocate_slots(RequestId{1}, done + 1));
      kv.cache_full_blocks(RequestId{1}, tokens, done + 1);
    }
    ASSERT_TRUE(kv.allocate_slots(RequestId{1}, context));  // lets go of what the next token does not read
    EXPECT_EQ(kv.pool().num_blocks_in_use(), (context + kBlock - 1) / kBlock) << context;
    EXPECT_EQ(kv.pool().num_window_slabs_in_use(), window_blocks_held(context, kWindow, kBlock)) << context;
    kv.check_invariants();

    MemoryPlanRequest r;
    r.shape = {6, 1, 8};
    r.block_size = kBlock;
    r.context = context;
    r.costs = {{"x", "x", "x", 6 * 10, 0}};  // 10 bytes per layer and token
    r.dtype = "x";
    r.window = {.n_window_layers = 4, .window_tokens = kWindow};
    const auto plan = plan_memory(r);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const int64_t expected = kv.pool().num_blocks_in_use() * 2 * 10 * kBlock +  // 2 full-attention layers
                             kv.pool().num_window_slabs_in_use() * 4 * 10 * kBlock;
    EXPECT_EQ(plan->requested().kv_bytes, expected) << context;
  }
}

TEST_F(WindowSlabsTest, AHitKeepsTheWindowItReads) {
  const auto first = seq(100, 20);
  run(1, first, 20);  // one chunk: holds every block's slab until it advances
  kv_.release(RequestId{1}, first, 20);
  // 18 tokens shared: the next token (18) reads 13..18, blocks 3 and 4 (4 is copied: 2 of its slots match).
  auto second = seq(100, 18);
  for (int32_t i = 0; i < 6; ++i) second.push_back(TokenId{900 + i});
  EXPECT_EQ(run(2, second, 24), 18);
  ASSERT_EQ(kv_.pending_copies().size(), 0u);  // done in run()
  EXPECT_EQ(held(2), (std::vector<int32_t>{4, 5}));  // after all 24: the next token reads 19..24
  // Block 3, which the hit read, idles with its slab still attached: a later hit on those 18 tokens finds it.
  const BlockId block3 = kv_.block_table(RequestId{2})[3];
  ASSERT_TRUE(kv_.pool().window_slab(block3).has_value());
  EXPECT_EQ(kv_.pool().window_slab_ref_cnt(block3), 0);
}

TEST_F(WindowSlabsTest, AHitIsCutBackWhereAWindowSlabWasEvicted) {
  const auto first = seq(100, 24);
  run(1, first, 4);
  kv_.release(RequestId{1}, first, 24);
  // 8 slabs: another request whose first chunk needs all of them evicts every idle one of the first chain, the
  // passed-over ones first, then the window kept at its end.
  run(2, seq(500, 32), 32);
  kv_.release(RequestId{2});
  EXPECT_GT(kv_.pool().num_window_slab_evictions(), 0u);
  // The first chain's blocks are all still cached (32 blocks), but none has its slab: nothing can be reused.
  const auto again = seq(100, 24);
  const PrefixMatch match = kv_.find_longest_prefix(ns_, again, 23);
  EXPECT_EQ(match.num_tokens(), 0);
  const PrefixExplanation e = kv_.explain_prefix(ns_, again, 23);
  EXPECT_EQ(e.reason, ReuseStop::kWindowEvicted);
  EXPECT_EQ(e.reuse_stopped_at, 0);
  // Recomputing it brings the slabs back, and the next hit reuses 20 tokens.
  EXPECT_EQ(run(3, again, 4), 0);
  kv_.release(RequestId{3}, again, 24);
  auto longer = seq(100, 20);
  longer.push_back(TokenId{7});
  EXPECT_EQ(run(4, longer, 4), 20);
}

TEST_F(WindowSlabsTest, PassedOverSlabsAreEvictedBeforeAnEndWindow) {
  // The first chain's end window (where its next turn hits) outlives the slabs a later long run passes over.
  const auto first = seq(100, 24);
  run(1, first, 4);
  kv_.release(RequestId{1}, first, 24);
  run(2, seq(500, 60), 4);  // 15 blocks one after the other: it recycles passed-over slabs, its own included
  kv_.release(RequestId{2});
  auto next = seq(100, 24);
  next.push_back(TokenId{1});
  EXPECT_EQ(run(3, next, 4), 24);
  kv_.release(RequestId{3});
}

TEST_F(WindowSlabsTest, AHitNeedsOnlyTheLastWindow) {
  // A chain whose early slabs were evicted but whose last window remains is reused whole.
  const auto first = seq(100, 40);
  run(1, first, 4);
  kv_.release(RequestId{1}, first, 40);
  ASSERT_FALSE(kv_.pool().window_slab(kv_.find_longest_prefix(ns_, first, 40).blocks.front()).has_value());
  auto next = seq(100, 40);
  next.push_back(TokenId{1});
  EXPECT_EQ(run(2, next, 4), 40);
}

TEST_F(WindowSlabsTest, APinHoldsTheWindowAtItsEnd) {
  const auto first = seq(100, 16);
  run(1, first, 16);
  kv_.release(RequestId{1}, first, 16);
  auto pinned = kv_.pin_prefix(ns_, first);
  ASSERT_TRUE(pinned.ok()) << pinned.error().message;
  EXPECT_EQ(pinned->num_tokens, 16);
  EXPECT_EQ(kv_.pool().num_window_slabs_in_use(), 2);  // a hit at 16 reads 11..16: blocks 2, 3
  run(2, seq(500, 60), 4);                               // cycles every other slab
  kv_.release(RequestId{2});
  auto next = seq(100, 16);
  next.push_back(TokenId{1});
  EXPECT_EQ(run(3, next, 4), 16);
  kv_.release(RequestId{3});
  EXPECT_TRUE(kv_.unpin(pinned->key));
  EXPECT_EQ(kv_.pool().num_window_slabs_in_use(), 0);
}

TEST_F(WindowSlabsTest, AdmissionWaitsForSlabs) {
  KvCacheManager kv({.num_blocks = 32, .block_size = kBlock, .window_tokens = kWindow, .num_window_slabs = 3});
  const auto a = seq(100, 12);
  ASSERT_TRUE(kv.admit(RequestId{1}, ns_, a, 12, true, {}, 12).has_value());  // blocks 0..2: all three slabs
  EXPECT_FALSE(kv.admit(RequestId{2}, ns_, seq(300, 4), 4, true, {}, 4).has_value());
  kv.cache_full_blocks(RequestId{1}, a, 12);
  ASSERT_TRUE(kv.allocate_slots(RequestId{1}, 13));  // token 12 reads 7..12: blocks 1, 2, 3; block 0's slab idles
  EXPECT_FALSE(kv.allocate_slots(RequestId{1}, 40));  // would need 8 more slabs; nothing changes
  EXPECT_EQ(kv.block_table(RequestId{1}).size(), 4u);
  kv.release(RequestId{1});
  ASSERT_TRUE(kv.admit(RequestId{2}, ns_, seq(300, 4), 4, true, {}, 4).has_value());
  kv.check_invariants();
}

TEST_F(WindowSlabsTest, ADuplicateBlockTakesTheCachedOnesSlab) {
  // Two requests compute the same prompt at once: the second's blocks are swapped for the first's when registered,
  // slabs included.
  const auto tokens = seq(100, 8);
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, tokens, 8, true, {}, 8).has_value());
  ASSERT_TRUE(kv_.admit(RequestId{2}, ns_, tokens, 8, true, {}, 8).has_value());
  kv_.cache_full_blocks(RequestId{1}, tokens, 8);
  kv_.cache_full_blocks(RequestId{2}, tokens, 8);
  kv_.check_invariants();
  EXPECT_EQ(kv_.block_table(RequestId{1})[1], kv_.block_table(RequestId{2})[1]);
  EXPECT_EQ(kv_.window_table(RequestId{1})[1], kv_.window_table(RequestId{2})[1]);
  EXPECT_EQ(kv_.pool().num_window_slabs_in_use(), 2);
  kv_.release(RequestId{1});
  kv_.release(RequestId{2});
}

TEST_F(WindowSlabsTest, TierInsertGivesTheChainsEndItsSlabs) {
  const auto tokens = seq(100, 20);
  std::vector<BlockId> filled;
  const int32_t inserted = kv_.insert_chain(ns_, tokens, 5, [&](int32_t, BlockId b, uint8_t*, int64_t*) {
    filled.push_back(b);
    return true;
  });
  EXPECT_EQ(inserted, 5);
  // A hit at 20 reads 15..20: blocks 3 and 4 have slabs, the earlier ones need none.
  for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(kv_.pool().window_slab(filled[i]).has_value(), i >= 3) << i;
  auto next = seq(100, 20);
  next.push_back(TokenId{1});
  EXPECT_EQ(run(1, next, 4), 20);
  kv_.release(RequestId{1});
}

}  // namespace
}  // namespace hearth
