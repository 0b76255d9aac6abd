#pragma once
// The eviction policy: which unreferenced block the pool takes next. BlockPool talks to it through EvictionPolicy;
// RetentionQueue is the policy Hearth runs (plain LRU is its special case: every block at one priority).
//
// RetentionQueue keeps one intrusive doubly linked list per level, and a bitmap of the non-empty levels:
//
//   level 0        blocks without a key (they hold nothing worth keeping): taken first
//   level 1 + p    cached blocks of retention priority p (0..100), LRU first; an expired block is at level 1
//
//   victim = head of the lowest non-empty level        (two 64-bit words to scan: O(1) in the pool size)
//
// Within a level, released blocks join at the back (most recently used), so a sequence that releases its blocks
// tail first leaves its tail ahead of its head. Blocks with an expiry above level 1 are also in a set ordered by
// expiry time; expire(now) moves those whose time has come to level 1 (O(log E) each, E = queued blocks with an
// expiry). Pins never reach the queue: a pinned block is referenced.

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace hearth {

inline constexpr int32_t kMaxRetentionPriority = 100;
inline constexpr uint8_t kDefaultRetentionPriority = 50;
// BlockMeta::expires_at when a block never expires.
inline constexpr int64_t kNoExpiry = INT64_MAX;

// Longest retention TTL a request may ask for (30 days).
inline constexpr int64_t kMaxRetentionTtlMs = 30LL * 24 * 3600 * 1000;
// Most retention spans one request may carry (Anthropic allows 4 cache_control breakpoints).
inline constexpr size_t kMaxRetentionSpans = 8;

// Retention a request asks for its leading tokens: every block holding any of tokens [0, num_tokens) gets
// `priority` and, with ttl_ms > 0, an expiry ttl_ms after the request cached or reused it (0: never expires).
struct RetentionSpan {
  int32_t num_tokens = INT32_MAX;
  uint8_t priority = kDefaultRetentionPriority;
  int64_t ttl_ms = 0;
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // Queues unreferenced block i. Requires i not queued, priority <= kMaxRetentionPriority.
  virtual void push(int32_t i, bool has_key, uint8_t priority, int64_t expires_at, int64_t now) = 0;
  // Takes i out of the queue. Requires i queued.
  virtual void remove(int32_t i) = 0;
  // Applies expiries up to `now` (blocks whose expiry passed lose their priority).
  virtual void expire(int64_t now) = 0;
  // The earliest expiry among queued blocks that still hold their priority (nullopt: none), so callers read the
  // clock only when an expiry is pending.
  [[nodiscard]] virtual std::optional<int64_t> next_expiry() const = 0;
  // The block to take next, or nullopt when nothing is queued. Read-only: call expire() first.
  [[nodiscard]] virtual std::optional<int32_t> victim() const = 0;
  // Every queued block, victim first (for tests and invariant checks).
  [[nodiscard]] virtual std::vector<int32_t> order() const = 0;
  virtual int32_t size() const = 0;
  virtual bool contains(int32_t i) const = 0;
  // The queue level of queued block i (0: keyless; 1 + effective priority otherwise).
  virtual int32_t level(int32_t i) const = 0;
  // Queued cached blocks at effective priority p.
  virtual int32_t num_queued_at(int32_t priority) const = 0;
  // Aborts with a message when the lists, counters, bitmap or the expiry set disagree.
  virtual void check_invariants() const = 0;
};

class RetentionQueue final : public EvictionPolicy {
 public:
  static constexpr int32_t kNumLevels = kMaxRetentionPriority + 2;

  explicit RetentionQueue(int32_t num_blocks);

  void push(int32_t i, bool has_key, uint8_t priority, int64_t expires_at, int64_t now) override;
  void remove(int32_t i) override;
  void expire(int64_t now) override;
  [[nodiscard]] std::optional<int64_t> next_expiry() const override {
    return expiring_.empty() ? std::nullopt : std::optional<int64_t>(std::get<0>(*expiring_.begin()));
  }
  [[nodiscard]] std::optional<int32_t> victim() const override;
  [[nodiscard]] std::vector<int32_t> order() const override;
  int32_t size() const override { return size_; }
  bool contains(int32_t i) const override { return links_[i].level >= 0; }
  int32_t level(int32_t i) const override { return links_[i].level; }
  int32_t num_queued_at(int32_t priority) const override { return count_[priority + 1]; }
  void check_invariants() const override;

 private:
  struct Link {
    int32_t prev = -1;
    int32_t next = -1;
    int32_t level = -1;              // -1: not queued
    int64_t expires_at = kNoExpiry;  // with `pushed`, the key in expiring_ while there
    uint64_t pushed = 0;             // when it was queued (the queue's own count)
  };
  void link_back(int32_t i, int32_t level);
  void link_front(int32_t i, int32_t level);
  void unlink(int32_t i);

  std::vector<Link> links_;
  std::array<int32_t, kNumLevels> head_;
  std::array<int32_t, kNumLevels> tail_;
  std::array<int32_t, kNumLevels> count_{};
  std::array<uint64_t, (kNumLevels + 63) / 64> nonempty_{};
  // (expires_at, pushed, block) of queued blocks above level 1: equal expiries go down in the order the blocks were
  // queued, so a chain released tail first keeps its tail ahead of its head at level 1.
  std::set<std::tuple<int64_t, uint64_t, int32_t>> expiring_;
  uint64_t num_pushed_ = 0;
  int32_t size_ = 0;
};

}  // namespace hearth
