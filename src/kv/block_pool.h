#pragma once
// BlockPool: metadata of every KV block (no tensors): reference count, cache key, last use, retention, and the
// free queue (an EvictionPolicy, retention_queue.h: intrusive lists, so every queue operation is O(1)).
//
// Every block is in exactly one of three states:
//   in use  ref_cnt > 0                     (owned by running sequences or pins; never in the free queue)
//   cached  ref_cnt == 0, has a key          (in the free queue, still findable through the prefix index)
//   free    ref_cnt == 0, no key             (in the free queue)
//
// Free queue order is eviction order, front first:
//
//   front → [free][free] … [priority 0: LRU … MRU] [priority 1 …] … [priority 100: LRU … MRU] ← back
//
// Released blocks without a key go to the front (they hold nothing worth keeping); released cached blocks go to
// the back of their priority's list. A block whose expiry has passed counts as priority 0. A sequence releases its
// blocks tail first, so within a chain of one priority the tail is evicted before the head, and a cached block's
// parent of the same priority is always evicted after it. Retention is applied to prefixes (a request's leading
// blocks), so a parent's priority is at least its child's, unless an expiry demoted the parent first; a child
// that outlives its parent is not lost: the parent's key is content-derived, so recomputing the parent makes the
// child reachable again.
//
// Window slabs (models with sliding-window layers, when the pool is built with some): a block's K/V for the
// sliding-window layers lives in a slab of its own, which the block holds only while it is needed. A slab is free
// or attached to one block; an attached slab is referenced (a running sequence's window, a pin, a copy source) or
// idle in one of two LRU lists: passed over (a running sequence moved past it) or kept (the window at a sequence's
// end, a prefix hit's, a pin's: where the next hit is likely). Taking a slab when none is free evicts the least
// recently idled passed-over one, else the least recently idled kept one: its block loses its sliding-window K/V
// and stays cached for the full-attention layers. Evicting a block frees its slab. So:
//   slab referenced => its block is referenced;   slab idle => its block is cached (has a key).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/prefix_index.h"
#include "kv/recent_keys.h"
#include "kv/retention_queue.h"
#include "util/ids.h"

namespace hearth {

struct BlockMeta {
  int32_t ref_cnt = 0;
  bool has_key = false;
  BlockHash key;
  BlockHash parent_key;         // meaningful when has_key
  std::vector<TokenId> tokens;  // the block's tokens when has_key: a hash hit is confirmed against them
  uint64_t last_used = 0;       // logical clock of the last touch or release
  uint32_t num_hits = 0;        // prefix hits (admissions that shared or copied it) since it was cached
  bool in_free_queue = false;
  // Retention (meaningful when has_key; reset when the block is allocated): eviction takes lower priorities first.
  // expires_at is in the pool's RetentionClock units, by default unix time in milliseconds (not a steady clock, so
  // a disk tier can persist it across restarts); kNoExpiry never expires. Past it, the block counts as priority 0.
  uint8_t priority = kDefaultRetentionPriority;
  int64_t expires_at = kNoExpiry;
  int32_t window_slab = -1;  // the attached window slab, -1: none
};

// The time retention expiries are measured in. The default reads the system clock in unix milliseconds; tests
// inject their own.
using RetentionClock = std::function<int64_t()>;
[[nodiscard]] int64_t unix_time_ms();

class BlockPool {
 public:
  // `num_window_slabs` > 0 gives the pool window slabs (see above); 0: none.
  BlockPool(int32_t num_blocks, int32_t block_size, RetentionClock clock = unix_time_ms, int32_t num_window_slabs = 0);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks_total() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_blocks_free() const { return num_free_; }  // unreferenced: free + cached
  int32_t num_blocks_cached() const { return static_cast<int32_t>(index_.size()); }
  int32_t num_blocks_in_use() const { return num_blocks_total() - num_free_; }
  // One past the highest block id allocate() has handed out. The free queue starts in id order and never-used
  // blocks keep it, so the blocks from here on have never held tokens and are the next to be taken (what the
  // engine's KvPrefaulter commits ahead of use).
  int32_t high_water() const { return high_water_; }
  int32_t num_blocks_cached_free() const { return num_cached_free_; }  // unreferenced and still cached
  uint64_t clock() const { return clock_; }  // the logical clock BlockMeta::last_used is read against
  uint64_t num_evictions() const { return num_evictions_; }
  const BlockMeta& meta(BlockId id) const { return blocks_[id.value]; }

  // True when a block with `key` was evicted recently (a bounded record of the last kRecentEvictions keys), so a
  // miss on it can be explained as an eviction rather than a prefix never seen.
  bool was_evicted(const BlockHash& key) const { return recently_evicted_.contains(key); }
  static constexpr size_t kRecentEvictions = 8192;

  // Applies expiries (expire()), then takes the front of the free queue for new tokens, with ref_cnt 1 and the
  // default retention. If that block was cached, its key is dropped from the index (an eviction). Returns nullopt
  // when every block is in use.
  [[nodiscard]] std::optional<BlockId> allocate();

  // Adds a reference (a prefix hit, a copy source, a pin). An unreferenced block leaves the free queue.
  void touch(BlockId id);

  // Counts a prefix hit on a cached block (BlockMeta::num_hits); no reference changes. Requires has_key.
  void record_hit(BlockId id);

  // Drops a reference. At zero the block joins the free queue: at the back when cached, else the front.
  // Requires ref_cnt > 0.
  void release(BlockId id);

