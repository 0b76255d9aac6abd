// Engine::cached_prefixes: the kv layer's cached-prefix tree with text and seconds, for GET /v1/cache.

#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/explain.h"

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
  out.engine_ms = std::chrono::duration<double, std::milli>(RequestTimes::Clock::now() - start).count();
  return out;
}

}  // namespace hearth
