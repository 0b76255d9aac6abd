#include "kv/prefix_index.h"

#include <algorithm>

#include "util/result.h"

namespace hearth {

void PrefixIndex::insert(const BlockHash& key, const BlockHash& parent_key, BlockId block) {
  const bool inserted = by_key_.emplace(key, block).second;
  HEARTH_CHECK(inserted, "key {} indexed twice", key.hex());
  children_[parent_key].push_back(block);
}

void PrefixIndex::erase(const BlockHash& key, const BlockHash& parent_key, BlockId block) {
  auto it = by_key_.find(key);
  HEARTH_CHECK(it != by_key_.end() && it->second == block, "block {} is not indexed under its key", block.value);
  by_key_.erase(it);
  auto kids = children_.find(parent_key);
  HEARTH_CHECK(kids != children_.end(), "block {} missing from its parent's children", block.value);
  std::erase(kids->second, block);
  if (kids->second.empty()) children_.erase(kids);
}

std::optional<BlockId> PrefixIndex::find(const BlockHash& key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::span<const BlockId> PrefixIndex::children(const BlockHash& parent_key) const {
  auto it = children_.find(parent_key);
  if (it == children_.end()) return {};
  return it->second;
}

size_t PrefixIndex::num_children_entries() const {
  size_t n = 0;
  for (const auto& [parent, kids] : children_) n += kids.size();
  return n;
}

}  // namespace hearth
