// KvCacheManager::cached_prefix_tree on a pool of 16 blocks of 4 tokens: exact nodes (stems, branches, token
// counts, pins, hits), namespace isolation and the limits.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "token_seq.h"

namespace hearth {
namespace {

using testing::concat;
using testing::seq;

class CachedPrefixTreeTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }

  // Admits `tokens`, registers its full blocks, and releases it (its blocks stay cached).
  void run(const std::vector<TokenId>& tokens, const BlockHash& ns) {
    const RequestId id{next_id_++};
    ASSERT_TRUE(kv_.admit(id, ns, tokens, static_cast<int32_t>(tokens.size()), true).has_value());
    kv_.complete_copies();
    kv_.cache_full_blocks(id, tokens, static_cast<int32_t>(tokens.size()));
    kv_.release(id);
  }

  KvCacheManager kv_{{.num_blocks = 16, .block_size = 4, .max_pinned_blocks = 8}};
  BlockHash ns_ = CacheNamespace{.model_fingerprint = "test-model"}.digest();
  BlockHash salted_ = CacheNamespace{.model_fingerprint = "test-model", .cache_salt = "tenant-b"}.digest();
  uint64_t next_id_ = 1;
  std::vector<TokenId> stem_ = seq(100, 8);  // two full blocks shared by every prompt below
};

TEST_F(CachedPrefixTreeTest, EmptyNamespaceHasNoNodes) {
  const CachedPrefixTree tree = kv_.cached_prefix_tree(ns_, {});
  EXPECT_TRUE(tree.nodes.empty());
  EXPECT_EQ(tree.num_blocks, 0);
  EXPECT_FALSE(tree.truncated);
}

TEST_F(CachedPrefixTreeTest, OneChainIsOneNode) {
  run(concat({stem_, seq(200, 4)}), ns_);
  const CachedPrefixTree tree = kv_.cached_prefix_tree(ns_, {});
  ASSERT_EQ(tree.nodes.size(), 1u);
  const CachedPrefixNode& n = tree.nodes[0];
  EXPECT_EQ(n.parent, -1);
  EXPECT_EQ(n.num_blocks, 3);
  EXPECT_EQ(n.num_tokens, 12);
  EXPECT_EQ(n.depth_tokens, 12);
  EXPECT_EQ(n.tokens, concat({stem_, seq(200, 4)}));
  EXPECT_EQ(n.num_blocks_in_use, 0);
  EXPECT_EQ(n.num_hits, 0u);
  EXPECT_EQ(tree.num_blocks, 3);
}

TEST_F(CachedPrefixTreeTest, SharedStemBranchesPerUserMostRecentFirst) {
  run(concat({stem_, seq(200, 8)}), ns_);  // user A: stem + 2 blocks
  run(concat({stem_, seq(300, 4)}), ns_);  // user B: stem + 1 block; hits the stem
  const CachedPrefixTree tree = kv_.cached_prefix_tree(ns_, {});
  ASSERT_EQ(tree.nodes.size(), 3u);
  EXPECT_EQ(tree.nodes[0].parent, -1);
  EXPECT_EQ(tree.nodes[0].tokens, stem_);
  EXPECT_EQ(tree.nodes[0].num_blocks, 2);
  EXPECT_EQ(tree.nodes[0].num_hits, 1u);  // B's admission shared it
  // B used its branch last, so it comes first.
  EXPECT_EQ(tree.nodes[1].parent, 0);
  EXPECT_EQ(tree.nodes[1].tokens, seq(300, 4));
  EXPECT_EQ(tree.nodes[1].depth_tokens, 12);
  EXPECT_EQ(tree.nodes[2].parent, 0);
  EXPECT_EQ(tree.nodes[2].tokens, seq(200, 8));
  EXPECT_EQ(tree.nodes[2].num_blocks, 2);
  EXPECT_EQ(tree.nodes[2].depth_tokens, 16);
  EXPECT_GT(tree.nodes[1].last_used, tree.nodes[2].last_used);
  EXPECT_LE(tree.nodes[1].last_used, tree.clock);
  EXPECT_EQ(tree.num_blocks, 5);
}

