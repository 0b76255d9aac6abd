// Retention: the free queue's eviction order by priority, then LRU, then tail first, and expiry against an injected
// clock, on a 10-block pool with exact block ids; and KvCacheManager applying a request's retention spans.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "token_seq.h"

namespace hearth {
namespace {

using testing::seq;

std::vector<int32_t> queue_ids(const BlockPool& pool) {
  std::vector<int32_t> out;
  for (BlockId b : pool.free_queue()) out.push_back(b.value);
  return out;
}

BlockHash key_of(int n) {
  BlockHash h;
  h.bytes[0] = static_cast<uint8_t>(n);
  h.bytes[31] = 0xCD;
  return h;
}

class RetentionTest : public ::testing::Test {
 protected:
  void TearDown() override { pool_.check_invariants(); }

  // Allocates all 10 blocks, caches block i under key i+1 (block 0's parent key 0, each next block's parent the
  // previous one when `chain`, else key 0), so releasing them lets the queue order be read.
  void cache_all(bool chain) {
    for (int i = 0; i < 10; ++i) ASSERT_EQ(pool_.allocate(), BlockId{i});
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(pool_.cache(BlockId{i}, key_of(i + 1), chain && i > 0 ? key_of(i) : key_of(0), seq(i * 4, 4)));
    }
  }

  int64_t now_ = 1000;
  BlockPool pool_{10, 4, [this] { return now_; }};
};

TEST_F(RetentionTest, LowestPriorityFirstThenLeastRecentlyUsed) {
  cache_all(false);
  // Priorities: 0-2 at 90, 3-5 at the default 50, 6-9 at 10; released in id order (so LRU = lowest id).
  for (int i = 0; i < 3; ++i) pool_.set_retention(BlockId{i}, 90, kNoExpiry);
  for (int i = 6; i < 10; ++i) pool_.set_retention(BlockId{i}, 10, kNoExpiry);
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{6, 7, 8, 9, 3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(pool_.num_blocks_evictable_at(10), 4);
  EXPECT_EQ(pool_.num_blocks_evictable_at(50), 3);
  EXPECT_EQ(pool_.num_blocks_evictable_at(90), 3);
  // A hit on 4 makes it the most recently used of its priority, not of the pool.
  pool_.touch(BlockId{4});
  pool_.release(BlockId{4});
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{6, 7, 8, 9, 3, 5, 4, 0, 1, 2}));
  std::vector<int32_t> evicted;
  for (int i = 0; i < 10; ++i) evicted.push_back(pool_.allocate()->value);
  EXPECT_EQ(evicted, (std::vector<int32_t>{6, 7, 8, 9, 3, 5, 4, 0, 1, 2}));
  EXPECT_EQ(pool_.num_evictions(), 10u);
  EXPECT_EQ(pool_.meta(BlockId{0}).priority, kDefaultRetentionPriority);  // an allocated block starts afresh
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
}

TEST_F(RetentionTest, KeylessBlocksGoBeforeAnyCachedOneEvenPriorityZero) {
  cache_all(false);
  pool_.set_retention(BlockId{0}, 0, kNoExpiry);
  pool_.release(BlockId{0});
  BlockId fresh = *pool_.allocate();  // evicts 0: nothing else is free
  EXPECT_EQ(fresh, BlockId{0});
  ASSERT_TRUE(pool_.cache(fresh, key_of(1), key_of(0), seq(0, 4)));
  pool_.set_retention(fresh, 0, kNoExpiry);
  pool_.release(fresh);
  pool_.release(BlockId{5});  // cached at 50
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{0, 5}));
  BlockId keyless = *pool_.allocate();
  EXPECT_EQ(keyless, BlockId{0});
  pool_.release(BlockId{1});
  pool_.release(BlockId{2});
  pool_.release(BlockId{3});
  pool_.release(keyless);  // keyless now: front
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{0, 5, 1, 2, 3}));
  for (int i = 4; i < 10; ++i) {
    if (i != 5) pool_.release(BlockId{i});
  }
}

