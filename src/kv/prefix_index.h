#pragma once
// PrefixIndex: cached blocks by key, and by parent key (for token-granular partial matches). Bookkeeping only:
// it never decides what to cache or evict; BlockPool keeps it in step with the blocks' state.

#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "util/ids.h"

namespace hearth {

class PrefixIndex {
 public:
  size_t size() const { return by_key_.size(); }
  bool contains(const BlockHash& key) const { return by_key_.contains(key); }

  // Requires !contains(key).
  void insert(const BlockHash& key, const BlockHash& parent_key, BlockId block);
  // Requires that `block` is indexed under (key, parent_key).
  void erase(const BlockHash& key, const BlockHash& parent_key, BlockId block);

  std::optional<BlockId> find(const BlockHash& key) const;
  // Blocks whose parent key is `parent_key`, in insertion order.
  std::span<const BlockId> children(const BlockHash& parent_key) const;
  // Total entries over all children lists (equals size() when consistent).
  size_t num_children_entries() const;

 private:
  std::unordered_map<BlockHash, BlockId> by_key_;
  std::unordered_map<BlockHash, std::vector<BlockId>> children_;
};

}  // namespace hearth