TEST_F(CachedPrefixTreeTest, PartlyFilledTailIsALeafWithItsTokens) {
  const auto prompt = concat({stem_, seq(200, 3)});
  const RequestId id{next_id_++};
  ASSERT_TRUE(kv_.admit(id, ns_, prompt, 11, true).has_value());
  kv_.cache_full_blocks(id, prompt, 11);
  kv_.release(id, prompt, 11);  // the 3-token tail is cached as a copy source
  const CachedPrefixTree tree = kv_.cached_prefix_tree(ns_, {});
  ASSERT_EQ(tree.nodes.size(), 1u);
  EXPECT_EQ(tree.nodes[0].num_blocks, 3);
  EXPECT_EQ(tree.nodes[0].num_tokens, 11);
}

TEST_F(CachedPrefixTreeTest, PinsAndRunningRequestsAreCounted) {
  run(concat({stem_, seq(200, 4)}), ns_);
  ASSERT_TRUE(kv_.pin_prefix(ns_, stem_).ok());
  const auto prompt = concat({stem_, seq(300, 5)});
  ASSERT_TRUE(kv_.admit(RequestId{99}, ns_, prompt, 13, true).has_value());
  kv_.cache_full_blocks(RequestId{99}, prompt, 13);
  const CachedPrefixTree tree = kv_.cached_prefix_tree(ns_, {});
  ASSERT_EQ(tree.nodes.size(), 3u);
  EXPECT_EQ(tree.nodes[0].num_blocks_pinned, 2);
  EXPECT_EQ(tree.nodes[0].num_blocks_in_use, 2);
  EXPECT_EQ(tree.nodes[1].tokens, seq(300, 4));  // the running request's block, in use
  EXPECT_EQ(tree.nodes[1].num_blocks_in_use, 1);
  EXPECT_EQ(tree.nodes[1].num_blocks_pinned, 0);
  EXPECT_EQ(tree.nodes[2].num_blocks_in_use, 0);
  kv_.release(RequestId{99});
}

TEST_F(CachedPrefixTreeTest, NeverShowsAnotherNamespace) {
  run(concat({stem_, seq(200, 4)}), ns_);
  run(concat({stem_, seq(300, 8)}), salted_);
  const CachedPrefixTree plain = kv_.cached_prefix_tree(ns_, {});
  ASSERT_EQ(plain.nodes.size(), 1u);
  EXPECT_EQ(plain.nodes[0].tokens, concat({stem_, seq(200, 4)}));
  EXPECT_EQ(plain.num_blocks, 3);
  const CachedPrefixTree salted = kv_.cached_prefix_tree(salted_, {});
  ASSERT_EQ(salted.nodes.size(), 1u);
  EXPECT_EQ(salted.nodes[0].tokens, concat({stem_, seq(300, 8)}));
  EXPECT_EQ(salted.num_blocks, 4);
  const BlockHash unknown = CacheNamespace{.model_fingerprint = "test-model", .cache_salt = "nobody"}.digest();
  EXPECT_TRUE(kv_.cached_prefix_tree(unknown, {}).nodes.empty());
}

TEST_F(CachedPrefixTreeTest, LimitsBoundNodesTokensAndTheWalk) {
  run(concat({stem_, seq(200, 4)}), ns_);
  run(concat({stem_, seq(300, 4)}), ns_);
  run(concat({stem_, seq(400, 4)}), ns_);
  const CachedPrefixTree two = kv_.cached_prefix_tree(ns_, {.max_nodes = 2, .max_node_tokens = 5});
  ASSERT_EQ(two.nodes.size(), 2u);
  EXPECT_TRUE(two.truncated);
  EXPECT_EQ(two.nodes[0].tokens, seq(100, 5));
  EXPECT_EQ(two.nodes[0].num_tokens, 8);  // counts stay whole when the ids are cut
  const CachedPrefixTree walked = kv_.cached_prefix_tree(ns_, {.max_blocks_walked = 1});
  ASSERT_EQ(walked.nodes.size(), 1u);
  EXPECT_EQ(walked.nodes[0].num_blocks, 1);
  EXPECT_TRUE(walked.truncated);
  const CachedPrefixTree all = kv_.cached_prefix_tree(ns_, {});
  EXPECT_EQ(all.nodes.size(), 4u);
  EXPECT_FALSE(all.truncated);
}

TEST_F(CachedPrefixTreeTest, CachedFreeBlocksAreCountedByThePool) {
  run(concat({stem_, seq(200, 4)}), ns_);
  EXPECT_EQ(kv_.pool().num_blocks_cached_free(), 3);
  ASSERT_TRUE(kv_.pin_prefix(ns_, stem_).ok());
  EXPECT_EQ(kv_.pool().num_blocks_cached_free(), 1);
}

}  // namespace
}  // namespace hearth
