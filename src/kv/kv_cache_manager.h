#pragma once
// KvCacheManager: the only owner of block tables. It maps each running sequence to blocks of the pool,
// finds cached prefixes, registers newly full blocks, pins prefixes, and releases sequences through one
// path. It never touches K/V memory: when reuse needs data copied (a partially matching block), it hands the
// engine a BlockCopy to perform.
//
// Token-granular reuse, block size 4, cached chain A → B, new prompt shares 6 tokens:
//
//   cached:   [a0 a1 a2 a3] → [b0 b1 b2 b3]
//   prompt:   [a0 a1 a2 a3]   [b0 b1 x  y ] z
//   table:    [ A (shared)]   [ C: b0 b1 copied from B, x y z.. computed ]
//
// The last prompt token is always computed (never reused), so there are logits to sample from.
//
// Sliding-window layers (window_tokens W > 0, with window slabs in the pool, block_pool.h): a token at position p
// reads, on those layers, only the keys [p - W + 1, p]. A sequence holds the window slabs of the blocks its next
// tokens read or write, from first_window_block(p) on, and lets go of older ones as it advances (they idle, still
// findable). A prefix hit of P tokens needs the slabs of blocks first_window_block(P) .. the block of P - 1, so the
// longest prefix is cut back to the end of the last block before one whose slab was evicted.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/prefix_explain.h"
#include "util/ids.h"
#include "util/result.h"

namespace hearth {

struct KvCacheConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t max_pinned_blocks = 0;  // cap on blocks held by pins
  // Cap on the blocks one namespace's pins hold (a cache_salt is a tenant), so no tenant alone fills the shared cap
  // and blocks another's pins; 0: max_pinned_blocks.
  int32_t max_pinned_blocks_per_namespace = 0;
  RetentionClock clock = unix_time_ms;  // what retention expiries are measured against
  int32_t window_tokens = 0;     // W of the sliding-window layers; 0: no window slabs
  int32_t num_window_slabs = 0;  // slabs for their K/V (required > 0 with window_tokens)
  // Hybrid models (recurrent layers beside attention): a hit resumes a sequence's recurrent state from a checkpoint
  // the engine keeps after some full blocks, so a prefix may end only after a full block whose key this accepts,
  // never inside a block (no partial reuse). Empty: a prefix may end anywhere.
  std::function<bool(const BlockHash&)> resumable_after;
};

// Where the engine must copy the first n_slots token slots of src into dst before computing dst's rest.
struct BlockCopy {
  BlockId src;
  BlockId dst;
  int32_t n_slots = 0;
  // With window slabs: the sliding-window layers' slots are copied from src_slab into dst_slab too.
  BlockId src_slab{-1};
  BlockId dst_slab{-1};
};

// The longest cached prefix of a token sequence.
struct PrefixMatch {
  std::vector<BlockId> blocks;    // cached full blocks, in order
  std::vector<BlockHash> keys;    // their keys
  std::optional<BlockId> partial_block;  // a cached block whose first partial_tokens tokens match next
  int32_t partial_tokens = 0;
  int32_t block_size = 0;
  // Full-block tokens matched before a resumable_after cut took blocks off the end (0: no cut).
  int32_t uncut_full_tokens = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(blocks.size()) * block_size + partial_tokens; }
};

struct AdmitResult {
  int32_t num_cached_tokens = 0;  // tokens that need no compute (shared blocks + copied slots)
  int32_t num_copied_tokens = 0;  // of those, tokens copied from a partially matching block
  int32_t num_branch_tokens = 0;  // PrefixMatch::uncut_full_tokens of the hit (0: not cut back)
};

struct PinInfo {
  BlockHash key;  // key of the prefix's last pinned block; names the pin
  int32_t num_tokens = 0;
  BlockHash ns;  // the namespace it was pinned in (set by pins())
};

// A full block cache_full_blocks registered: what a lower tier may keep a copy of (the engine copies its K/V out).
struct NewlyCachedBlock {
  BlockId block;
  BlockHash key;
  BlockHash parent_key;
  BlockHash ns;
  int32_t depth = 0;  // index in its chain
};

