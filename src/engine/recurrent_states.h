#pragma once
// RecurrentStates: where a hybrid model's recurrent state lives between steps, and its checkpoints in the prefix
// cache (README "Hybrid models and the prefix cache").
//
// KvStorage's state slots (model.h's forward contract) are split in two:
//
//   [0, n_running)                     one per running request: the state after its computed tokens
//   [n_running, n_running + n_ckpt)    checkpoints: the state after the last token of a full block, by block key
//
// Before each forward (acquire), every scheduled chunk's request gets a running slot. When the slot does not hold the
// state after the chunk's first position (a fresh admission, a hit, a resume after preemption), it is made to:
// position 0 is a zero state (the forward clears it), any other position is a prefix hit that KvCacheManager cut
// back to a block whose key has a checkpoint (resumable), and the checkpoint is copied in. Each chunk also asks for
// a checkpoint at the last block boundary inside it (the end of a prompt's last full block, of every 512-token
// prefill chunk, of every block of an answer), and one at the request's branch point when the chunk passes it: the
// end of the last full block its prompt shares with the KV the pool holds, when its hit had to be cut back to an
// earlier checkpoint (Request::num_branch_tokens). The first request that branches from a cached prompt where no
// checkpoint is (several users' prompts after one shared system prompt) so leaves one there, and the next request
// that branches there resumes at it. The forward writes each at its token.
//
// When a new checkpoint needs a slot, the one taken is the least worth keeping, compared in this order:
//   1. retention priority: the highest of the request's retention spans (cache_control, cache_retention) covering
//      its block, default 50; 0 once the span's TTL has passed (the KV blocks beside it follow the same rule);
//   2. kind: a point where other requests branch (the branch point, a hint: a system prompt's end) over the end of
//      a prompt's last full block, over a passing boundary (a 512-token chunk's end inside a prompt, an answer's);
//   3. least recently used.
// A block whose checkpoint is gone is still a valid KV block, but a hit can no longer end there.
//
// With lower tiers (disk, Redis), every checkpoint is also written through to each as a tier entry (kv/tier_entry.h:
// self-describing, checksummed, verified before use) in the request's state namespace (state_namespace: derived from
// the cache namespace, so its keys never meet a KV block's): key' of block i = hash_block(key' of block i − 1, state
// ns, the block's tokens), its payload the state's floats, its layout state_layout. A request whose prompt has no
// checkpoint in RAM looks for the deepest one of its prompt blocks in the tiers (disk first, then Redis) when it
// arrives (load_from_tier) and reads it back before it is admitted (a synchronous read of one entry, at most
// kTierLoadWait), so after a restart, or on another server sharing Redis, the first request resumes from there; a
// damaged, foreign or missing entry is never used: the request recomputes.
//
// Because the state update has one definition whatever the chunking (kernels/delta_net.h), a request resumed from a
// checkpoint computes the bits a cold run does.

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include <chrono>
#include <span>
#include <string>

#include "kv/block_hash.h"
#include "kv/retention_queue.h"
#include "model/model.h"
#include "util/ids.h"

namespace hearth {

class BlockTier;
class KvStorage;
struct Request;

// The namespace a cache namespace's state checkpoints are keyed in on a lower tier.
BlockHash state_namespace(const BlockHash& ns);

class RecurrentStates {
 public:
  static constexpr std::chrono::milliseconds kTierLoadWait{2000};

  // Requires n_running >= 1, n_checkpoints >= 0, block_size >= 1. `tiers`: the tiers below the pool in load order
  // (none: no tier; not owned); `layout` names the state's shape for its entries (a checkpoint is only read back
  // into a model with the same one).
  RecurrentStates(int32_t n_running, int32_t n_checkpoints, int32_t block_size, std::vector<BlockTier*> tiers = {},
                  std::string layout = {});

  int32_t num_running_slots() const { return n_running_; }
  int32_t num_checkpoint_slots() const { return n_checkpoints_; }
  int32_t num_checkpoints() const { return static_cast<int32_t>(checkpoints_.size()); }
  // Whether a checkpoint follows the block with this key (KvCacheConfig::resumable_after).
  bool has_checkpoint(const BlockHash& key) const { return checkpoints_.contains(key); }

  // The running slot request r's chunk at [pos_begin, pos_begin + n_tokens) runs in, holding the state after token
  // pos_begin − 1: a fresh slot when r has none; the checkpoint after block pos_begin / block_size − 1 copied in
  // when the slot's state is not at pos_begin (position 0: the forward clears it). Call it for every chunk of a
  // step before plan_checkpoints, so no checkpoint a hit resumes from is evicted first. Requires: a free running slot
  // when r has none; that checkpoint when one is needed (aborts: the hit was cut back to one).
  int32_t acquire(const Request& r, int32_t pos_begin, int32_t n_tokens, KvStorage& kv);