TEST_F(RetentionTest, AChainReleasedTailFirstLosesItsTailFirstWithinAPriority) {
  cache_all(true);                                                             // one chain 0 → 1 → … → 9
  for (int i = 0; i < 5; ++i) pool_.set_retention(BlockId{i}, 80, kNoExpiry);  // the leading half is retained
  for (int i = 9; i >= 0; --i) pool_.release(BlockId{i});
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  pool_.check_invariants();
  for (int expected : {9, 8, 7}) EXPECT_EQ(pool_.allocate(), BlockId{expected});
  EXPECT_EQ(pool_.lookup(key_of(7), seq(24, 4)), BlockId{6});
  for (int i : {9, 8, 7}) pool_.release(BlockId{i});
}

TEST_F(RetentionTest, AnExpiredBlockDropsToPriorityZeroAndGoesFirst) {
  cache_all(false);
  pool_.set_retention(BlockId{2}, 90, now_ + 5000);  // house rules for 5 s
  pool_.set_retention(BlockId{3}, 90, kNoExpiry);
  pool_.set_retention(BlockId{4}, 20, kNoExpiry);
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{4, 0, 1, 5, 6, 7, 8, 9, 2, 3}));
  now_ += 4999;
  pool_.expire();
  EXPECT_EQ(queue_ids(pool_).front(), 4);
  now_ += 1;  // the expiry itself counts as expired
  pool_.expire();
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{2, 4, 0, 1, 5, 6, 7, 8, 9, 3}));
  EXPECT_EQ(pool_.num_blocks_evictable_at(0), 1);
  EXPECT_EQ(pool_.num_blocks_evictable_at(90), 1);
  EXPECT_EQ(pool_.meta(BlockId{2}).priority, 90);  // what it was given stays readable
  EXPECT_EQ(pool_.allocate(), BlockId{2});
  EXPECT_EQ(pool_.allocate(), BlockId{4});
  pool_.release(BlockId{2});
  pool_.release(BlockId{4});
}

TEST_F(RetentionTest, AChainExpiringAtOnceStillLosesItsTailFirst) {
  cache_all(true);  // one chain 0 → 1 → … → 9
  for (int i = 0; i < 10; ++i) pool_.set_retention(BlockId{i}, 90, now_ + 50);
  for (int i = 9; i >= 0; --i) pool_.release(BlockId{i});
  now_ += 50;
  pool_.expire();
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(pool_.num_blocks_evictable_at(0), 10);
}

TEST_F(RetentionTest, AllocateAppliesExpiriesOnItsOwn) {
  cache_all(false);
  pool_.set_retention(BlockId{7}, 100, now_ + 10);
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
  now_ += 10;
  EXPECT_EQ(pool_.allocate(), BlockId{7});  // without an expire() call first
  pool_.release(BlockId{7});
}

TEST_F(RetentionTest, ABlockReleasedAfterItsExpiryJoinsPriorityZero) {
  cache_all(false);
  pool_.set_retention(BlockId{1}, 70, now_ + 1);
  now_ += 1;
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
  EXPECT_EQ(queue_ids(pool_).front(), 1);
}

TEST_F(RetentionTest, SettingRetentionOnAQueuedBlockMovesIt) {
  cache_all(false);
  for (int i = 0; i < 10; ++i) pool_.release(BlockId{i});
  pool_.set_retention(BlockId{9}, 0, kNoExpiry);
  pool_.set_retention(BlockId{0}, 99, now_ + 100);
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{9, 1, 2, 3, 4, 5, 6, 7, 8, 0}));
  pool_.touch(BlockId{0});  // a referenced block leaves the expiry set with the queue
  now_ += 1000;
  pool_.expire();
  pool_.check_invariants();
  pool_.release(BlockId{0});  // expired while in use: straight to priority 0, behind 9
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{9, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

// KvCacheManager: a request's spans reach its blocks when they are cached, and a hit refreshes them.
class RetentionManagerTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }
  int64_t now_ = 0;
  KvCacheManager kv_{KvCacheConfig{.num_blocks = 10, .block_size = 4, .max_pinned_blocks = 5, .clock = [this] { return now_; }}};
  BlockHash ns_ = key_of(200);
};

