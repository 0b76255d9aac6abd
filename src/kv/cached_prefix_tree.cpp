// KvCacheManager::cached_prefix_tree: the read-only walk behind GET /v1/cache.

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace hearth {
namespace {

// Cached children of `parent`, most recently used first (ties: lower block id first, so the order is stable).
std::vector<BlockId> children_by_recency(const BlockPool& pool, const BlockHash& parent) {
  const auto kids = pool.cached_children(parent);
  std::vector<BlockId> out(kids.begin(), kids.end());
  std::sort(out.begin(), out.end(), [&](BlockId a, BlockId b) {
    const uint64_t ua = pool.meta(a).last_used, ub = pool.meta(b).last_used;
    return ua != ub ? ua > ub : a.value < b.value;
  });
  return out;
}

}  // namespace

CachedPrefixTree KvCacheManager::cached_prefix_tree(const BlockHash& ns, const CachedPrefixLimits& limits) const {
  std::vector<BlockId> pinned_list;
  for (const auto& [key, pin] : pins_) pinned_list.insert(pinned_list.end(), pin.blocks.begin(), pin.blocks.end());
  std::sort(pinned_list.begin(), pinned_list.end(), [](BlockId a, BlockId b) { return a.value < b.value; });
  auto is_pinned = [&](BlockId b) {
    return std::binary_search(pinned_list.begin(), pinned_list.end(), b,
                              [](BlockId x, BlockId y) { return x.value < y.value; });
  };

  CachedPrefixTree tree;
  tree.clock = pool_.clock();
  struct Pending {
    BlockId first;
    int32_t parent;
    int32_t depth;  // tokens before `first`
  };
  std::vector<Pending> stack;
  auto push_children = [&](const BlockHash& parent_key, int32_t parent, int32_t depth) {
    const auto kids = children_by_recency(pool_, parent_key);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, parent, depth});
  };
  push_children(ns, -1, 0);
  while (!stack.empty()) {
    if (static_cast<int32_t>(tree.nodes.size()) >= limits.max_nodes || tree.num_blocks >= limits.max_blocks_walked) {
      tree.truncated = true;
      break;
    }
    const Pending next = stack.back();
    stack.pop_back();
    CachedPrefixNode node;
    node.parent = next.parent;
    node.num_hits = pool_.meta(next.first).num_hits;
    BlockId block = next.first;
    for (;;) {
      const BlockMeta& m = pool_.meta(block);
      const auto room = static_cast<size_t>(std::max(0, limits.max_node_tokens)) - node.tokens.size();
      node.tokens.insert(node.tokens.end(), m.tokens.begin(), m.tokens.begin() + std::min(room, m.tokens.size()));
      node.num_tokens += static_cast<int32_t>(m.tokens.size());
      node.num_blocks++;
      node.num_blocks_pinned += is_pinned(block) ? 1 : 0;
      node.num_blocks_in_use += m.ref_cnt > 0 ? 1 : 0;
      node.last_used = std::max(node.last_used, m.last_used);
      tree.num_blocks++;
      const auto kids = pool_.cached_children(m.key);
      if (kids.size() != 1 || tree.num_blocks >= limits.max_blocks_walked) break;
      block = kids.front();
    }
    node.depth_tokens = next.depth + node.num_tokens;
    const auto index = static_cast<int32_t>(tree.nodes.size());
    const BlockHash last_key = pool_.meta(block).key;
    tree.nodes.push_back(std::move(node));
    const size_t num_children = pool_.cached_children(last_key).size();
    if (num_children > 0 && tree.num_blocks >= limits.max_blocks_walked) tree.truncated = true;
    if (num_children > 1) push_children(last_key, index, tree.nodes.back().depth_tokens);
  }
  if (!stack.empty()) tree.truncated = true;
  return tree;
}

}  // namespace hearth
