// KvCacheManager::explain_prefix and the reason names.
#include "kv/prefix_explain.h"

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace hearth {

const char* reuse_stop_name(ReuseStop reason) {
  switch (reason) {
    case ReuseStop::kEndOfPrompt:
      return "end_of_prompt";
    case ReuseStop::kDiverged:
      return "diverged";
    case ReuseStop::kEvicted:
      return "evicted";
    case ReuseStop::kDifferentSalt:
      return "different_salt";
    case ReuseStop::kEndOfCachedPrefix:
      return "end_of_cached_prefix";
    case ReuseStop::kNoCachedPrefix:
      return "no_cached_prefix";
    case ReuseStop::kCacheDisabled:
      return "cache_disabled";
    case ReuseStop::kWindowEvicted:
      return "window_evicted";
    case ReuseStop::kNoCheckpoint:
      return "no_checkpoint";
  }
  return "unknown";
}

std::optional<BlockId> KvCacheManager::most_recent_child(const BlockHash& parent) const {
  std::optional<BlockId> best;
  for (BlockId child : pool_.cached_children(parent)) {
    if (!best || pool_.meta(child).last_used > pool_.meta(*best).last_used) best = child;
  }
  return best;
}

std::vector<TokenId> KvCacheManager::cached_continuation(BlockId first, int32_t offset) const {
  std::vector<TokenId> out;
  std::optional<BlockId> block = first;
  while (block && static_cast<int32_t>(out.size()) < PrefixExplanation::kMaxContinuation) {
    const auto& tokens = pool_.meta(*block).tokens;
    const auto n = std::min<size_t>(tokens.size() - offset, PrefixExplanation::kMaxContinuation - out.size());
    out.insert(out.end(), tokens.begin() + offset, tokens.begin() + offset + static_cast<ptrdiff_t>(n));
    offset = 0;
    block = most_recent_child(pool_.meta(*block).key);
  }
  return out;
}

PrefixExplanation KvCacheManager::explain_prefix(const BlockHash& ns, std::span<const TokenId> tokens,
                                                 int32_t max_tokens, std::span<const BlockHash> other_namespaces) const {
  max_tokens = std::min(max_tokens, static_cast<int32_t>(tokens.size()));
  const PrefixMatch match = find_longest_prefix(ns, tokens, max_tokens);
  PrefixExplanation e;
  e.num_tokens = max_tokens;
  e.reuse_stopped_at = match.num_tokens();
  e.num_cached_blocks = static_cast<int32_t>(match.blocks.size());
  e.num_copied_tokens = match.partial_tokens;
  if (e.reuse_stopped_at >= max_tokens) {
    e.reason = ReuseStop::kEndOfPrompt;
    return e;
  }
  const int32_t bs = pool_.block_size();
  if (window_tokens_ > 0 && find_cached_prefix(ns, tokens, max_tokens).num_tokens() > e.reuse_stopped_at) {
    e.reason = ReuseStop::kWindowEvicted;
    e.evicted_block = e.num_cached_blocks;
    return e;
  }
  if (resumable_after_) {
    PrefixMatch kv = find_cached_prefix(ns, tokens, max_tokens);
    fit_to_window(kv);
    if (kv.num_tokens() > e.reuse_stopped_at) {
      e.reason = ReuseStop::kNoCheckpoint;
      e.kv_matched_tokens = kv.num_tokens();
      return e;
    }
  }
  const int32_t block_begin = e.num_cached_blocks * bs;
  const BlockHash parent = match.keys.empty() ? ns : match.keys.back();
  if (block_begin + bs <= static_cast<int32_t>(tokens.size()) &&
      pool_.was_evicted(hash_block(parent, ns, tokens.subspan(block_begin, bs)))) {
    e.reason = ReuseStop::kEvicted;
    e.evicted_block = e.num_cached_blocks;
    return e;
  }
  for (const BlockHash& other : other_namespaces) {
    if (other == ns) continue;
    const int32_t n = find_longest_prefix(other, tokens, max_tokens).num_tokens();
    if (n > e.reuse_stopped_at && n > e.other_namespace_tokens) {
      e.other_namespace = other;
      e.other_namespace_tokens = n;
    }
  }
  if (e.other_namespace_tokens > 0) {
    e.reason = ReuseStop::kDifferentSalt;
    return e;
  }
  const std::optional<BlockId> nearest = match.partial_block ? match.partial_block : most_recent_child(parent);
  if (nearest && e.reuse_stopped_at > 0) {
    e.cached_continuation = cached_continuation(*nearest, e.reuse_stopped_at - block_begin);
    // Every token of a cached partial tail block matched: the cached prefix simply ends there.
    e.reason = e.cached_continuation.empty() ? ReuseStop::kEndOfCachedPrefix : ReuseStop::kDiverged;
    return e;
  }
  if (block_begin + bs > static_cast<int32_t>(tokens.size())) {
    // Only a tail that never fills a block is left, and no cached block continues the prefix.
    e.reason = ReuseStop::kEndOfPrompt;
    return e;
  }
  e.reason = e.reuse_stopped_at > 0 ? ReuseStop::kEndOfCachedPrefix : ReuseStop::kNoCachedPrefix;
  return e;
}

}  // namespace hearth