TEST_F(RetentionManagerTest, SpansCoverTheBlocksHoldingTheirTokens) {
  const auto prompt = seq(0, 17);  // 4 full blocks and one token
  const std::vector<RetentionSpan> spans{{9, 90, 60'000}, {17, 60, 0}};
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, prompt, 17, true, spans));
  kv_.cache_full_blocks(RequestId{1}, prompt, 17);
  const auto table = kv_.block_table(RequestId{1});
  // Tokens 0..8 touch blocks 0-2 (block 2 holds token 8): 90 for a minute; blocks 3 and the tail: 60 for ever.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(kv_.pool().meta(table[i]).priority, 90) << i;
    EXPECT_EQ(kv_.pool().meta(table[i]).expires_at, 60'000) << i;
  }
  EXPECT_EQ(kv_.pool().meta(table[3]).priority, 60);
  EXPECT_EQ(kv_.pool().meta(table[3]).expires_at, kNoExpiry);
  const BlockId tail = table[4];
  kv_.release(RequestId{1}, prompt, 17);
  EXPECT_EQ(kv_.pool().meta(tail).priority, 60);  // the partly filled tail, cached at release
}

TEST_F(RetentionManagerTest, AHitRefreshesTheTtlAndNeverLowersAPriority) {
  const auto prompt = seq(0, 9);
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, prompt, 9, true, std::vector<RetentionSpan>{{9, 80, 1000}}));
  kv_.cache_full_blocks(RequestId{1}, prompt, 9);
  const BlockId first = kv_.block_table(RequestId{1})[0];
  kv_.release(RequestId{1}, prompt, 9);
  now_ = 500;
  ASSERT_TRUE(kv_.admit(RequestId{2}, ns_, prompt, 9, true, std::vector<RetentionSpan>{{9, 80, 1000}}));
  EXPECT_EQ(kv_.pool().meta(first).expires_at, 1500);  // refreshed by the hit
  kv_.release(RequestId{2}, prompt, 9);
  ASSERT_TRUE(kv_.admit(RequestId{3}, ns_, prompt, 9, true, std::vector<RetentionSpan>{{9, 30, 0}}));
  EXPECT_EQ(kv_.pool().meta(first).priority, 80);  // a lower priority does not lower it
  EXPECT_EQ(kv_.pool().meta(first).expires_at, 1500);
  kv_.release(RequestId{3}, prompt, 9);
  now_ = 2000;  // expired: a lower priority now wins
  ASSERT_TRUE(kv_.admit(RequestId{4}, ns_, prompt, 9, true, std::vector<RetentionSpan>{{9, 30, 0}}));
  EXPECT_EQ(kv_.pool().meta(first).priority, 30);
  EXPECT_EQ(kv_.pool().meta(first).expires_at, kNoExpiry);
  kv_.release(RequestId{4}, prompt, 9);
}

TEST_F(RetentionManagerTest, ARequestWithoutSpansLeavesRetentionAlone) {
  const auto prompt = seq(0, 9);
  ASSERT_TRUE(kv_.admit(RequestId{1}, ns_, prompt, 9, true, std::vector<RetentionSpan>{{4, 95, 0}}));
  kv_.cache_full_blocks(RequestId{1}, prompt, 9);
  const auto table = kv_.block_table(RequestId{1});
  const BlockId first = table[0], second = table[1];
  kv_.release(RequestId{1}, prompt, 9);
  EXPECT_EQ(kv_.pool().meta(second).priority, kDefaultRetentionPriority);
  ASSERT_TRUE(kv_.admit(RequestId{2}, ns_, prompt, 9, true));
  EXPECT_EQ(kv_.pool().meta(first).priority, 95);
  kv_.release(RequestId{2}, prompt, 9);
}

}  // namespace
}  // namespace hearth