// A read-only view of one namespace's cached prefixes as a tree (KvCacheManager::cached_prefix_tree). A node is a
// run of cached blocks where nothing branches (a radix-tree edge); it ends where the cached chains part, or at a
// leaf. Cached chains A→B→C, A→B→D and A→E:
//
//   [A] ─┬─ [B] ─┬─ [C]     node 0: [A], parent -1    node 1: [B], parent 0    node 4: [E], parent 0
//        │       └─ [D]     node 2: [C], parent 1     node 3: [D], parent 1
//        └─ [E]             (with only A→B→C cached: one node [A B C])
//
// A node is listed before its children (pre-order, most recently used child first).
struct CachedPrefixNode {
  int32_t parent = -1;          // index into CachedPrefixTree::nodes; -1 under the namespace's root
  std::vector<TokenId> tokens;  // the node's own first tokens, at most CachedPrefixLimits::max_node_tokens
  int32_t num_tokens = 0;       // tokens in the node's blocks (a partly filled tail block counts its tokens)
  int32_t depth_tokens = 0;     // tokens from the root to the node's end: the cached prefix's length
  int32_t num_blocks = 0;
  int32_t num_blocks_pinned = 0;  // of the node's blocks, held by pins
  int32_t num_blocks_in_use = 0;  // referenced now (running requests, pins, copies)
  uint32_t num_hits = 0;          // prefix hits on the node's first block since it was cached
  uint64_t last_used = 0;         // BlockPool logical clock: the latest use of any of its blocks
};

struct CachedPrefixLimits {
  int32_t max_nodes = 256;              // nodes listed at most (beyond: CachedPrefixTree::truncated)
  int32_t max_node_tokens = 48;         // token ids kept per node
  int32_t max_blocks_walked = 1 << 16;  // bound on the walk itself
};

struct CachedPrefixTree {
  std::vector<CachedPrefixNode> nodes;
  int32_t num_blocks = 0;  // blocks walked (all the namespace's cached blocks unless truncated)
  bool truncated = false;  // a limit cut the listing
  uint64_t clock = 0;      // the pool's clock when read (last_used is compared against it)
};

struct CacheCounters {
  uint64_t num_queries = 0;        // sequences admitted with the cache enabled
  uint64_t num_query_tokens = 0;   // prompt tokens those sequences asked for
  uint64_t num_hit_tokens = 0;     // of which were reused (shared or copied)
  uint64_t num_copied_tokens = 0;  // of which were copied from a partially matching block
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t window_tokens() const { return window_tokens_; }
  // The first block a token at position `pos` reads on the sliding-window layers (0 without them).
  int32_t first_window_block(int32_t pos) const {
    return window_tokens_ > 0 ? std::max(0, pos - window_tokens_ + 1) / pool_.block_size() : 0;
  }
  const BlockPool& pool() const { return pool_; }
  const CacheCounters& counters() const { return counters_; }
  int32_t num_blocks_pinned() const { return num_blocks_pinned_; }

  // Longest cached prefix of tokens[0, max_tokens) that can be reused: with window slabs, cut back so that every
  // block the next token reads on the sliding-window layers still has its slab; with resumable_after, cut back to
  // the end of the last full block it accepts. Read-only.
  PrefixMatch find_longest_prefix(const BlockHash& ns, std::span<const TokenId> tokens, int32_t max_tokens) const;

  // Why reuse of tokens[0, max_tokens) stops where it does (see prefix_explain.h). `other_namespaces` are
  // namespaces to try for a different_salt explanation (e.g. the unsalted one and recently used salts). Read-only.
  [[nodiscard]] PrefixExplanation explain_prefix(const BlockHash& ns, std::span<const TokenId> tokens,
                                                 int32_t max_tokens,
                                                 std::span<const BlockHash> other_namespaces = {}) const;

  // Starts sequence `id` over `tokens` (its prompt). With use_cache, it shares the cached prefix (at most
  // tokens.size() - 1 tokens) and queues a BlockCopy for a partially matching block. It then allocates
  // blocks to cover `num_tokens_to_cover` tokens. Returns nullopt, changing nothing, when the pool cannot
  // supply the blocks now. Requires: id not active, tokens non-empty, num_tokens_to_cover <= tokens.size(),
  // every span's priority <= kMaxRetentionPriority.
  // `retention`: the retention of the sequence's leading blocks (see apply_retention): the shared blocks get it
  // now (a hit refreshes a TTL), the blocks it caches later when they are registered.
  // With window slabs, the sequence gets the slabs its first `first_chunk_tokens` computed tokens read and write.
  [[nodiscard]] std::optional<AdmitResult> admit(RequestId id, const BlockHash& ns, std::span<const TokenId> tokens,
                                                 int32_t num_tokens_to_cover, bool use_cache,
                                                 std::span<const RetentionSpan> retention = {},
                                                 int32_t first_chunk_tokens = INT32_MAX);

