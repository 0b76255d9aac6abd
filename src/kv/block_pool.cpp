#include "kv/block_pool.h"

#include <algorithm>
#include <chrono>

#include "util/result.h"

namespace hearth {

int64_t unix_time_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, RetentionClock clock, int32_t num_window_slabs)
    : block_size_(block_size),
      blocks_(num_blocks),
      queue_(std::make_unique<RetentionQueue>(num_blocks)),
      clock_now_(std::move(clock)),
      slabs_(std::max(0, num_window_slabs)) {
  HEARTH_CHECK(num_blocks > 0 && block_size > 0, "BlockPool needs blocks ({}) and a block size ({})", num_blocks,
               block_size);
  for (int32_t s = num_window_slabs - 1; s >= 0; --s) free_slabs_.push_back(s);  // slab 0 is taken first
  num_slabs_unreferenced_ = std::max(0, num_window_slabs);
  // Keyless blocks join the front, so pushing the ids in reverse leaves block 0 first.
  for (int32_t i = num_blocks - 1; i >= 0; --i) queue_push(i);
}

void BlockPool::queue_push(int32_t i) {
  BlockMeta& b = blocks_[i];
  // The clock is read only for a block that can expire.
  const int64_t now = b.has_key && b.expires_at != kNoExpiry ? clock_now_() : 0;
  queue_->push(i, b.has_key, b.priority, b.expires_at, now);
  b.in_free_queue = true;
  ++num_free_;
  num_cached_free_ += b.has_key ? 1 : 0;
}

void BlockPool::queue_remove(int32_t i) {
  BlockMeta& b = blocks_[i];
  HEARTH_CHECK(b.in_free_queue, "block {} is not in the free queue", i);
  queue_->remove(i);
  b.in_free_queue = false;
  --num_free_;
  num_cached_free_ -= b.has_key ? 1 : 0;
}

void BlockPool::expire() {
  if (queue_->next_expiry()) queue_->expire(clock_now_());
}

void BlockPool::evict(int32_t i) {
  BlockMeta& b = blocks_[i];
  if (b.window_slab >= 0) detach_slab(b.window_slab);
  index_.erase(b.key, b.parent_key, BlockId{i});
  recently_evicted_.insert(b.key);
  b.has_key = false;
  b.key = {};
  b.parent_key = {};
  b.tokens.clear();
  b.num_hits = 0;
  ++num_evictions_;
}

std::optional<BlockId> BlockPool::allocate() {
  expire();
  const auto victim = queue_->victim();
  if (!victim) return std::nullopt;
  const int32_t i = *victim;
  queue_remove(i);
  if (blocks_[i].has_key) evict(i);
  blocks_[i].priority = kDefaultRetentionPriority;
  blocks_[i].expires_at = kNoExpiry;
  blocks_[i].ref_cnt = 1;
  blocks_[i].last_used = ++clock_;
  high_water_ = std::max(high_water_, i + 1);
  return BlockId{i};
}

void BlockPool::touch(BlockId id) {
  BlockMeta& b = blocks_[id.value];
  if (b.ref_cnt == 0) queue_remove(id.value);
  ++b.ref_cnt;
  b.last_used = ++clock_;
}

void BlockPool::record_hit(BlockId id) {
  BlockMeta& b = blocks_[id.value];
  HEARTH_CHECK(b.has_key, "record_hit() of uncached block {}", id.value);
  ++b.num_hits;
}

void BlockPool::release(BlockId id) {
  BlockMeta& b = blocks_[id.value];
  HEARTH_CHECK(b.ref_cnt > 0, "release of unreferenced block {}", id.value);
  b.last_used = ++clock_;
  if (--b.ref_cnt > 0) return;
  queue_push(id.value);
}

void BlockPool::set_retention(BlockId id, uint8_t priority, int64_t expires_at) {
  BlockMeta& b = blocks_[id.value];
  HEARTH_CHECK(b.has_key, "set_retention() of uncached block {}", id.value);
  HEARTH_CHECK(priority <= kMaxRetentionPriority, "retention priority {} above {}", priority, kMaxRetentionPriority);
  const bool queued = b.in_free_queue;
  if (queued) queue_remove(id.value);
  b.priority = priority;
  b.expires_at = expires_at;
  if (queued) queue_push(id.value);
}

bool BlockPool::cache(BlockId id, const BlockHash& key, const BlockHash& parent_key, std::span<const TokenId> tokens) {
  BlockMeta& b = blocks_[id.value];
  HEARTH_CHECK(b.ref_cnt > 0 && !b.has_key, "cache() of block {} (ref {}, cached {})", id.value, b.ref_cnt, b.has_key);
  HEARTH_CHECK(!tokens.empty() && static_cast<int32_t>(tokens.size()) <= block_size_,
               "cache() of a block with {} tokens (block size {})", tokens.size(), block_size_);
  if (index_.contains(key)) return false;
  b.has_key = true;
  b.key = key;
  b.parent_key = parent_key;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.num_hits = 0;
  index_.insert(key, parent_key, id);
  return true;
}