  // The chunk's checkpoints: the state after its last block boundary, and after r's branch point when the chunk
  // passes it (pos = that boundary), each into a slot registered now under that block's key (the forward writes
  // it). pos −1: none (no such boundary in the chunk, r without the cache, no checkpoint slots, or that block's
  // state already kept). Requires acquire for r first.
  using CheckpointPlan = BatchSequence::StateCheckpoint;
  using CheckpointPlans = std::array<CheckpointPlan, BatchSequence::kMaxCheckpoints>;
  // `now_ms`: the retention clock (TTL expiries are compared with it).
  CheckpointPlans plan_checkpoints(const Request& r, int32_t pos_begin, int32_t n_tokens, int64_t now_ms = 0);

  uint64_t num_resumes() const { return num_resumes_; }
  uint64_t num_checkpoints_written() const { return num_checkpoints_written_; }

  // Frees r's running slot (finished, aborted or preempted); its state is gone. No-op when it has none.
  void forget(RequestId id);

  // After the forward wrote a checkpoint plan_checkpoints gave r: its slot may be taken again (until then no other
  // plan evicts it, so two never share a slot), and it is written through to every tier.
  void persist(const Request& r, const CheckpointPlan& plan, const KvStorage& kv);
  // With tiers: when none of the blocks of r's prompt before its last token has a checkpoint in RAM, reads the
  // deepest one a tier holds (verified) into a checkpoint slot, so r's admission can resume there. Returns the
  // tokens it covers (0: none). `now_ms`: the retention clock, for the slot it takes.
  int32_t load_from_tier(const Request& r, KvStorage& kv, int64_t now_ms = 0);
  uint64_t num_tier_loads() const { return num_tier_loads_; }

  // A pinned prefix (KvCacheManager::pin_prefix, named by `pin_key`) keeps the deepest checkpoint among the full
  // blocks of tokens[0, num_tokens) in namespace `ns`: it is never evicted while pinned, so the pin's KV can still be
  // resumed. At most half the checkpoint slots are pinned; beyond that (or with no checkpoint there) nothing is.
  // Returns the tokens the pinned checkpoint covers (0: none).
  int32_t pin(const BlockHash& pin_key, const BlockHash& ns, std::span<const TokenId> tokens, int32_t num_tokens);
  void unpin(const BlockHash& pin_key);

 private:
  struct Running {
    int32_t slot = 0;
    int32_t num_tokens = 0;        // the state follows tokens [0, num_tokens)
    std::vector<BlockHash> keys;   // keys of the request's leading full blocks, computed as needed
  };
  // Keys of r's first n_blocks blocks in its cache namespace (ns) or its state namespace (state_ns).
  static std::vector<BlockHash> chain_keys(const Request& r, const BlockHash& ns, int32_t n_blocks, int32_t block_size);
  // Why a checkpoint was kept, in the order eviction spares them (kinds of the comment above).
  enum class Kind : uint8_t { kPassing, kPromptEnd, kBranch };
  struct Checkpoint {
    int32_t slot = 0;
    uint64_t last_used = 0;
    int32_t pins = 0;  // pinned prefixes keeping it (never evicted while > 0)
    uint8_t priority = kDefaultRetentionPriority;
    Kind kind = Kind::kPassing;
    int64_t expires_at = kNoExpiry;  // the priority counts as 0 from then on
  };
  // The retention of the block ending at `boundary` (priority, expiry) from r's spans.
  static std::pair<uint8_t, int64_t> retention_at(const Request& r, int32_t boundary, int32_t block_size,
                                                  int64_t now_ms);
  // Key of block `index` of r's tokens (its tokens up to that block's end must exist).
  const BlockHash& block_key(Running& run, const Request& r, int32_t index);
  // A checkpoint slot: a free one, else the one of the checkpoint least worth keeping (forgotten; the order of the
  // comment above), never a pinned or planned one. −1 with no slots.
  int32_t take_checkpoint_slot(int64_t now_ms);

  int32_t n_running_;
  int32_t n_checkpoints_;
  int32_t block_size_;
  uint64_t clock_ = 0;
  uint64_t num_resumes_ = 0;
  uint64_t num_checkpoints_written_ = 0;
  uint64_t num_tier_loads_ = 0;
  std::vector<BlockTier*> tiers_;
  std::string layout_;
  std::vector<int32_t> free_running_;
  std::vector<int32_t> free_checkpoints_;
  std::vector<int32_t> planned_slots_;  // slots plan_checkpoints gave out whose forward has not run (persist)
  std::unordered_map<RequestId, Running> running_;
  std::unordered_map<BlockHash, Checkpoint> checkpoints_;
  std::unordered_map<BlockHash, BlockHash> pinned_;  // pin key → the checkpoint's key
  int32_t num_pinned_ = 0;                           // checkpoints with pins > 0
};

}  // namespace hearth