  // Registers an in-use block under `key`. If another block already holds `key`, nothing changes and false is
  // returned (the caller keeps its block uncached). Requires ref_cnt > 0 and 1 <= tokens.size() <= block_size; a
  // block with fewer tokens (a sequence's partly filled tail) is a source for token-granular copies only, since
  // its key (which counts its tokens) never equals a full block's.
  bool cache(BlockId id, const BlockHash& key, const BlockHash& parent_key, std::span<const TokenId> tokens);

  // Sets cached block `id`'s retention: priority in [0, kMaxRetentionPriority], expires_at in clock units or
  // kNoExpiry. An unreferenced block moves to the back of its new priority's list. Requires has_key.
  void set_retention(BlockId id, uint8_t priority, int64_t expires_at);

  // Unreferenced cached blocks whose expiry has passed drop to priority 0 (their stored priority is kept, so the
  // retention they were given can still be read). allocate() calls it; free_queue() shows the order after the last
  // call. O(log E) per expired block, E = queued blocks with an expiry.
  void expire();

  // The pool's clock now (RetentionClock units).
  int64_t now() const { return clock_now_(); }

  // Unreferenced cached blocks whose effective priority (0 once expired) is `priority`.
  int32_t num_blocks_evictable_at(int32_t priority) const { return queue_->num_queued_at(priority); }

  // Window slabs. The slab attached to `id`, if any.
  std::optional<BlockId> window_slab(BlockId id) const {
    const int32_t s = blocks_[id.value].window_slab;
    return s < 0 ? std::nullopt : std::optional<BlockId>(BlockId{s});
  }
  int32_t window_slab_ref_cnt(BlockId id) const {
    const int32_t s = blocks_[id.value].window_slab;
    return s < 0 ? 0 : slabs_[s].ref_cnt;
  }
  int32_t num_window_slabs_total() const { return static_cast<int32_t>(slabs_.size()); }
  int32_t num_window_slabs_free() const { return num_slabs_unreferenced_; }  // free + idle
  int32_t num_window_slabs_in_use() const { return num_window_slabs_total() - num_slabs_unreferenced_; }
  int32_t num_window_slabs_idle() const { return num_slabs_idle_; }
  uint64_t num_window_slab_evictions() const { return num_slab_evictions_; }
  // Attaches a slab to referenced block `id` (which has none), with one reference: a free one, else the least
  // recently idled one, detached from its block. False when every slab is referenced.
  [[nodiscard]] bool attach_window_slab(BlockId id);
  // Adds a reference to `id`'s slab (an idle one leaves the LRU list). Requires one attached.
  void touch_window_slab(BlockId id);
  // Drops a reference to `id`'s slab. At zero it idles when the block is cached (in the kept list with `keep`,
  // else the passed-over one), else it is freed (it holds nothing a prefix hit could find).
  void release_window_slab(BlockId id, bool keep = true);
  // Moves `from`'s slab, with its references, to `to` (which has none): `to` holds the same tokens' K/V.
  void move_window_slab(BlockId from, BlockId to);

  // The cached block holding `key` whose stored tokens equal `tokens`, if any.
  std::optional<BlockId> lookup(const BlockHash& key, std::span<const TokenId> tokens) const;

  // Cached blocks whose parent key is `parent_key` (candidates for token-granular partial reuse).
  std::span<const BlockId> cached_children(const BlockHash& parent_key) const;

  // Free-queue order, front first (for tests and invariant checks).
  std::vector<BlockId> free_queue() const;

  // Aborts with a message when any invariant is broken: counts add up, the free queue's lists, bitmap and expiry
  // set agree and hold exactly the unreferenced blocks (keyless ones at the front level, cached ones at their
  // priority's level or, expired, at priority 0), the index matches block keys, children lists are exact, and an
  // unreferenced cached block without an expiry is never evicted before its cached children of the same level
  // that have none either (an expiry moves a block to priority 0 when its time comes, whatever its chain).
  void check_invariants() const;

 private:
  void queue_push(int32_t i);
  void queue_remove(int32_t i);
  void evict(int32_t i);
  void detach_slab(int32_t slab);
  void slab_lru_remove(int32_t slab);
  void check_slab_invariants() const;

  int32_t block_size_;
  std::vector<BlockMeta> blocks_;
  std::unique_ptr<EvictionPolicy> queue_;
  RetentionClock clock_now_;
  int32_t num_free_ = 0;
  int32_t high_water_ = 0;  // see high_water()
  int32_t num_cached_free_ = 0;  // blocks in the free queue that have a key
  uint64_t clock_ = 0;
  uint64_t num_evictions_ = 0;
  PrefixIndex index_;
  RecentKeys recently_evicted_{kRecentEvictions};
  struct Slab {
    int32_t block = -1;  // attached to, -1: free
    int32_t ref_cnt = 0;
    int32_t prev = -1;   // LRU links, while idle
    int32_t next = -1;
    bool idle = false;
    int8_t list = 0;  // while idle: 0 passed over, 1 kept
  };
  std::vector<Slab> slabs_;
  std::vector<int32_t> free_slabs_;  // unattached
  int32_t lru_head_[2] = {-1, -1};   // least recently idled, per list (passed over, kept)
  int32_t lru_tail_[2] = {-1, -1};
  int32_t num_slabs_unreferenced_ = 0;
  int32_t num_slabs_idle_ = 0;
  uint64_t num_slab_evictions_ = 0;
};

}  // namespace hearth