  // Grows `id`'s block table to cover num_total_tokens. All or nothing: false (no change) when the pool
  // has too few unreferenced blocks. Requires id active. With window slabs it first lets go of the slabs the
  // sequence's next token no longer reads (it computed what cache_full_blocks was last told), then takes those up
  // to num_total_tokens; too few slabs is false too.
  [[nodiscard]] bool allocate_slots(RequestId id, int32_t num_total_tokens);

  // Shrinks `id`'s block table to the blocks covering num_total_tokens: the blocks past it (a rejected draft's, never
  // registered: they hold no computed token) go back to the pool, tail first, with their window slabs. Requires id
  // active and num_total_tokens >= the tokens cache_full_blocks was told are computed.
  void truncate_slots(RequestId id, int32_t num_total_tokens);

  // Blocks `id` needs from the pool to cover num_total_tokens (0 when already covered).
  int32_t num_blocks_needed(RequestId id, int32_t num_total_tokens) const;

  // Registers the full blocks among the first num_computed of `tokens` (the sequence's tokens so far, prompt
  // then generated). A block whose key is already cached elsewhere is swapped for the cached one (same data).
  // No-op for sequences admitted without the cache, but for this: with window slabs it lets go of the slabs the
  // next token no longer reads (they idle, still attached to their blocks until the pool needs a slab).
  void cache_full_blocks(RequestId id, std::span<const TokenId> tokens, int32_t num_computed);

  // With tracking on (a lower tier is attached), the full blocks registered since the last call, in order; each is
  // still cached under its key until the pool next allocates, so the caller copies them out at once.
  void set_track_newly_cached(bool on) { track_newly_cached_ = on; }
  std::vector<NewlyCachedBlock> take_newly_cached() { return std::exchange(newly_cached_, {}); }

  // Puts blocks of a lower tier back into the pool: the first n_blocks full blocks of `tokens` in namespace `ns`. The
  // leading blocks the pool already caches are kept; for each next one a block is allocated (evicting, like any
  // allocation) and `fill(i, block)` writes block i's K/V into it; it is then cached under its key. Stops at the
  // first block the pool cannot give or `fill` refuses (returns false). The chain is released tail first, so it is
  // evicted tail first like any other. Returns how many blocks were put back.
  // `fill` may also set the block's retention (*priority, *expires_at in the pool's clock units, as a lower tier kept
  // them); both start at the defaults.
  int32_t insert_chain(const BlockHash& ns, std::span<const TokenId> tokens, int32_t n_blocks,
                       const std::function<bool(int32_t, BlockId, uint8_t* priority, int64_t* expires_at)>& fill);

  // Copies queued by admit(); the engine performs them, then calls complete_copies() to drop the source refs.
  std::span<const BlockCopy> pending_copies() const { return pending_copies_; }
  void complete_copies();

  // The one release path: drops every block reference of `id`, tail first, and forgets it. Cached blocks stay
  // cached. With the sequence's `tokens` and how many of them have K/V (`num_computed`), a last block that is
  // only partly computed is cached too, holding those tokens: it can never be found as a full block, only copied
  // from (token-granular reuse), so a conversation's next turn reuses every computed token, not just whole
  // blocks. No-op for an unknown id.
  void release(RequestId id, std::span<const TokenId> tokens = {}, int32_t num_computed = 0);

  bool is_active(RequestId id) const { return seqs_.contains(id); }
  std::span<const BlockId> block_table(RequestId id) const;
  // With window slabs: the slab of each block of block_table(id), BlockId{-1} where the sequence holds none (a
  // block its next tokens never read on the sliding-window layers). Empty without window slabs.
  std::span<const BlockId> window_table(RequestId id) const;

  // The cached prefixes of namespace `ns` only (never another namespace's: tenant isolation), as a tree bounded by
  // `limits`. Read-only; costs O(blocks walked).
  [[nodiscard]] CachedPrefixTree cached_prefix_tree(const BlockHash& ns, const CachedPrefixLimits& limits) const;