void BlockPool::slab_lru_remove(int32_t s) {
  Slab& slab = slabs_[s];
  HEARTH_CHECK(slab.idle, "window slab {} is not idle", s);
  (slab.prev >= 0 ? slabs_[slab.prev].next : lru_head_[slab.list]) = slab.next;
  (slab.next >= 0 ? slabs_[slab.next].prev : lru_tail_[slab.list]) = slab.prev;
  slab.prev = slab.next = -1;
  slab.idle = false;
  --num_slabs_idle_;
}

void BlockPool::detach_slab(int32_t s) {
  Slab& slab = slabs_[s];
  HEARTH_CHECK(slab.ref_cnt == 0 && slab.block >= 0, "detaching window slab {} (ref {}, block {})", s, slab.ref_cnt,
               slab.block);
  if (slab.idle) slab_lru_remove(s);
  blocks_[slab.block].window_slab = -1;
  slab.block = -1;
  free_slabs_.push_back(s);
}

bool BlockPool::attach_window_slab(BlockId id) {
  BlockMeta& b = blocks_[id.value];
  HEARTH_CHECK(b.ref_cnt > 0 && b.window_slab < 0, "attach_window_slab() to block {} (ref {}, slab {})", id.value,
               b.ref_cnt, b.window_slab);
  if (free_slabs_.empty()) {
    const int32_t victim = lru_head_[0] >= 0 ? lru_head_[0] : lru_head_[1];
    if (victim < 0) return false;
    detach_slab(victim);
    ++num_slab_evictions_;
  }
  const int32_t s = free_slabs_.back();
  free_slabs_.pop_back();
  slabs_[s].block = id.value;
  slabs_[s].ref_cnt = 1;
  b.window_slab = s;
  --num_slabs_unreferenced_;
  return true;
}

void BlockPool::touch_window_slab(BlockId id) {
  const int32_t s = blocks_[id.value].window_slab;
  HEARTH_CHECK(s >= 0, "touch_window_slab() of block {}, which has no slab", id.value);
  Slab& slab = slabs_[s];
  if (slab.ref_cnt++ > 0) return;
  slab_lru_remove(s);
  --num_slabs_unreferenced_;
}

void BlockPool::release_window_slab(BlockId id, bool keep) {
  const int32_t s = blocks_[id.value].window_slab;
  HEARTH_CHECK(s >= 0 && slabs_[s].ref_cnt > 0, "release_window_slab() of block {} (slab {})", id.value, s);
  Slab& slab = slabs_[s];
  if (--slab.ref_cnt > 0) return;
  ++num_slabs_unreferenced_;
  if (!blocks_[id.value].has_key) {
    detach_slab(s);
    return;
  }
  const int8_t list = keep ? 1 : 0;
  slab.idle = true;
  slab.list = list;
  slab.prev = lru_tail_[list];
  slab.next = -1;
  (lru_tail_[list] >= 0 ? slabs_[lru_tail_[list]].next : lru_head_[list]) = s;
  lru_tail_[list] = s;
  ++num_slabs_idle_;
}

void BlockPool::move_window_slab(BlockId from, BlockId to) {
  const int32_t s = blocks_[from.value].window_slab;
  HEARTH_CHECK(s >= 0 && slabs_[s].ref_cnt > 0 && blocks_[to.value].window_slab < 0 && blocks_[to.value].ref_cnt > 0,
               "move_window_slab() from block {} (slab {}) to block {} (slab {})", from.value, s, to.value,
               blocks_[to.value].window_slab);
  blocks_[from.value].window_slab = -1;
  blocks_[to.value].window_slab = s;
  slabs_[s].block = to.value;
}

