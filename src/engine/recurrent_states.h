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
// one checkpoint, at the last block boundary inside it (the end of a prompt's last full block, of every 512-token
// prefill chunk, of every block of an answer), written by the forward itself at that token. Checkpoints are
// evicted least recently used first when a new one needs a slot; a block whose checkpoint is gone is still a valid
// KV block, but a hit can no longer end there.
//
// Because the state update has one definition whatever the chunking (kernels/delta_net.h), a request resumed from a
// checkpoint computes the bits a cold run does.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "util/ids.h"

namespace hearth {

class KvStorage;
struct Request;

class RecurrentStates {
 public:
  // Requires n_running >= 1, n_checkpoints >= 0, block_size >= 1.
  RecurrentStates(int32_t n_running, int32_t n_checkpoints, int32_t block_size);

  int32_t num_running_slots() const { return n_running_; }
  int32_t num_checkpoint_slots() const { return n_checkpoints_; }
  int32_t num_checkpoints() const { return static_cast<int32_t>(checkpoints_.size()); }
  // Whether a checkpoint follows the block with this key (KvCacheConfig::resumable_after).
  bool has_checkpoint(const BlockHash& key) const { return checkpoints_.contains(key); }

  // The running slot request r's chunk at [pos_begin, pos_begin + n_tokens) runs in, holding the state after token
  // pos_begin − 1: a fresh slot when r has none; the checkpoint after block pos_begin / block_size − 1 copied in
  // when the slot's state is not at pos_begin (position 0: the forward clears it). Call it for every chunk of a
  // step before plan_checkpoint, so no checkpoint a hit resumes from is evicted first. Requires: a free running slot
  // when r has none; that checkpoint when one is needed (aborts: the hit was cut back to one).
  int32_t acquire(const Request& r, int32_t pos_begin, int32_t n_tokens, KvStorage& kv);

  // The chunk's checkpoint: the state after its last block boundary (pos = that boundary), into a slot registered
  // now under that block's key (the forward writes it). pos −1: none (no boundary in the chunk, r without the
  // cache, no checkpoint slots, or that block's state already kept). Requires acquire for r first.
  struct CheckpointPlan {
    int32_t pos = -1;
    int32_t slot = -1;
  };
  CheckpointPlan plan_checkpoint(const Request& r, int32_t pos_begin, int32_t n_tokens);

  uint64_t num_resumes() const { return num_resumes_; }
  uint64_t num_checkpoints_written() const { return num_checkpoints_written_; }

  // Frees r's running slot (finished, aborted or preempted); its state is gone. No-op when it has none.
  void forget(RequestId id);

 private:
  struct Running {
    int32_t slot = 0;
    int32_t num_tokens = 0;        // the state follows tokens [0, num_tokens)
    std::vector<BlockHash> keys;   // keys of the request's leading full blocks, computed as needed
  };
  struct Checkpoint {
    int32_t slot = 0;
    uint64_t last_used = 0;
  };
  // Key of block `index` of r's tokens (its tokens up to that block's end must exist).
  const BlockHash& block_key(Running& run, const Request& r, int32_t index);
  // A checkpoint slot: a free one, else the least recently used checkpoint's (forgotten). −1 with no slots.
  int32_t take_checkpoint_slot();

  int32_t n_running_;
  int32_t n_checkpoints_;
  int32_t block_size_;
  uint64_t clock_ = 0;
  uint64_t num_resumes_ = 0;
  uint64_t num_checkpoints_written_ = 0;
  std::vector<int32_t> free_running_;
  std::vector<int32_t> free_checkpoints_;
  std::unordered_map<RequestId, Running> running_;
  std::unordered_map<BlockHash, Checkpoint> checkpoints_;
};

}  // namespace hearth
