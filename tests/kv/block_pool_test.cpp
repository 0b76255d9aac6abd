// BlockPool bookkeeping with exact block ids, ref counts and free-queue order.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace hearth {
namespace {

std::vector<int32_t> queue_ids(const BlockPool& pool) {
  std::vector<int32_t> out;
  for (BlockId b : pool.free_queue()) out.push_back(b.value);
  return out;
}

std::vector<TokenId> toks(std::initializer_list<int32_t> v) {
  std::vector<TokenId> out;
  for (int32_t x : v) out.push_back(TokenId{x});
  return out;
}

BlockHash key_of(int n) {
  BlockHash h;
  h.bytes[0] = static_cast<uint8_t>(n);
  h.bytes[31] = 0xAB;
  return h;
}

class BlockPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { pool_.check_invariants(); }
  BlockPool pool_{10, 4};
};

TEST_F(BlockPoolTest, AllocatesFromTheFrontInIdOrder) {
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(pool_.allocate(), BlockId{0});
  EXPECT_EQ(pool_.allocate(), BlockId{1});
  EXPECT_EQ(pool_.meta(BlockId{0}).ref_cnt, 1);
  EXPECT_EQ(pool_.num_blocks_free(), 8);
  EXPECT_EQ(pool_.num_blocks_in_use(), 2);
  pool_.check_invariants();
}

TEST_F(BlockPoolTest, TheHighWaterIsOnePastTheHighestBlockEverHandedOut) {
  EXPECT_EQ(pool_.high_water(), 0);
  BlockId a = *pool_.allocate(), b = *pool_.allocate(), c = *pool_.allocate();
  EXPECT_EQ(pool_.high_water(), 3);
  ASSERT_TRUE(pool_.cache(b, key_of(1), key_of(0), toks({1, 2, 3, 4})));
  pool_.release(a);
  pool_.release(b);
  pool_.release(c);
  // The released blocks are taken again before a never-used one (uncached at the front, then ids in order); the
  // high water stays until a block past it is handed out.
  EXPECT_EQ(pool_.allocate(), c);
  EXPECT_EQ(pool_.allocate(), a);
  EXPECT_EQ(pool_.high_water(), 3);
  EXPECT_EQ(pool_.allocate(), BlockId{3});
  EXPECT_EQ(pool_.high_water(), 4);
  for (BlockId id : {a, c, BlockId{3}}) pool_.release(id);
}

TEST_F(BlockPoolTest, UncachedReleaseGoesToFrontCachedToBack) {
  BlockId a = *pool_.allocate(), b = *pool_.allocate(), c = *pool_.allocate();
  ASSERT_TRUE(pool_.cache(b, key_of(1), key_of(0), toks({1, 2, 3, 4})));
  pool_.release(a);
  pool_.release(b);
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{0, 3, 4, 5, 6, 7, 8, 9, 1}));
  pool_.touch(b);  // a prefix hit takes it back out of the queue
  EXPECT_EQ(pool_.meta(b).ref_cnt, 1);
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{0, 3, 4, 5, 6, 7, 8, 9}));
  pool_.release(b);
  pool_.release(c);
}

TEST_F(BlockPoolTest, EvictsCachedOnlyWhenNothingElseIsFree) {
  std::vector<BlockId> all;
  for (int i = 0; i < 10; ++i) all.push_back(*pool_.allocate());
  EXPECT_FALSE(pool_.allocate().has_value());
  ASSERT_TRUE(pool_.cache(all[3], key_of(3), key_of(0), toks({3, 3, 3, 3})));
  ASSERT_TRUE(pool_.cache(all[4], key_of(4), key_of(3), toks({4, 4, 4, 4})));
  pool_.release(all[4]);  // tail first
  pool_.release(all[3]);
  pool_.release(all[7]);  // uncached: front
  EXPECT_EQ(queue_ids(pool_), (std::vector<int32_t>{7, 4, 3}));
  EXPECT_EQ(pool_.allocate(), BlockId{7});
  EXPECT_EQ(pool_.num_evictions(), 0u);
  EXPECT_EQ(pool_.allocate(), BlockId{4});  // the chain's tail goes first
  EXPECT_EQ(pool_.num_evictions(), 1u);
  EXPECT_FALSE(pool_.lookup(key_of(4), toks({4, 4, 4, 4})).has_value());
  EXPECT_EQ(pool_.lookup(key_of(3), toks({3, 3, 3, 3})), BlockId{3});
  pool_.check_invariants();
  for (int i : {0, 1, 2, 4, 5, 6, 7, 8, 9}) pool_.release(BlockId{i});
}

TEST_F(BlockPoolTest, LookupConfirmsTokensNotJustTheKey) {
  BlockId a = *pool_.allocate();
  ASSERT_TRUE(pool_.cache(a, key_of(9), key_of(0), toks({1, 2, 3, 4})));
  EXPECT_EQ(pool_.lookup(key_of(9), toks({1, 2, 3, 4})), a);
  EXPECT_FALSE(pool_.lookup(key_of(9), toks({1, 2, 3, 5})).has_value());
  BlockId b = *pool_.allocate();
  EXPECT_FALSE(pool_.cache(b, key_of(9), key_of(0), toks({1, 2, 3, 4})));  // key taken: b stays uncached
  EXPECT_FALSE(pool_.meta(b).has_key);
  ASSERT_EQ(pool_.cached_children(key_of(0)).size(), 1u);
  pool_.release(a);
  pool_.release(b);
}

}  // namespace
}  // namespace hearth