  // Pins the cached full blocks of `tokens` so they are never evicted. Fails when nothing of the prefix is
  // cached yet, or when the pin would exceed the namespace's cap (the message has its own numbers) or the shared
  // max_pinned_blocks (the message has no numbers: they would tell of other namespaces' pins).
  // Pinning the same prefix twice returns the existing pin.
  [[nodiscard]] Result<PinInfo> pin_prefix(const BlockHash& ns, std::span<const TokenId> tokens);
  // Removes a pin by its key; false when no such pin exists.
  bool unpin(const BlockHash& key);
  // Blocks whose retention expired drop to priority 0 now (BlockPool::expire; allocation does it anyway), so
  // counts by priority are current.
  void expire_retention() { pool_.expire(); }
  // Every pin now (its key and tokens), in no particular order.
  [[nodiscard]] std::vector<PinInfo> pins() const;

  // Pool invariants plus: every reference is accounted for by a block table, a pin, or a pending copy.
  void check_invariants() const;

 private:
  struct Sequence {
    BlockHash ns;
    bool use_cache = true;
    std::vector<BlockId> table;
    std::vector<BlockHash> keys;  // keys of the leading full blocks known to be cached
    std::vector<RetentionSpan> retention;
    // Window slabs: the sequence holds those of blocks [window_begin, window_end); window_slabs[i] is block i's
    // (BlockId{-1} outside that range), sized like table.
    int32_t num_computed = 0;
    int32_t window_begin = 0;
    int32_t window_end = 0;
    int32_t hit_window_end = 0;  // blocks before it that the admission's hit read: their slabs are kept
    std::vector<BlockId> window_slabs;
  };
  struct Pin {
    BlockHash ns;
    std::vector<BlockId> blocks;
    std::vector<BlockId> window_blocks;  // blocks whose window slab the pin holds
  };

  // The longest prefix by keys alone (no window check).
  PrefixMatch find_cached_prefix(const BlockHash& ns, std::span<const TokenId> tokens, int32_t max_tokens) const;
  // Cuts `match` back until every block a hit at its end reads on the sliding-window layers has a slab.
  void fit_to_window(PrefixMatch& match) const;
  // Cuts `match` back to the end of its last full block that resumable_after accepts (none: empty).
  void fit_to_checkpoint(PrefixMatch& match) const;
  // Attaches slabs to `seq`'s blocks [window_end, to) (fresh blocks; the caller checked there are enough).
  void extend_window(Sequence& seq, int32_t to);
  // cache_full_blocks' registration of seq's full blocks among the first num_computed of `tokens`.
  void register_full_blocks(Sequence& seq, std::span<const TokenId> tokens, int32_t num_computed);
  // Lets go of `seq`'s slabs of blocks before `block`.
  void drop_window_before(Sequence& seq, int32_t block);
  // Lets go of all of `seq`'s slabs, tail first.
  void release_window(Sequence& seq);

  std::optional<BlockId> best_partial(const BlockHash& parent, std::span<const TokenId> next, int32_t* n_match) const;
  // The request's sequence; aborts with a message when the manager does not hold it.
  const Sequence& sequence(RequestId id) const;
  Sequence& sequence(RequestId id);
  void cache_partial_tail(Sequence& seq, std::span<const TokenId> tokens, int32_t num_computed);
  // Gives block `index` of `seq` (cached) the strongest retention of the spans covering it. A block this sequence
  // just cached (`fresh`) takes it as is; a block cached before keeps its own unless the span's priority is higher
  // than its effective one (0 once expired), or equal with a later expiry. No span covers it: unchanged.
  void apply_retention(const Sequence& seq, int32_t index, BlockId block, bool fresh);
  int32_t num_unreferenced_among(const PrefixMatch& match) const;
  std::optional<BlockId> most_recent_child(const BlockHash& parent) const;
  // Tokens of the cached chain starting at `first` (from its slot `offset`), following the most recently used
  // child, at most PrefixExplanation::kMaxContinuation.
  std::vector<TokenId> cached_continuation(BlockId first, int32_t offset) const;

  BlockPool pool_;
  int32_t window_tokens_;
  std::function<bool(const BlockHash&)> resumable_after_;
  int32_t max_pinned_blocks_;
  int32_t num_blocks_pinned_ = 0;
  int32_t max_pinned_blocks_per_namespace_;
  std::unordered_map<BlockHash, int32_t> num_blocks_pinned_by_namespace_;  // only namespaces with pins
  std::unordered_map<RequestId, Sequence> seqs_;
  std::unordered_map<BlockHash, Pin> pins_;
  std::vector<BlockCopy> pending_copies_;
  CacheCounters counters_;
  bool track_newly_cached_ = false;
  std::vector<NewlyCachedBlock> newly_cached_;
};

}  // namespace hearth