std::optional<BlockId> BlockPool::lookup(const BlockHash& key, std::span<const TokenId> tokens) const {
  const auto found = index_.find(key);
  if (!found) return std::nullopt;
  const BlockMeta& b = blocks_[found->value];
  if (!std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return found;
}

std::span<const BlockId> BlockPool::cached_children(const BlockHash& parent_key) const {
  return index_.children(parent_key);
}

std::vector<BlockId> BlockPool::free_queue() const {
  std::vector<BlockId> out;
  for (int32_t i : queue_->order()) out.push_back(BlockId{i});
  return out;
}

void BlockPool::check_invariants() const {
  const int32_t n = num_blocks_total();
  queue_->check_invariants();
  std::vector<int32_t> queue_pos(n, -1);
  int32_t count = 0;
  for (int32_t i : queue_->order()) {
    HEARTH_CHECK(blocks_[i].in_free_queue && blocks_[i].ref_cnt == 0, "block {} in queue with ref {}", i,
                 blocks_[i].ref_cnt);
    // Keyless blocks at the front level; a cached one at its priority's level, or at priority 0 once expired.
    const int32_t level = queue_->level(i);
    const BlockMeta& b = blocks_[i];
    HEARTH_CHECK(b.has_key ? level == 1 + b.priority || (level == 1 && b.expires_at != kNoExpiry) : level == 0,
                 "block {} (cached {}, priority {}) queued at level {}", i, b.has_key, b.priority, level);
    queue_pos[i] = count++;
  }
  HEARTH_CHECK(count == num_free_, "free queue holds {} blocks, counter says {}", count, num_free_);
  int32_t num_keyed = 0, num_in_use = 0, num_keyed_free = 0;
  const size_t num_children = index_.num_children_entries();
  for (int32_t i = 0; i < n; ++i) {
    const BlockMeta& b = blocks_[i];
    HEARTH_CHECK(b.ref_cnt >= 0, "block {} has ref {}", i, b.ref_cnt);
    HEARTH_CHECK((b.ref_cnt == 0) == b.in_free_queue, "block {} ref {} but in_free_queue {}", i, b.ref_cnt,
                 b.in_free_queue);
    num_in_use += b.ref_cnt > 0;
    if (!b.has_key) continue;
    ++num_keyed;
    num_keyed_free += b.in_free_queue ? 1 : 0;
    HEARTH_CHECK(index_.find(b.key) == BlockId{i}, "cached block {} is not indexed under its key", i);
    auto kids = cached_children(b.parent_key);
    HEARTH_CHECK(std::find(kids.begin(), kids.end(), BlockId{i}) != kids.end(), "block {} missing from children", i);
    // A parent must outlive its children: if both are unreferenced at one level, the parent sits behind the child.
    // Expiries are the exception: a block joins priority 0 when its time comes, so a parent that expires first (or
    // was given priority 0 outright) may be ahead of a child that expires later.
    const auto parent = index_.find(b.parent_key);
    if (b.ref_cnt == 0 && parent && b.expires_at == kNoExpiry && blocks_[parent->value].expires_at == kNoExpiry) {
      const int32_t p = parent->value;
      HEARTH_CHECK(blocks_[p].ref_cnt > 0 || queue_->level(p) != queue_->level(i) || queue_pos[p] > queue_pos[i],
                   "cached block {} would outlive its parent {} (evicted first)", i, p);
    }
  }
  HEARTH_CHECK(num_keyed == static_cast<int32_t>(index_.size()), "index has {} keys, blocks hold {}", index_.size(),
               num_keyed);
  HEARTH_CHECK(num_children == index_.size(), "children lists hold {} blocks, index {}", num_children, index_.size());
  HEARTH_CHECK(num_keyed_free == num_cached_free_, "{} cached blocks are unreferenced, counter says {}", num_keyed_free,
               num_cached_free_);
  HEARTH_CHECK(num_in_use + num_free_ == n, "in use {} + free {} != total {}", num_in_use, num_free_, n);
  check_slab_invariants();
}

void BlockPool::check_slab_invariants() const {
  const auto n = static_cast<int32_t>(slabs_.size());
  int32_t idle = 0;
  for (int8_t list = 0; list < 2; ++list) {
    int32_t prev = -1;
    for (int32_t s = lru_head_[list]; s >= 0; prev = s, s = slabs_[s].next) {
      HEARTH_CHECK(s < n && slabs_[s].idle && slabs_[s].list == list && slabs_[s].prev == prev && ++idle <= n,
                   "window slab LRU {} broken at {}", list, s);
    }
    HEARTH_CHECK(prev == lru_tail_[list], "window slab LRU {} ends at {}, expected {}", list, prev, lru_tail_[list]);
  }
  HEARTH_CHECK(idle == num_slabs_idle_, "window slab LRUs hold {} slabs, counter says {}", idle, num_slabs_idle_);
  std::vector<bool> is_free(n, false);
  for (int32_t s : free_slabs_) {
    HEARTH_CHECK(!is_free[s] && slabs_[s].block < 0 && slabs_[s].ref_cnt == 0, "free window slab {} is in use", s);
    is_free[s] = true;
  }
  int32_t unreferenced = 0;
  for (int32_t s = 0; s < n; ++s) {
    const Slab& slab = slabs_[s];
    unreferenced += slab.ref_cnt == 0 ? 1 : 0;
    if (slab.block < 0) {
      HEARTH_CHECK(is_free[s], "unattached window slab {} is not on the free list", s);
      continue;
    }
    const BlockMeta& b = blocks_[slab.block];
    HEARTH_CHECK(b.window_slab == s, "window slab {} names block {}, which names slab {}", s, slab.block,
                 b.window_slab);
    HEARTH_CHECK(slab.ref_cnt > 0 ? b.ref_cnt > 0 && !slab.idle : slab.idle && b.has_key,
                 "window slab {} (ref {}, idle {}) on block {} (ref {}, cached {})", s, slab.ref_cnt, slab.idle,
                 slab.block, b.ref_cnt, b.has_key);
  }
  HEARTH_CHECK(unreferenced == num_slabs_unreferenced_, "{} window slabs unreferenced, counter says {}", unreferenced,
               num_slabs_unreferenced_);
  for (int32_t i = 0; i < num_blocks_total(); ++i) {
    const int32_t s = blocks_[i].window_slab;
    HEARTH_CHECK(s < 0 || (s < n && slabs_[s].block == i), "block {} names window slab {}, not attached to it", i, s);
  }
}

}  // namespace hearth
