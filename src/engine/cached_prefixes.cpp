// Engine::cached_prefixes: the kv layer's cached-prefix tree with text and seconds, for GET /v1/cache.

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "engine/engine.h"
#include "engine/explain.h"
#include "engine/kv_tiers.h"

namespace hearth {
namespace {

constexpr auto kClockResolution = std::chrono::milliseconds(250);
constexpr size_t kMaxClockTimes = 20 * 60 * 4;  // 20 minutes at kClockResolution

// `text` cut to at most `max_bytes`, never inside a UTF-8 character.
std::string cut_utf8(std::string text, size_t max_bytes, bool* cut) {
  *cut = text.size() > max_bytes;
  if (!*cut) return text;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  text.resize(n);
  return text;
}

}  // namespace

void Engine::note_pool_clock() {
  const uint64_t clock = kv_->pool().clock();
  const auto now = RequestTimes::Clock::now();
  if (!clock_times_.empty() && clock_times_.back().clock == clock) return;
  // Within the resolution of the entry before, the newest entry moves forward instead of a new one being added.
  if (clock_times_.size() >= 2 && now - clock_times_[clock_times_.size() - 2].time < kClockResolution) {
    clock_times_.back() = {clock, now};
    return;
  }
  clock_times_.push_back({clock, now});
  if (clock_times_.size() > kMaxClockTimes) clock_times_.pop_front();
}

std::optional<double> Engine::seconds_since(uint64_t pool_clock) const {
  // The first record at or after the use: it happened by then (and after the record before).
  const auto it = std::lower_bound(clock_times_.begin(), clock_times_.end(), pool_clock,
                                   [](const ClockTime& c, uint64_t v) { return c.clock < v; });
  const auto now = RequestTimes::Clock::now();
  if (it == clock_times_.end()) return 0.0;  // after the last record: a command between steps just now
  if (it == clock_times_.begin() && clock_times_.size() == kMaxClockTimes) return std::nullopt;  // older than kept
  return std::chrono::duration<double>(now - it->time).count();
}

CachedPrefixes Engine::cached_prefixes(const CachedPrefixQuery& query) const {
  const auto start = RequestTimes::Clock::now();
  const CachedPrefixTree tree = kv_->cached_prefix_tree(cache_namespace(query.cache_salt), query.limits);
  CachedPrefixes out;
  out.num_blocks = tree.num_blocks;
  out.truncated = tree.truncated;
  out.entries.reserve(tree.nodes.size());
  for (const CachedPrefixNode& node : tree.nodes) {
    CachedPrefixEntry e;
    e.parent = node.parent;
    e.text = cut_utf8(token_excerpt(tokenizer_, node.tokens, 0, static_cast<int64_t>(node.tokens.size())),
                      query.max_text_bytes, &e.text_truncated);
    e.text_truncated |= static_cast<int32_t>(node.tokens.size()) < node.num_tokens;
    e.num_tokens = node.num_tokens;
    e.depth_tokens = node.depth_tokens;
    e.num_blocks = node.num_blocks;
    e.num_blocks_pinned = node.num_blocks_pinned;
    e.num_blocks_in_use = node.num_blocks_in_use;
    e.num_hits = node.num_hits;
    e.idle_s = seconds_since(node.last_used);
    e.tiers = {"ram"};
    out.entries.push_back(std::move(e));
  }
  if (tiers_->disk() != nullptr) out.disk = disk_prefixes(query);
  out.engine_ms = std::chrono::duration<double, std::milli>(RequestTimes::Clock::now() - start).count();
  return out;
}

std::vector<DiskPrefixEntry> Engine::disk_prefixes(const CachedPrefixQuery& query) const {
  constexpr size_t kMaxEntriesRead = 1 << 16;
  const BlockHash ns = cache_namespace(query.cache_salt);
  const std::vector<TierEntryInfo> entries = tiers_->disk()->entries(ns, kMaxEntriesRead);  // most recent first
  std::unordered_map<BlockHash, const TierEntryInfo*> by_key;
  std::unordered_set<BlockHash> parents;
  for (const TierEntryInfo& e : entries) {
    by_key.emplace(e.key, &e);
    if (e.depth > 0) parents.insert(e.parent_key);
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<DiskPrefixEntry> out;
  for (const TierEntryInfo& leaf : entries) {
    if (parents.contains(leaf.key)) continue;  // continued on disk: not a chain's end
    if (out.size() >= static_cast<size_t>(query.limits.max_nodes)) break;
    // Up to the chain's first block; a chain missing a block on the way is not reachable, so not listed.
    const TierEntryInfo* e = &leaf;
    int32_t blocks = 1;
    while (e->depth > 0) {
      auto it = by_key.find(e->parent_key);
      if (it == by_key.end()) break;
      e = it->second;
      blocks++;
    }
    if (e->depth != 0) continue;
    DiskPrefixEntry d;
    d.text = cut_utf8(token_excerpt(tokenizer_, e->tokens, 0, static_cast<int64_t>(e->tokens.size())),
                      query.max_text_bytes, &d.text_truncated);
    d.text_truncated |= blocks > 1;
    d.num_blocks = blocks;
    d.num_tokens = (leaf.depth + 1) * config_.block_size;
    d.in_ram = kv_->pool().lookup(leaf.key, leaf.tokens).has_value();
    d.priority = leaf.retention.priority;
    d.hits = leaf.hits;
    d.idle_s = static_cast<double>(std::max<int64_t>(0, now_ms - leaf.last_used_ms)) / 1000.0;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace hearth
