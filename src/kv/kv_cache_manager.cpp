#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <utility>

namespace hearth {
namespace {

int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : pool_(config.num_blocks, config.block_size, config.clock, config.window_tokens > 0 ? config.num_window_slabs : 0),
      window_tokens_(config.window_tokens),
      resumable_after_(config.resumable_after),
      max_pinned_blocks_(config.max_pinned_blocks),
      max_pinned_blocks_per_namespace_(config.max_pinned_blocks_per_namespace > 0 ? config.max_pinned_blocks_per_namespace
                                                                                 : config.max_pinned_blocks) {
  HEARTH_CHECK(config.window_tokens >= 0 && (config.window_tokens == 0 || config.num_window_slabs > 0),
               "a {}-token window needs window slabs ({})", config.window_tokens, config.num_window_slabs);
}

void KvCacheManager::apply_retention(const Sequence& seq, int32_t index, BlockId block, bool fresh) {
  const int64_t block_start = static_cast<int64_t>(index) * pool_.block_size();
  const RetentionSpan* best = nullptr;
  // The strongest covering span: the highest priority, then the longest life (0 = never expires).
  auto life = [](const RetentionSpan& s) { return s.ttl_ms == 0 ? kNoExpiry : s.ttl_ms; };
  for (const RetentionSpan& span : seq.retention) {
    if (block_start >= span.num_tokens) continue;
    if (!best || span.priority > best->priority || (span.priority == best->priority && life(span) > life(*best))) {
      best = &span;
    }
  }
  if (!best) return;
  const int64_t now = pool_.now();
  const int64_t expires_at = best->ttl_ms == 0 ? kNoExpiry : now + best->ttl_ms;
  const BlockMeta& m = pool_.meta(block);
  const bool expired = m.expires_at != kNoExpiry && m.expires_at <= now;
  const int32_t current = expired ? 0 : m.priority;
  const bool stronger = best->priority > current || (best->priority == current && expires_at > m.expires_at);
  if (fresh || stronger) pool_.set_retention(block, best->priority, expires_at);
}

std::optional<BlockId> KvCacheManager::best_partial(const BlockHash& parent, std::span<const TokenId> next,
                                                    int32_t* n_match) const {
  std::optional<BlockId> best;
  *n_match = 0;
  for (BlockId child : pool_.cached_children(parent)) {
    const auto& cached = pool_.meta(child).tokens;
    const auto mismatch = std::mismatch(next.begin(), next.end(), cached.begin(), cached.end());
    const auto n = static_cast<int32_t>(mismatch.first - next.begin());
    if (n > *n_match) {
      *n_match = n;
      best = child;
    }
  }
  return best;
}

PrefixMatch KvCacheManager::find_longest_prefix(const BlockHash& ns, std::span<const TokenId> tokens,
                                                int32_t max_tokens) const {
  PrefixMatch match = find_cached_prefix(ns, tokens, max_tokens);
  fit_to_window(match);
  fit_to_checkpoint(match);
  return match;
}

void KvCacheManager::fit_to_checkpoint(PrefixMatch& match) const {
  if (!resumable_after_) return;
  match.partial_block.reset();
  match.partial_tokens = 0;
  const auto uncut = static_cast<int32_t>(match.blocks.size()) * match.block_size;
  if (!match.keys.empty() && !resumable_after_(match.keys.back())) match.uncut_full_tokens = uncut;
  while (!match.keys.empty() && !resumable_after_(match.keys.back())) {
    match.blocks.pop_back();
    match.keys.pop_back();
  }
}

void KvCacheManager::fit_to_window(PrefixMatch& match) const {
  if (window_tokens_ == 0) return;
  while (match.num_tokens() > 0) {
    const auto n_blocks = static_cast<int32_t>(match.blocks.size());
    int32_t missing = -1;  // the last block the hit reads whose slab is gone
    if (match.partial_block && !pool_.window_slab(*match.partial_block)) {
      missing = n_blocks;
    } else {
      for (int32_t i = n_blocks - 1; i >= first_window_block(match.num_tokens()) && missing < 0; --i) {
        if (!pool_.window_slab(match.blocks[i])) missing = i;
      }
    }
    if (missing < 0) return;
    match.partial_block.reset();
    match.partial_tokens = 0;
    match.blocks.resize(missing);
    match.keys.resize(missing);
  }
}

PrefixMatch KvCacheManager::find_cached_prefix(const BlockHash& ns, std::span<const TokenId> tokens,
                                               int32_t max_tokens) const {
  const int32_t bs = pool_.block_size();
  max_tokens = std::min(max_tokens, static_cast<int32_t>(tokens.size()));
  PrefixMatch match;
  match.block_size = bs;
  BlockHash parent = ns;
  int32_t begin = 0;
  for (; begin + bs <= max_tokens; begin += bs) {
    const auto block_tokens = tokens.subspan(begin, bs);
    const BlockHash key = hash_block(parent, ns, block_tokens);
    const auto hit = pool_.lookup(key, block_tokens);
    if (!hit) break;
    match.blocks.push_back(*hit);
    match.keys.push_back(key);
    parent = key;
  }
  if (begin < max_tokens) {
    const auto next = tokens.subspan(begin, std::min(bs, max_tokens - begin));
    match.partial_block = best_partial(parent, next, &match.partial_tokens);
  }
  return match;
}

int32_t KvCacheManager::num_unreferenced_among(const PrefixMatch& match) const {
  int32_t n = 0;
  for (BlockId b : match.blocks) n += pool_.meta(b).ref_cnt == 0;
  if (match.partial_block) n += pool_.meta(*match.partial_block).ref_cnt == 0;
  return n;
}

std::optional<AdmitResult> KvCacheManager::admit(RequestId id, const BlockHash& ns, std::span<const TokenId> tokens,
                                                 int32_t num_tokens_to_cover, bool use_cache,
                                                 std::span<const RetentionSpan> retention,
                                                 int32_t first_chunk_tokens) {
  HEARTH_CHECK(!seqs_.contains(id), "request {} admitted twice", id.value);
  HEARTH_CHECK(!tokens.empty() && num_tokens_to_cover <= static_cast<int32_t>(tokens.size()),
               "admit of {} tokens covering {}", tokens.size(), num_tokens_to_cover);
  const int32_t bs = pool_.block_size();
  PrefixMatch match;
  match.block_size = bs;
  if (use_cache) match = find_longest_prefix(ns, tokens, static_cast<int32_t>(tokens.size()) - 1);
  const int32_t cover = std::max(num_tokens_to_cover, match.num_tokens());
  const auto n_hit = static_cast<int32_t>(match.blocks.size());
  const int32_t need = ceil_div(cover, bs) - n_hit;
  if (pool_.num_blocks_free() - num_unreferenced_among(match) < need) return std::nullopt;
  // Window slabs: the hit's blocks the first chunk reads keep theirs; the blocks it writes get new ones.
  const int32_t hit = match.num_tokens();
  const int32_t window_begin = first_window_block(hit);
  const int32_t window_end =
      window_tokens_ > 0
          ? std::max(ceil_div(static_cast<int32_t>(std::min<int64_t>(cover, int64_t{hit} + first_chunk_tokens)), bs),
                     n_hit)
          : 0;
  if (window_tokens_ > 0) {
    int32_t idle = 0;
    for (int32_t i = window_begin; i < n_hit; ++i) idle += pool_.window_slab_ref_cnt(match.blocks[i]) == 0 ? 1 : 0;
    if (match.partial_block && pool_.window_slab_ref_cnt(*match.partial_block) == 0) ++idle;
    if (pool_.num_window_slabs_free() - idle < window_end - n_hit) return std::nullopt;
  }

  Sequence seq{ns, use_cache, {}, match.keys, {retention.begin(), retention.end()}};
  seq.num_computed = hit;
  for (BlockId b : match.blocks) pool_.touch(b);
  for (size_t i = 0; i < match.blocks.size(); ++i)
    apply_retention(seq, static_cast<int32_t>(i), match.blocks[i], false);
  if (match.partial_block) pool_.touch(*match.partial_block);  // the copy source must survive until copied
  seq.table = match.blocks;
  for (int32_t i = 0; i < need; ++i) {
    auto block = pool_.allocate();
    HEARTH_CHECK(block.has_value(), "pool ran out of blocks it reported free");
    seq.table.push_back(*block);
  }
  if (window_tokens_ > 0) {
    seq.window_slabs.assign(seq.table.size(), BlockId{-1});
    for (int32_t i = window_begin; i < n_hit; ++i) {
      pool_.touch_window_slab(seq.table[i]);
      seq.window_slabs[i] = *pool_.window_slab(seq.table[i]);
    }
    // The copy source's slab is held before new slabs are attached, which may take idle ones.
    if (match.partial_block) pool_.touch_window_slab(*match.partial_block);
    seq.window_begin = std::min(window_begin, n_hit);
    seq.window_end = n_hit;
    seq.hit_window_end = hit > 0 ? ceil_div(hit, bs) : 0;
    extend_window(seq, window_end);
  }
  if (match.partial_block) {
    BlockCopy copy{*match.partial_block, seq.table[match.blocks.size()], match.partial_tokens};
    if (window_tokens_ > 0) {
      copy.src_slab = *pool_.window_slab(copy.src);
      copy.dst_slab = seq.window_slabs[match.blocks.size()];
    }
    pending_copies_.push_back(copy);
  }
  seqs_.emplace(id, std::move(seq));
  if (use_cache) {
    for (BlockId b : match.blocks) pool_.record_hit(b);
    if (match.partial_block) pool_.record_hit(*match.partial_block);
    counters_.num_queries++;
    counters_.num_query_tokens += tokens.size();
    counters_.num_hit_tokens += match.num_tokens();
    counters_.num_copied_tokens += match.partial_tokens;
  }
  return AdmitResult{match.num_tokens(), match.partial_tokens, match.uncut_full_tokens};
}

const KvCacheManager::Sequence& KvCacheManager::sequence(RequestId id) const {
  auto it = seqs_.find(id);
  HEARTH_CHECK(it != seqs_.end(), "the KV cache manager holds no request {}", id.value);
  return it->second;
}

KvCacheManager::Sequence& KvCacheManager::sequence(RequestId id) {
  return const_cast<Sequence&>(std::as_const(*this).sequence(id));
}

int32_t KvCacheManager::num_blocks_needed(RequestId id, int32_t num_total_tokens) const {
  const Sequence& seq = sequence(id);
  return std::max(0, ceil_div(num_total_tokens, pool_.block_size()) - static_cast<int32_t>(seq.table.size()));
}

bool KvCacheManager::allocate_slots(RequestId id, int32_t num_total_tokens) {
  const int32_t need = num_blocks_needed(id, num_total_tokens);
  Sequence& seq = sequence(id);
  if (window_tokens_ > 0) drop_window_before(seq, first_window_block(seq.num_computed));
  const int32_t window_end = window_tokens_ > 0 ? ceil_div(num_total_tokens, pool_.block_size()) : 0;
  if (need > pool_.num_blocks_free() ||
      std::max(0, window_end - seq.window_end) > pool_.num_window_slabs_free()) {
    return false;
  }
  for (int32_t i = 0; i < need; ++i) seq.table.push_back(*pool_.allocate());
  if (window_tokens_ > 0) {
    seq.window_slabs.resize(seq.table.size(), BlockId{-1});
    extend_window(seq, window_end);
  }
  return true;
}

void KvCacheManager::truncate_slots(RequestId id, int32_t num_total_tokens) {
  Sequence& seq = sequence(id);
  HEARTH_CHECK(num_total_tokens >= seq.num_computed, "truncating request {} to {} tokens, below its {} computed",
               id.value, num_total_tokens, seq.num_computed);
  const auto keep = static_cast<size_t>(ceil_div(num_total_tokens, pool_.block_size()));
  HEARTH_CHECK(keep >= seq.keys.size(), "truncating request {} below its cached blocks", id.value);
  while (seq.table.size() > keep) {
    const auto i = static_cast<int32_t>(seq.table.size()) - 1;
    if (window_tokens_ > 0) {
      if (i >= seq.window_begin && i < seq.window_end) pool_.release_window_slab(seq.table[i]);
      seq.window_end = std::min(seq.window_end, i);
      seq.window_begin = std::min(seq.window_begin, seq.window_end);
      seq.window_slabs.resize(static_cast<size_t>(i));
    }
    pool_.release(seq.table.back());
    seq.table.pop_back();
  }
}

void KvCacheManager::extend_window(Sequence& seq, int32_t to) {
  to = std::min(to, static_cast<int32_t>(seq.table.size()));
  for (int32_t i = seq.window_end; i < to; ++i) {
    HEARTH_CHECK(pool_.attach_window_slab(seq.table[i]), "pool ran out of window slabs it reported free");
    seq.window_slabs[i] = *pool_.window_slab(seq.table[i]);
  }
  seq.window_end = std::max(seq.window_end, to);
}

void KvCacheManager::drop_window_before(Sequence& seq, int32_t block) {
  for (int32_t i = seq.window_begin; i < std::min(block, seq.window_end); ++i) {
    // Kept when a hit of this sequence read it (a shared prefix's end); passed over otherwise.
    pool_.release_window_slab(seq.table[i], i < seq.hit_window_end);
    seq.window_slabs[i] = BlockId{-1};
  }
  seq.window_begin = std::max(seq.window_begin, std::min(block, seq.window_end));
}

void KvCacheManager::release_window(Sequence& seq) {
  for (int32_t i = seq.window_end - 1; i >= seq.window_begin; --i) pool_.release_window_slab(seq.table[i]);
  seq.window_begin = seq.window_end = 0;
  seq.window_slabs.clear();
}

void KvCacheManager::cache_full_blocks(RequestId id, std::span<const TokenId> tokens, int32_t num_computed) {
  Sequence& seq = sequence(id);
  seq.num_computed = std::max(seq.num_computed, num_computed);
  if (seq.use_cache) register_full_blocks(seq, tokens, num_computed);
  // The slabs the next token no longer reads idle now, not at the next allocate_slots: between steps a sequence
  // holds what the memory plan charges a user at num_computed tokens. After the registration, so a block that
  // just filled keeps its slab attached (idle, findable) until another block needs one, and the caller can still
  // copy this step's blocks out whole.
  if (window_tokens_ > 0) drop_window_before(seq, first_window_block(seq.num_computed));
}

void KvCacheManager::register_full_blocks(Sequence& seq, std::span<const TokenId> tokens, int32_t num_computed) {
  const int32_t bs = pool_.block_size();
  const int32_t n_full = std::min(num_computed, static_cast<int32_t>(tokens.size())) / bs;
  HEARTH_CHECK(n_full <= static_cast<int32_t>(seq.table.size()), "computed tokens beyond the block table");
  for (auto i = static_cast<int32_t>(seq.keys.size()); i < n_full; ++i) {
    const BlockHash parent = i == 0 ? seq.ns : seq.keys[i - 1];
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const BlockHash key = hash_block(parent, seq.ns, block_tokens);
    if (pool_.cache(seq.table[i], key, parent, block_tokens)) {
      apply_retention(seq, i, seq.table[i], true);
      if (track_newly_cached_) newly_cached_.push_back({seq.table[i], key, parent, seq.ns, i});
    } else {
      // The same prefix is already cached in another block with identical K/V: share that one instead.
      const auto existing = pool_.lookup(key, block_tokens);
      if (!existing) return;  // a SHA-256 collision with different tokens: leave the rest uncached
      pool_.touch(*existing);
      if (i >= seq.window_begin && i < seq.window_end) {
        // The sequence's slab holds the same K/V too: keep the cached block's, or give it ours.
        if (pool_.window_slab(*existing)) {
          pool_.touch_window_slab(*existing);
          pool_.release_window_slab(seq.table[i]);
        } else {
          pool_.move_window_slab(seq.table[i], *existing);
        }
        seq.window_slabs[i] = *pool_.window_slab(*existing);
      }
      pool_.release(seq.table[i]);
      seq.table[i] = *existing;
      apply_retention(seq, i, *existing, false);
    }
    seq.keys.push_back(key);
  }
}

int32_t KvCacheManager::insert_chain(const BlockHash& ns, std::span<const TokenId> tokens, int32_t n_blocks,
                                     const std::function<bool(int32_t, BlockId, uint8_t*, int64_t*)>& fill) {
  const int32_t bs = pool_.block_size();
  n_blocks = std::min(n_blocks, static_cast<int32_t>(tokens.size()) / bs);
  std::vector<BlockId> held;  // the chain, referenced while it grows so no allocation evicts it
  std::vector<BlockId> held_slabs;  // blocks whose window slab is referenced for the same reason
  BlockHash parent = ns;
  int32_t inserted = 0;
  // With window slabs, the blocks a hit at the chain's end reads on the sliding-window layers get slabs.
  const int32_t window_from = first_window_block(n_blocks * bs);
  for (int32_t i = 0; i < n_blocks; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const BlockHash key = hash_block(parent, ns, block_tokens);
    if (auto hit = pool_.lookup(key, block_tokens)) {
      pool_.touch(*hit);
      held.push_back(*hit);
    } else {
      auto block = pool_.allocate();
      if (!block) break;
      const bool slab = window_tokens_ > 0 && i >= window_from && pool_.attach_window_slab(*block);
      uint8_t priority = kDefaultRetentionPriority;
      int64_t expires_at = kNoExpiry;
      if (!fill(i, *block, &priority, &expires_at) || !pool_.cache(*block, key, parent, block_tokens)) {
        if (slab) pool_.release_window_slab(*block);
        pool_.release(*block);
        break;
      }
      if (slab) held_slabs.push_back(*block);
      if (priority != kDefaultRetentionPriority || expires_at != kNoExpiry) {
        pool_.set_retention(*block, std::min<uint8_t>(priority, kMaxRetentionPriority), expires_at);
      }
      held.push_back(*block);
      inserted++;
    }
    parent = key;
  }
  for (auto b = held_slabs.rbegin(); b != held_slabs.rend(); ++b) pool_.release_window_slab(*b);
  for (auto b = held.rbegin(); b != held.rend(); ++b) pool_.release(*b);
  return inserted;
}

void KvCacheManager::complete_copies() {
  for (const BlockCopy& copy : pending_copies_) {
    if (copy.src_slab.value >= 0) pool_.release_window_slab(copy.src);
    pool_.release(copy.src);
  }
  pending_copies_.clear();
}

void KvCacheManager::cache_partial_tail(Sequence& seq, std::span<const TokenId> tokens, int32_t num_computed) {
  const int32_t bs = pool_.block_size();
  const auto n_full = static_cast<int32_t>(seq.keys.size());
  const int32_t n_tail = std::min(num_computed, static_cast<int32_t>(tokens.size())) - n_full * bs;
  // Only right behind the cached full blocks (registration never stopped early), and only a private block.
  if (!seq.use_cache || n_tail <= 0 || n_tail >= bs || n_full >= static_cast<int32_t>(seq.table.size())) return;
  const BlockId tail = seq.table[n_full];
  if (pool_.meta(tail).ref_cnt != 1 || pool_.meta(tail).has_key) return;
  const BlockHash parent = n_full == 0 ? seq.ns : seq.keys.back();
  const auto tail_tokens = tokens.subspan(static_cast<size_t>(n_full) * bs, n_tail);
  // A key over n_tail < bs tokens never equals a full block's; an identical tail already cached wins.
  if (pool_.cache(tail, hash_block(parent, seq.ns, tail_tokens), parent, tail_tokens)) {
    apply_retention(seq, n_full, tail, true);
  }
}

void KvCacheManager::release(RequestId id, std::span<const TokenId> tokens, int32_t num_computed) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (!tokens.empty()) cache_partial_tail(it->second, tokens, num_computed);
  release_window(it->second);
  const auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
}

std::span<const BlockId> KvCacheManager::window_table(RequestId id) const { return sequence(id).window_slabs; }

std::span<const BlockId> KvCacheManager::block_table(RequestId id) const {
  auto it = seqs_.find(id);
  HEARTH_CHECK(it != seqs_.end(), "block_table of unknown request {}", id.value);
  return it->second.table;
}

Result<PinInfo> KvCacheManager::pin_prefix(const BlockHash& ns, std::span<const TokenId> tokens) {
  PrefixMatch match = find_longest_prefix(ns, tokens, static_cast<int32_t>(tokens.size()));
  match.partial_block.reset();  // only full blocks are pinned
  match.partial_tokens = 0;
  fit_to_window(match);
  const int32_t bs = pool_.block_size();
  if (match.blocks.empty()) {
    return make_error("nothing to pin: no full block of this {}-token prefix is cached yet (block size {})",
                      tokens.size(), bs);
  }
  const BlockHash key = match.keys.back();
  const auto n = static_cast<int32_t>(match.blocks.size());
  if (pins_.contains(key)) return PinInfo{key, n * bs};
  const int32_t own = num_blocks_pinned_by_namespace_.contains(ns) ? num_blocks_pinned_by_namespace_.at(ns) : 0;
  if (own + n > max_pinned_blocks_per_namespace_) {
    return make_error("pinning {} blocks ({} tokens) would exceed this cache_salt's pin cap: {} of {} blocks already "
                      "pinned by it",
                      n, n * bs, own, max_pinned_blocks_per_namespace_);
  }
  if (num_blocks_pinned_ + n > max_pinned_blocks_) {
    return make_error("pinning {} blocks ({} tokens) would exceed the server's pin cap, which every cache_salt shares",
                      n, n * bs);
  }
  for (BlockId b : match.blocks) pool_.touch(b);
  Pin pin{ns, match.blocks, {}};
  if (window_tokens_ > 0) {
    for (int32_t i = first_window_block(n * bs); i < n; ++i) {
      pool_.touch_window_slab(match.blocks[i]);
      pin.window_blocks.push_back(match.blocks[i]);
    }
  }
  num_blocks_pinned_ += n;
  num_blocks_pinned_by_namespace_[ns] += n;
  pins_.emplace(key, std::move(pin));
  return PinInfo{key, n * bs};
}

bool KvCacheManager::unpin(const BlockHash& key) {
  auto it = pins_.find(key);
  if (it == pins_.end()) return false;
  for (BlockId b : it->second.window_blocks) pool_.release_window_slab(b);
  const auto& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  num_blocks_pinned_ -= static_cast<int32_t>(blocks.size());
  auto own = num_blocks_pinned_by_namespace_.find(it->second.ns);
  own->second -= static_cast<int32_t>(blocks.size());
  if (own->second == 0) num_blocks_pinned_by_namespace_.erase(own);
  pins_.erase(it);
  return true;
}

std::vector<PinInfo> KvCacheManager::pins() const {
  std::vector<PinInfo> out;
  for (const auto& [key, pin] : pins_) {
    out.push_back({key, static_cast<int32_t>(pin.blocks.size()) * block_size(), pin.ns});
  }
  return out;
}

void KvCacheManager::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> refs(pool_.num_blocks_total(), 0);
  std::vector<int32_t> slab_refs(pool_.num_blocks_total(), 0);  // by block
  for (const auto& [id, seq] : seqs_) {
    for (BlockId b : seq.table) refs[b.value]++;
    if (window_tokens_ > 0) {
      HEARTH_CHECK(seq.window_slabs.size() == seq.table.size() && 0 <= seq.window_begin &&
                       seq.window_begin <= seq.window_end && seq.window_end <= static_cast<int32_t>(seq.table.size()),
                   "request {} holds window slabs [{}, {}) of {} blocks", id.value, seq.window_begin, seq.window_end,
                   seq.table.size());
      for (int32_t i = 0; i < static_cast<int32_t>(seq.table.size()); ++i) {
        const bool held = i >= seq.window_begin && i < seq.window_end;
        const auto slab = pool_.window_slab(seq.table[i]);
        HEARTH_CHECK(held ? slab && *slab == seq.window_slabs[i] : seq.window_slabs[i].value < 0,
                     "request {} block {}: window slab {} recorded, {} attached", id.value, i,
                     seq.window_slabs[i].value, slab ? slab->value : -1);
        if (held) slab_refs[seq.table[i].value]++;
      }
      // What the next token reads on the sliding-window layers is held.
      const int32_t read_end = std::min(ceil_div(seq.num_computed, pool_.block_size()),
                                        static_cast<int32_t>(seq.table.size()));
      for (int32_t i = first_window_block(seq.num_computed); i < read_end; ++i) {
        HEARTH_CHECK(i >= seq.window_begin && i < seq.window_end,
                     "request {} at {} computed tokens does not hold the window slab of block {}", id.value,
                     seq.num_computed, i);
      }
    }
    HEARTH_CHECK(seq.keys.size() <= seq.table.size(), "request {} has more keys than blocks", id.value);
    for (size_t i = 0; i < seq.keys.size(); ++i) {
      const BlockMeta& m = pool_.meta(seq.table[i]);
      HEARTH_CHECK(m.has_key && m.key == seq.keys[i], "request {} block {} is not cached under its key", id.value, i);
    }
  }
  int32_t pinned = 0;
  for (const auto& [key, pin] : pins_) {
    for (BlockId b : pin.blocks) refs[b.value]++;
    for (BlockId b : pin.window_blocks) slab_refs[b.value]++;
    pinned += static_cast<int32_t>(pin.blocks.size());
  }
  HEARTH_CHECK(pinned == num_blocks_pinned_, "pins hold {} blocks, counter says {}", pinned, num_blocks_pinned_);
  for (const BlockCopy& c : pending_copies_) {
    refs[c.src.value]++;
    if (c.src_slab.value >= 0) slab_refs[c.src.value]++;
  }
  for (int32_t i = 0; i < pool_.num_blocks_total(); ++i) {
    HEARTH_CHECK(slab_refs[i] == pool_.window_slab_ref_cnt(BlockId{i}),
                 "block {}'s window slab has ref {} but {} holders", i, pool_.window_slab_ref_cnt(BlockId{i}),
                 slab_refs[i]);
  }
  for (int32_t i = 0; i < pool_.num_blocks_total(); ++i) {
    HEARTH_CHECK(refs[i] == pool_.meta(BlockId{i}).ref_cnt, "block {} has ref {} but {} holders", i,
                 pool_.meta(BlockId{i}).ref_cnt, refs[i]);
  }
}

}  // namespace hearth
